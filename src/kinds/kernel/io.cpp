// Kernel nodes in graph files and DOT dumps: registered kernel by name, launch shape, arguments
// by parameter name (buffers for pointers, numbers for scalars, range-checked per type).
#include <cmath>
#include <cstring>
#include <limits>

#include "dot_text.hpp"
#include "io_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

namespace {

std::string list_names(const std::vector<KernelParam>& params) {
  std::string out;
  for (const KernelParam& p : params) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

// Stores a number of the file as a scalar of the visited type `T`; empty on success, else what
// was expected.
template <class T>
std::string store_scalar(const json& v, unsigned char* out) {
  T value{};
  if constexpr (std::is_integral_v<T>) {
    using limits = std::numeric_limits<T>;
    const std::string range = "[" + std::to_string(limits::min()) + ", " + std::to_string(limits::max()) + "]";
    if (v.is_number_float()) return "expected an integer in " + range + ", found a number with a fraction or exponent";
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(limits::max())) return "value " + std::to_string(u) + " is out of range " + range;
      value = static_cast<T>(u);
    } else {
      const auto i = v.get<std::int64_t>();
      if (i < static_cast<std::int64_t>(limits::min()) ||
          (i > 0 && static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(limits::max()))) {
        return "value " + std::to_string(i) + " is out of range " + range;
      }
      value = static_cast<T>(i);
    }
  } else {
    const double max = [] {
      if constexpr (is_16bit_float<T>) {
        return T::max;
      } else {
        return static_cast<double>(std::numeric_limits<T>::max());
      }
    }();
    const double d = v.get<double>();
    if (!(std::fabs(d) <= max)) {
      return "value " + std::to_string(d) + " is out of range of the type (largest " + std::to_string(max) + ")";
    }
    if constexpr (is_16bit_float<T>) {
      value = T::from_double(d);
    } else {
      value = static_cast<T>(d);
    }
  }
  std::memcpy(out, &value, sizeof(T));
  return {};
}

// One argument's bytes; false after reporting a problem at `where`. (A condition argument is
// bound once the node is declared: see bind_json.)
bool bind_argument(const json& value, const KernelParam& param, const std::string& where, NodeBinder& binder,
                   unsigned char* out) {
  const ParamType& type = param.type;
  if (type.condition) {
    if (value.is_string()) return true;
    binder.problem(where, "wrong type: parameter '" + param.name +
                              "' takes a condition, the name of a conditional node, found " +
                              (value.is_object() ? std::string("a buffer reference") : type_of(value)));
    return false;
  }
  if (value.is_string() || value.is_object()) {
    BufferRef ref;
    from_json(value, ref);
    if (!type.pointer) {
      binder.problem(where, "wrong type: parameter '" + param.name + "' takes " + to_string(type) +
                                " by value, found buffer '" + ref.buffer + "'");
      return false;
    }
    // A buffer must hold the parameter's element type; an alloc's memory is untyped bytes.
    if (!binder.names_alloc(ref)) {
      const BufferSpec* b = binder.buffer(ref, where);
      if (b == nullptr) return false;
      if (b->type != type.scalar) {
        binder.problem(where, "wrong type: parameter '" + param.name + "' takes " + to_string(type) + ", buffer '" +
                                  b->name + "' holds " + std::string(to_string(b->type)));
        return false;
      }
    }
    void* ptr = binder.address(ref, 0, size_of(type.scalar), where);
    if (ptr == nullptr) return false;
    std::memcpy(out, &ptr, sizeof ptr);
    return true;
  }
  if (type.pointer) {
    binder.problem(where, "wrong type: parameter '" + param.name + "' takes " + to_string(type) +
                              ", a buffer name, found a number");
    return false;
  }
  const std::string why =
      visit_scalar(type.scalar, [&](auto tag) { return store_scalar<typename decltype(tag)::type>(value, out); });
  if (!why.empty()) binder.problem(where, "parameter '" + param.name + "' (" + to_string(type) + "): " + why);
  return why.empty();
}

const KernelInfo* find_kernel(const std::string& name, NodeBinder& binder) {
  const KernelInfo* info = binder.find_kernel(name);
  if (info != nullptr) return info;
  const auto& files = binder.spec().kernel_files;
  const bool declared =
      std::any_of(files.begin(), files.end(), [&](const KernelFileSpec& f) { return f.name == name; });
  binder.problem("/kernel", declared ? "kernel '" + name + "' is declared in kernel_files but was not loaded "
                                                           "(load the file with flowdsl::load_kernel_files)"
                                     : "unknown kernel '" + name + "' (not registered)");
  return nullptr;
}

