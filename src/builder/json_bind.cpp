// Binding a graph spec to buffers: kernels, arguments, buffers, host functions and
// dependencies are resolved into a Graph; every problem is collected at its JSON pointer,
// core validation included.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <algorithm>
#include <unordered_map>

#include "flowdsl/json.hpp"
#include "json_support.hpp"

namespace flowdsl {

using json_detail::token;

namespace {

std::string node_pointer(std::size_t i) { return "/nodes/" + std::to_string(i); }

std::string list_names(const std::vector<KernelParam>& params) {
  std::string out;
  for (const KernelParam& p : params) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

// Converts a scalar from the file to the bytes of a parameter of type `type`; empty on success,
// else what was expected.
template <class T>
std::string store_integer(const ScalarValue& v, unsigned char* out) {
  using limits = std::numeric_limits<T>;
  const std::string range = "[" + std::to_string(limits::min()) + ", " + std::to_string(limits::max()) + "]";
  T value{};
  switch (v.kind) {
    case ScalarValue::Kind::floating:
      return "expected an integer in " + range + ", found a number with a fraction or exponent";
    case ScalarValue::Kind::signed_integer:
      if (v.i < static_cast<std::int64_t>(limits::min()) ||
          (v.i > 0 && static_cast<std::uint64_t>(v.i) > static_cast<std::uint64_t>(limits::max()))) {
        return "value " + std::to_string(v.i) + " is out of range " + range;
      }
      value = static_cast<T>(v.i);
      break;
    case ScalarValue::Kind::unsigned_integer:
      if (v.u > static_cast<std::uint64_t>(limits::max())) return "value " + std::to_string(v.u) + " is out of range " + range;
      value = static_cast<T>(v.u);
      break;
  }
  std::memcpy(out, &value, sizeof(T));
  return {};
}

double as_double(const ScalarValue& v) {
  switch (v.kind) {
    case ScalarValue::Kind::signed_integer:
      return static_cast<double>(v.i);
    case ScalarValue::Kind::unsigned_integer:
      return static_cast<double>(v.u);
    case ScalarValue::Kind::floating:
      break;
  }
  return v.f;
}

template <class T, class Convert>
std::string store_float(const ScalarValue& v, double max, Convert convert, unsigned char* out) {
  const double d = as_double(v);
  if (!(std::fabs(d) <= max)) return "value " + std::to_string(d) + " is out of range of the type (largest " + std::to_string(max) + ")";
  const T value = convert(d);
  std::memcpy(out, &value, sizeof(T));
  return {};
}

std::string store_scalar(const ScalarValue& v, ScalarType type, unsigned char* out) {
  switch (type) {
    case ScalarType::i8:
      return store_integer<std::int8_t>(v, out);
    case ScalarType::i16:
      return store_integer<std::int16_t>(v, out);
    case ScalarType::i32:
      return store_integer<std::int32_t>(v, out);
    case ScalarType::i64:
      return store_integer<std::int64_t>(v, out);
    case ScalarType::u8:
      return store_integer<std::uint8_t>(v, out);
    case ScalarType::u16:
      return store_integer<std::uint16_t>(v, out);
    case ScalarType::u32:
      return store_integer<std::uint32_t>(v, out);
    case ScalarType::u64:
      return store_integer<std::uint64_t>(v, out);
    case ScalarType::f16:
      return store_float<__half>(v, 65504.0, [](double d) { return __double2half(d); }, out);
    case ScalarType::bf16:
      return store_float<__nv_bfloat16>(v, 3.3895313892515355e38, [](double d) { return __double2bfloat16(d); }, out);
    case ScalarType::f32:
      return store_float<float>(v, std::numeric_limits<float>::max(), [](double d) { return static_cast<float>(d); }, out);
    case ScalarType::f64:
      return store_float<double>(v, std::numeric_limits<double>::max(), [](double d) { return d; }, out);
  }
  return "unsupported type";
}

// Builds a Graph from a spec, collecting problems instead of stopping at the first.
class Binder {
 public:
  Binder(const GraphSpec& spec, const BufferAddresses& addresses, const KernelRegistry& registry,
         const HostFunctions& hosts)
      : spec_(spec), addresses_(addresses), registry_(registry), hosts_(hosts) {}

  Graph run(const std::string& source) {
    index_buffers();
    index_nodes();
    for (std::size_t i = 0; i < spec_.nodes.size(); ++i) add_node(i);
    for (std::size_t i = 0; i < spec_.nodes.size(); ++i) add_edges(i);
    if (problems_.empty()) validate();
    if (!problems_.empty()) throw JsonError(std::move(problems_), source);
    return std::move(graph_);
  }

 private:
  void problem(std::string pointer, std::string message) {
    problems_.push_back(JsonProblem{std::move(pointer), std::move(message)});
  }

  void index_buffers() {
    for (std::size_t i = 0; i < spec_.buffers.size(); ++i) {
      const BufferSpec& b = spec_.buffers[i];
      if (!buffers_.emplace(b.name, &b).second) {
        problem("/buffers/" + std::to_string(i) + "/name", "buffer '" + b.name + "' is declared twice");
      } else if (addresses_.find(b.name) == addresses_.end()) {
        problem("/buffers/" + std::to_string(i), "no device address was given for buffer '" + b.name + "'");
      }
    }
  }

  void index_nodes() {
    for (std::size_t i = 0; i < spec_.nodes.size(); ++i) nodes_.emplace(spec_.nodes[i].name, i);
  }

  // The address of `ref`, checking that `bytes` bytes from it stay inside the buffer and that
  // it is aligned to `align`; null (and a problem) when not.
  const BufferSpec* buffer(const BufferRef& ref, const std::string& pointer) {
    const auto it = buffers_.find(ref.buffer);
    if (it == buffers_.end()) {
      problem(pointer, "unknown buffer '" + ref.buffer + "'");
      return nullptr;
    }
    return it->second;
  }

  void* address(const BufferRef& ref, std::uint64_t bytes, std::uint64_t align, const std::string& pointer) {
    const BufferSpec* b = buffer(ref, pointer);
    if (b == nullptr) return nullptr;
    if (ref.offset > b->bytes() || bytes > b->bytes() - ref.offset) {
      problem(pointer, "out of range: " + std::to_string(bytes) + " bytes at offset " + std::to_string(ref.offset) +
                           " overrun buffer '" + b->name + "' of " + std::to_string(b->bytes()) + " bytes");
      return nullptr;
    }
    if (align > 1 && ref.offset % align != 0) {
      problem(pointer, "offset " + std::to_string(ref.offset) + " into buffer '" + b->name + "' is not a multiple of " +
                           std::to_string(align) + " bytes");
      return nullptr;
    }
    const auto found = addresses_.find(ref.buffer);
    if (found == addresses_.end()) return nullptr;  // reported by index_buffers
    return static_cast<unsigned char*>(found->second) + ref.offset;
  }

  void add_node(std::size_t i) {
    const NodeSpec& node = spec_.nodes[i];
    const std::string at = node_pointer(i);
    std::optional<NodeHandle> handle;
    std::visit([&](const auto& op) { handle = add(node.name, op, at); }, node.op);
    handles_.push_back(handle);
    if (!handle) return;
    for (std::size_t j = 0; j < node.reads.size(); ++j) {
      const AccessSpec& a = node.reads[j];
      if (void* ptr = address(a.at, a.bytes, 1, at + "/reads/" + std::to_string(j))) handle->reads(ptr, a.bytes);
    }
    for (std::size_t j = 0; j < node.writes.size(); ++j) {
      const AccessSpec& a = node.writes[j];
      if (void* ptr = address(a.at, a.bytes, 1, at + "/writes/" + std::to_string(j))) handle->writes(ptr, a.bytes);
    }
  }

  std::optional<NodeHandle> add(const std::string& name, const KernelNodeSpec& k, const std::string& at) {
    const KernelInfo* info = registry_.find(k.kernel);
    if (info == nullptr) {
      const bool declared = std::any_of(spec_.kernel_files.begin(), spec_.kernel_files.end(),
                                        [&](const KernelFileSpec& f) { return f.name == k.kernel; });
      problem(at + "/kernel", declared ? "kernel '" + k.kernel + "' is declared in kernel_files but was not loaded "
                                                                 "(load the file with flowdsl::load_kernel_files)"
                                       : "unknown kernel '" + k.kernel + "' (not registered)");
      return std::nullopt;
    }
    const std::size_t before = problems_.size();
    std::vector<std::pair<std::size_t, std::vector<unsigned char>>> values;
    for (const ArgumentSpec& arg : k.args) {
      const std::string where = at + "/args" + token(arg.param);
      const std::size_t index = info->index_of(arg.param);
      if (index == info->params.size()) {
        problem(where, "unknown parameter '" + arg.param + "' of kernel '" + info->name + "' (parameters: " +
                           list_names(info->params) + ")");
        continue;
      }
      std::vector<unsigned char> bytes(info->params[index].type.size());
      if (argument(arg, info->params[index], where, bytes.data())) values.emplace_back(index, std::move(bytes));
    }
    for (const KernelParam& p : info->params) {
      const bool given = std::any_of(k.args.begin(), k.args.end(), [&](const ArgumentSpec& a) { return a.param == p.name; });
      if (!given) {
        problem(at + "/args" + token(p.name), "missing argument for parameter '" + p.name + "' (" + to_string(p.type) +
                                                   ") of kernel '" + info->name + "'");
      }
    }
    if (problems_.size() != before) return std::nullopt;
    auto node = graph_.kernel(name, *info).launch(k.launch.grid, k.launch.block, k.launch.shared_bytes);
    for (const auto& [index, bytes] : values) node.set_bytes(info->params[index].name, bytes.data(), bytes.size());
    return node;
  }

  bool argument(const ArgumentSpec& arg, const KernelParam& param, const std::string& where, unsigned char* out) {
    const ParamType& type = param.type;
    if (const auto* ref = std::get_if<BufferRef>(&arg.value)) {
      if (!type.pointer) {
        problem(where, "wrong type: parameter '" + param.name + "' takes " + to_string(type) +
                           " by value, found buffer '" + ref->buffer + "'");
        return false;
      }
      const BufferSpec* b = buffer(*ref, where);
      if (b == nullptr) return false;
      if (b->type != type.scalar) {
        problem(where, "wrong type: parameter '" + param.name + "' takes " + to_string(type) + ", buffer '" + b->name +
                           "' holds " + std::string(to_string(b->type)));
        return false;
      }
      void* ptr = address(*ref, 0, size_of(b->type), where);
      if (ptr == nullptr) return false;
      std::memcpy(out, &ptr, sizeof ptr);
      return true;
    }
    if (type.pointer) {
      problem(where, "wrong type: parameter '" + param.name + "' takes " + to_string(type) +
                         ", a buffer name, found a number");
      return false;
    }
    const std::string why = store_scalar(std::get<ScalarValue>(arg.value), type.scalar, out);
    if (!why.empty()) problem(where, "parameter '" + param.name + "' (" + to_string(type) + "): " + why);
    return why.empty();
  }

  std::optional<NodeHandle> add(const std::string& name, const MemcpyNodeSpec& m, const std::string& at) {
    void* dst = address(m.dst, m.bytes, 1, at + "/dst");
    void* src = address(m.src, m.bytes, 1, at + "/src");
    if (dst == nullptr || src == nullptr) return std::nullopt;
    return graph_.memcpy(name, dst, src, m.bytes);
  }

  std::optional<NodeHandle> add(const std::string& name, const MemsetNodeSpec& m, const std::string& at) {
    if (m.element_size != 1 && m.element_size != 2 && m.element_size != 4) {
      problem(at + "/element_size", "element size " + std::to_string(m.element_size) + " is not 1, 2 or 4");
      return std::nullopt;
    }
    if (m.element_size < 4 && m.value >> (8 * m.element_size) != 0) {
      problem(at + "/value", "value " + std::to_string(m.value) + " is out of range of " +
                                 std::to_string(m.element_size) + "-byte elements");
      return std::nullopt;
    }
    void* dst = address(m.dst, m.count * m.element_size, m.element_size, at + "/dst");
    if (dst == nullptr) return std::nullopt;
    return graph_.memset(name, dst, m.value, m.count, m.element_size);
  }

  std::optional<NodeHandle> add(const std::string& name, const EmptyNodeSpec&, const std::string&) { return graph_.empty(name); }

  std::optional<NodeHandle> add(const std::string& name, const HostNodeSpec& h, const std::string& at) {
    const auto it = hosts_.find(h.function);
    if (it == hosts_.end()) {
      std::string known;
      for (const auto& entry : hosts_) known += (known.empty() ? "" : ", ") + entry.first;
      problem(at + "/function", "unknown host function '" + h.function + "' (known: " + (known.empty() ? "none" : known) + ")");
      return std::nullopt;
    }
    return graph_.host(name, it->second.fn, it->second.user_data);
  }

  void add_edges(std::size_t i) {
    const NodeSpec& node = spec_.nodes[i];
    for (std::size_t j = 0; j < node.after.size(); ++j) {
      const auto it = nodes_.find(node.after[j]);
      if (it == nodes_.end()) {
        problem(node_pointer(i) + "/after/" + std::to_string(j), "dependency on unknown node '" + node.after[j] + "'");
        continue;
      }
      if (handles_[i]) handles_[i]->after(node.after[j]);
    }
  }

  // Core validation, each diagnostic mapped to the node it names.
  void validate() {
    try {
      (void)graph_.plan();
    } catch (const ValidationError& e) {
      for (const Diagnostic& d : e.diagnostics()) {
        const auto it = d.nodes.empty() ? nodes_.end() : nodes_.find(d.nodes.front());
        problem(it == nodes_.end() ? std::string() : node_pointer(it->second), d.message);
      }
    }
  }

  const GraphSpec& spec_;
  const BufferAddresses& addresses_;
  const KernelRegistry& registry_;
  const HostFunctions& hosts_;
  std::vector<JsonProblem> problems_;
  std::unordered_map<std::string_view, const BufferSpec*> buffers_;
  std::unordered_map<std::string_view, std::size_t> nodes_;  ///< first node with each name
  std::vector<std::optional<NodeHandle>> handles_;  ///< per spec node; empty when it failed
  Graph graph_;
};

// The function of kernels declared in kernel_files while checking without loading them.
const unsigned char placeholder_kernel = 0;

}  // namespace

Graph bind_graph(const GraphSpec& spec, const BufferAddresses& addresses, const KernelRegistry& registry,
           const HostFunctions& hosts, const std::string& source) {
  return Binder(spec, addresses, registry, hosts).run(source);
}

Graph inspect_graph(const GraphSpec& spec, const KernelRegistry& registry, const HostFunctions& hosts,
                    const std::string& source) {
  // Placeholder addresses: disjoint, non-null, never dereferenced (nothing is launched).
  BufferAddresses addresses;
  std::uintptr_t next = 1u << 16;
  for (const BufferSpec& b : spec.buffers) {
    addresses.emplace(b.name, reinterpret_cast<void*>(next));
    next += (b.bytes() + 255) / 256 * 256;
  }
  std::vector<JsonProblem> problems;
  KernelRegistry scratch;
  for (const KernelInfo* info : registry.list()) scratch.add(*info);
  for (std::size_t i = 0; i < spec.kernel_files.size(); ++i) {
    const KernelFileSpec& f = spec.kernel_files[i];
    if (registry.find(f.name) != nullptr) {
      problems.push_back({"/kernel_files/" + std::to_string(i) + "/name", "kernel '" + f.name + "' is already registered"});
      continue;
    }
    try {
      scratch.add(KernelInfo{f.name, &placeholder_kernel, f.params, {}});
    } catch (const UsageError& e) {
      problems.push_back({"/kernel_files/" + std::to_string(i), e.what()});
    }
  }
  try {
    Graph graph = bind_graph(spec, addresses, scratch, hosts, source);
    if (problems.empty()) return graph;
  } catch (const JsonError& e) {
    problems.insert(problems.end(), e.problems().begin(), e.problems().end());
  }
  throw JsonError(std::move(problems), source);
}

void check_graph(const GraphSpec& spec, const KernelRegistry& registry, const HostFunctions& hosts,
                 const std::string& source) {
  (void)inspect_graph(spec, registry, hosts, source);
}

}  // namespace flowdsl
