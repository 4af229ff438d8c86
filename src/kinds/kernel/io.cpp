// Kernel nodes in graph files and DOT dumps: registered kernel by name, launch shape, arguments
// by parameter name (buffers for pointers, numbers for scalars, range-checked per type).
#include <limits>

#include "dot_text.hpp"
#include "io_facets.hpp"
#include "json_arguments.hpp"

namespace flowdsl::io {

using namespace json_detail;

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
  read_arguments(fields);
  return fields;
}

std::optional<NodeHandle> bind_json(Tag<KernelOp>, const std::string& name, const json& fields, NodeBinder& binder) {
  const KernelInfo* info = find_entry(fields.at("kernel").get_ref<const std::string&>(), "/kernel", binder);
  if (info == nullptr) return std::nullopt;
  if (info->is_call()) {
    binder.problem("/kernel",
                   quoted_name(info->name) + " is a library call, not a kernel (a node of kind \"library\" makes it)");
    return std::nullopt;
  }
  const json& args = fields.at("args");
  std::vector<BoundArgument> values;
  if (!bind_arguments(args, *info, binder, values)) return std::nullopt;
  auto node = binder.builder().kernel(name, *info);
  // A shape the file does not give stays unset, and validation says so (there is no default).
  if (fields.contains("grid")) node.grid(get_dim(fields, "grid"));
  if (fields.contains("block")) node.block(get_dim(fields, "block"));
  if (fields.contains("shared_bytes")) node.shared_memory(fields.at("shared_bytes").get<std::uint32_t>());
  for (const BoundArgument& v : values) {
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
    describer.problem("/kernel", "the kernel (named " + quoted_name(op.kernel_name) + ") is not registered");
    return fields;
  }
  fields["kernel"] = info->name;
  if (op.grid_set) fields["grid"] = write_dim(op.launch.grid);
  if (op.block_set) fields["block"] = write_dim(op.launch.block);
  if (op.launch.shared_bytes != 0) fields["shared_bytes"] = op.launch.shared_bytes;
  bool described = false;
  json args = describe_arguments(op.args, *info, describer, described);
  if (described) fields["args"] = std::move(args);
  return fields;
}

void dot_label(const KernelOp& op, DotLabel& label) {
  const std::string kernel = kernel_name_of(op);
  label.lines.push_back("kernel " + (kernel.empty() ? std::string("(unnamed)") : kernel));
  label.lines.push_back((op.grid_set ? "grid " + dims(op.launch.grid) : std::string("grid (unset)")) +
                        (op.block_set ? " block " + dims(op.launch.block) : std::string(" block (unset)")) +
                        (op.launch.shared_bytes ? " smem " + std::to_string(op.launch.shared_bytes) : ""));
  if (!label.options.show_arguments) return;
  dot_arguments(op.args, label.options.registry ? label.options.registry->find_function(op.function) : nullptr, label);
}

const char* dot_colour(Tag<KernelOp>) { return "lightblue"; }

}  // namespace flowdsl::io