// A number as JSON writes it: integers stay integers.
json scalar_json(const ParamType& type, const void* bytes) {
  return visit_scalar(type.scalar, [&](auto tag) -> json {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      return value;
    } else {
      return to_double(value);
    }
  });
}

// A Condition argument as DOT shows it: the conditional node whose condition it is.
std::string condition_text(const Description& d, std::uint64_t word) {
  const std::uint32_t index = symbol::index_of(word);
  if (!symbol::is_symbol(word) || index >= d.symbols.size() || symbol::offset_of(word) != 0) {
    return "condition (of no node of this graph)";
  }
  return "condition of '" + node_path(d, d.symbols[index]) + "'";
}

}  // namespace

std::vector<BodyMember> json_bodies(Tag<KernelOp>) { return {}; }

json json_schema(Tag<KernelOp>) {
  // A number (scalar), or a string: a buffer reference (pointer) or a conditional node's name (condition).
  const json argument = {{"oneOf", json::array({{{"type", "number"}}, {{"$ref", "#/$defs/buffer_ref"}}})}};
  json properties = {{"kernel", {{"type", "string"}}},
                     {"grid", {{"$ref", "#/$defs/dim"}}},
                     {"block", {{"$ref", "#/$defs/dim"}}},
                     {"shared_bytes", {{"type", "integer"}, {"minimum", 0}, {"maximum", 4294967295u}}},
                     {"args", {{"type", "object"}, {"additionalProperties", argument}}}};
  return {{"required", json::array({"kernel"})}, {"properties", std::move(properties)}};
}

json read_json(Tag<KernelOp>, json&& node) {
  // The members are kept where the parser put them; only the launch shape is rewritten (a
  // dimension in its shortest form, shared_bytes as an unsigned number).
  json fields = std::move(node);
  (void)get_string(fields, "kernel");
  for (const char* dim : {"grid", "block"}) {
    if (optional_member(fields, dim) != nullptr) fields[dim] = write_dim(get_dim(fields, dim));
  }
  if (optional_member(fields, "shared_bytes") != nullptr) {
    fields["shared_bytes"] = get_unsigned(fields, "shared_bytes", std::numeric_limits<std::uint32_t>::max());
  }
  const auto args = fields.find("args");
  if (args == fields.end()) {
    fields["args"] = json::object();
    return fields;
  }
  if (!args->is_object()) fail("/args", "expected an object of arguments by parameter name, found " + type_of(*args));
  for (const auto& item : args->items()) {
    const json& v = item.value();
    within("/args" + token(item.key()), [&] {
      if (v.is_string() || v.is_object()) {
        BufferRef ref;
        from_json(v, ref);
      } else if (!v.is_number()) {
        fail("", "expected a number (scalar parameter) or a buffer name (pointer parameter), found " + type_of(v));
      }
    });
  }
  return fields;
}

