// Writing a C++-built graph as a graph spec: pointers become buffer names and offsets,
// functions become registered names.
#include <cmath>
#include <cstring>
#include <sstream>

#include "flowdsl/json.hpp"
#include "json_support.hpp"

namespace flowdsl {

using json_detail::token;

namespace {

template <class T>
T load(const void* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

ScalarValue scalar_from_bytes(ScalarType type, const void* bytes) {
  const auto signed_value = [](std::int64_t i) { return ScalarValue{ScalarValue::Kind::signed_integer, i, 0, 0}; };
  const auto unsigned_value = [](std::uint64_t u) { return ScalarValue{ScalarValue::Kind::unsigned_integer, 0, u, 0}; };
  const auto float_value = [](double f) { return ScalarValue{ScalarValue::Kind::floating, 0, 0, f}; };
  switch (type) {
    case ScalarType::i8:
      return signed_value(load<std::int8_t>(bytes));
    case ScalarType::i16:
      return signed_value(load<std::int16_t>(bytes));
    case ScalarType::i32:
      return signed_value(load<std::int32_t>(bytes));
    case ScalarType::i64:
      return signed_value(load<std::int64_t>(bytes));
    case ScalarType::u8:
      return unsigned_value(load<std::uint8_t>(bytes));
    case ScalarType::u16:
      return unsigned_value(load<std::uint16_t>(bytes));
    case ScalarType::u32:
      return unsigned_value(load<std::uint32_t>(bytes));
    case ScalarType::u64:
      return unsigned_value(load<std::uint64_t>(bytes));
    case ScalarType::f16:
      return float_value(static_cast<double>(__half2float(load<__half>(bytes))));
    case ScalarType::bf16:
      return float_value(static_cast<double>(__bfloat162float(load<__nv_bfloat16>(bytes))));
    case ScalarType::f32:
      return float_value(static_cast<double>(load<float>(bytes)));
    case ScalarType::f64:
      return float_value(load<double>(bytes));
  }
  return {};
}

class Describer {
 public:
  Describer(const Graph& graph, std::vector<BufferSpec> buffers, const BufferAddresses& addresses,
            const KernelRegistry& registry, const HostFunctions& hosts)
      : graph_(graph), addresses_(addresses), registry_(registry), hosts_(hosts) {
    spec_.buffers = std::move(buffers);
  }

  GraphSpec run(std::string name) {
    spec_.name = std::move(name);
    const Description& d = graph_.description();
    for (NodeId id = 0; id < d.nodes.size(); ++id) add_node(id);
    for (const Edge& e : d.edges) add_edge(e);
    if (!problems_.empty()) throw JsonError(std::move(problems_));
    return std::move(spec_);
  }

 private:
  static std::string at(NodeId id) { return "/nodes/" + std::to_string(id); }
  void problem(std::string pointer, std::string message) { problems_.push_back({std::move(pointer), std::move(message)}); }

  // The buffer and offset holding `ptr`; an empty buffer name (and a problem) when none does.
  BufferRef locate(const void* ptr, const std::string& where) {
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    for (const BufferSpec& b : spec_.buffers) {
      const auto it = addresses_.find(b.name);
      if (it == addresses_.end()) continue;
      const auto base = reinterpret_cast<std::uintptr_t>(it->second);
      if (p >= base && p - base < b.bytes()) return BufferRef{b.name, p - base};
    }
    std::ostringstream text;
    text << "pointer " << ptr << " lies in no named buffer";
    problem(where, text.str());
    return {};
  }

  void add_node(NodeId id) {
    const Node& node = graph_.description().nodes[id];
    NodeSpec out;
    out.name = node.name;
    std::visit([&](const auto& op) { out.op = describe(op, id); }, node.op);
    for (std::size_t j = 0; j < node.accesses.size(); ++j) {
      const Access& a = node.accesses[j];
      const AccessSpec spec{locate(a.ptr, at(id)), a.bytes};
      if (a.mode == AccessMode::read) {
        out.reads.push_back(spec);
      } else if (a.mode == AccessMode::write) {
        out.writes.push_back(spec);
      } else {
        problem(at(id), "declared read-write accesses have no JSON form (declare a read and a write)");
      }
    }
    spec_.nodes.push_back(std::move(out));
  }

  const KernelInfo* kernel_of(const KernelOp& op) const {
    for (const KernelInfo* info : registry_.list()) {
      if (info->function == op.function) return info;
    }
    return registry_.find(op.kernel_name);
  }

  KernelNodeSpec describe(const KernelOp& op, NodeId id) {
    KernelNodeSpec k{{}, op.launch, {}};
    const KernelInfo* info = kernel_of(op);
    if (info == nullptr) {
      problem(at(id) + "/kernel", "the kernel (named '" + op.kernel_name + "') is not registered");
      return k;
    }
    k.kernel = info->name;
    if (info->params.size() != op.args.size()) {
      problem(at(id) + "/args", "registered kernel '" + info->name + "' takes " + std::to_string(info->params.size()) +
                                    " parameters, the node has " + std::to_string(op.args.size()) + " arguments");
      return k;
    }
    for (std::size_t i = 0; i < op.args.size(); ++i) {
      const KernelParam& p = info->params[i];
      const std::string where = at(id) + "/args" + token(p.name);
      if (!op.args.bound(i)) continue;  // the reader reports it missing, as validation would
      if (op.args.slot_size(i) != p.type.size()) {
        problem(where, "argument of " + std::to_string(op.args.slot_size(i)) + " bytes for parameter '" + p.name +
                           "' (" + to_string(p.type) + ")");
        continue;
      }
      if (p.type.pointer) {
        k.args.push_back({p.name, locate(load<const void*>(op.args.data(i)), where)});
        continue;
      }
      const ScalarValue value = scalar_from_bytes(p.type.scalar, op.args.data(i));
      if (value.kind == ScalarValue::Kind::floating && !std::isfinite(value.f)) {
        problem(where, "the value is not finite; JSON has no form for it");
        continue;
      }
      k.args.push_back({p.name, value});
    }
    return k;
  }

  MemcpyNodeSpec describe(const MemcpyOp& op, NodeId id) {
    return MemcpyNodeSpec{locate(op.dst, at(id) + "/dst"), locate(op.src, at(id) + "/src"), op.bytes};
  }

  MemsetNodeSpec describe(const MemsetOp& op, NodeId id) {
    return MemsetNodeSpec{locate(op.dst, at(id) + "/dst"), op.value, op.element_size, op.count};
  }

  EmptyNodeSpec describe(const EmptyOp&, NodeId) { return {}; }

  HostNodeSpec describe(const HostOp& op, NodeId id) {
    for (const auto& [name, f] : hosts_) {
      if (f.fn == op.fn && f.user_data == op.user_data) return HostNodeSpec{name};
    }
    problem(at(id) + "/function", "the host function and user data match no named host function");
    return {};
  }

  std::string name_of(const NodeRef& ref) const {
    return ref.id == no_node ? ref.name : graph_.description().nodes[ref.id].name;
  }

  void add_edge(const Edge& e) {
    if (e.to.id != no_node) {
      spec_.nodes[e.to.id].after.push_back(name_of(e.from));
      return;
    }
    const std::string to = name_of(e.to);
    for (NodeSpec& n : spec_.nodes) {
      if (n.name == to) {
        n.after.push_back(name_of(e.from));
        return;
      }
    }
    problem("/nodes", "an edge leads to node '" + to + "', which is not declared");
  }

  const Graph& graph_;
  const BufferAddresses& addresses_;
  const KernelRegistry& registry_;
  const HostFunctions& hosts_;
  GraphSpec spec_;
  std::vector<JsonProblem> problems_;
};

}  // namespace

GraphSpec describe_graph(const Graph& graph, std::string name, std::vector<BufferSpec> buffers,
                   const BufferAddresses& addresses, const KernelRegistry& registry, const HostFunctions& hosts) {
  return Describer(graph, std::move(buffers), addresses, registry, hosts).run(std::move(name));
}

}  // namespace flowdsl