std::optional<NodeHandle> bind_json(Tag<KernelOp>, const std::string& name, const json& fields, NodeBinder& binder) {
  const KernelInfo* info = find_kernel(fields.at("kernel").get_ref<const std::string&>(), binder);
  if (info == nullptr) return std::nullopt;
  bool ok = true;
  // Every parameter is a scalar or a pointer: 8 bytes at most.
  struct Value {
    std::size_t index;
    unsigned char bytes[8];
  };
  std::vector<Value> values;
  const json& args = fields.at("args");
  values.reserve(args.size());
  for (const auto& item : args.items()) {
    const std::string where = "/args" + token(item.key());
    const std::size_t index = info->index_of(item.key());
    if (index == info->params.size()) {
      binder.problem(where, "unknown parameter '" + item.key() + "' of kernel '" + info->name + "' (parameters: " +
                                list_names(info->params) + ")");
      ok = false;
      continue;
    }
    Value value{index, {}};
    if (bind_argument(item.value(), info->params[index], where, binder, value.bytes)) {
      values.push_back(value);
    } else {
      ok = false;
    }
  }
  // Each argument named a distinct parameter: as many as there are parameters means none is missing.
  for (const KernelParam& p : info->params) {
    if (values.size() == info->params.size()) break;
    if (!args.contains(p.name)) {
      binder.problem("/args" + token(p.name), "missing argument for parameter '" + p.name + "' (" + to_string(p.type) +
                                                  ") of kernel '" + info->name + "'");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  auto node = binder.builder().kernel(name, *info);
  // A shape the file does not give stays unset, and validation says so (there is no default).
  if (fields.contains("grid")) node.grid(get_dim(fields, "grid"));
  if (fields.contains("block")) node.block(get_dim(fields, "block"));
  if (fields.contains("shared_bytes")) node.shared_memory(fields.at("shared_bytes").get<std::uint32_t>());
  for (const Value& v : values) {
    const KernelParam& p = info->params[v.index];
    if (!p.type.condition) {
      node.set_bytes(p.name, v.bytes, p.type.size());
      continue;
    }
    // The conditional node it names may be declared later in the file: the binder sets the
    // argument once it is. A name that finds none is reported; the graph is then not built.
    const std::string& target = args.at(p.name).get_ref<const std::string&>();
    (void)binder.condition(target, "/args" + token(p.name), [node, name = p.name](Condition c) mutable {
      node.set(name, c);
    });
  }
  return NodeHandle(node);
}

json describe_json(const KernelOp& op, NodeDescriber& describer) {
  json fields = json::object();
  const KernelInfo* info = describer.registry().find_function(op.function);
  if (info == nullptr) info = describer.registry().find(op.kernel_name);
  if (info == nullptr) {
    describer.problem("/kernel", "the kernel (named '" + op.kernel_name + "') is not registered");
    return fields;
  }
  fields["kernel"] = info->name;
  if (op.grid_set) fields["grid"] = write_dim(op.launch.grid);
  if (op.block_set) fields["block"] = write_dim(op.launch.block);
  if (op.launch.shared_bytes != 0) fields["shared_bytes"] = op.launch.shared_bytes;
  json args = json::object();
  if (info->params.size() != op.args.size()) {
    describer.problem("/args", "registered kernel '" + info->name + "' takes " + std::to_string(info->params.size()) +
                                   " parameters, the node has " + std::to_string(op.args.size()) + " arguments");
    return fields;
  }
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    const KernelParam& p = info->params[i];
    const std::string where = "/args" + token(p.name);
    if (!op.args.bound(i)) continue;  // the reader reports it missing, as validation would
    if (op.args.slot_size(i) != p.type.size()) {
      describer.problem(where, "argument of " + std::to_string(op.args.slot_size(i)) + " bytes for parameter '" + p.name +
                                   "' (" + to_string(p.type) + ")");
      continue;
    }
    if (p.type.pointer) {
      const void* ptr = nullptr;
      std::memcpy(&ptr, op.args.data(i), sizeof ptr);
      args[p.name] = describer.locate(ptr, where);
      continue;
    }
    if (p.type.condition) {
      std::string target = describer.condition_name(op.args.word(i), where);
      if (!target.empty()) args[p.name] = std::move(target);
      continue;
    }
    json value = scalar_json(p.type, op.args.data(i));
    if (value.is_number_float() && !std::isfinite(value.get<double>())) {
      describer.problem(where, "the value is not finite; JSON has no form for it");
      continue;
    }
    args[p.name] = std::move(value);
  }
  fields["args"] = std::move(args);
  return fields;
}

void dot_label(const KernelOp& op, DotLabel& label) {
  const std::string kernel = kernel_name_of(op);
  label.lines.push_back("kernel " + (kernel.empty() ? std::string("(unnamed)") : kernel));
  label.lines.push_back((op.grid_set ? "grid " + dims(op.launch.grid) : std::string("grid (unset)")) +
                        (op.block_set ? " block " + dims(op.launch.block) : std::string(" block (unset)")) +
                        (op.launch.shared_bytes ? " smem " + std::to_string(op.launch.shared_bytes) : ""));
  if (!label.options.show_arguments) return;
  const KernelInfo* info = label.options.registry ? label.options.registry->find_function(op.function) : nullptr;
  if (info != nullptr && info->params.size() != op.args.size()) info = nullptr;
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    const std::string name = info ? info->params[i].name : "#" + std::to_string(i);
    if (!op.args.bound(i)) {
      label.lines.push_back(name + " = (unset)");
    } else if (op.args.kind(i) == SlotKind::condition) {
      label.lines.push_back(name + " = " + condition_text(label.description, op.args.word(i)));
    } else if (info && info->params[i].type.size() == op.args.slot_size(i)) {
      label.lines.push_back(name + " = " + value_text(info->params[i].type, op.args.data(i), label.addresses));
    } else {
      label.lines.push_back(name + " = " + hex_bytes(op.args.data(i), op.args.slot_size(i)));
    }
  }
}

const char* dot_colour(Tag<KernelOp>) { return "lightblue"; }

}  // namespace flowdsl::io
