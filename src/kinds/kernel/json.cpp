// SPDX-License-Identifier: Apache-2.0
// Kernel nodes in graph files: registered kernel by name, launch shape, arguments
// by parameter name (buffers for pointers, numbers for scalars, range-checked per type).
#include <array>
#include <cstring>
#include <limits>
#include <optional>

#include "json_facets.hpp"
#include "json_arguments.hpp"

namespace flowdsl::io {

using namespace json_detail;

std::vector<BodyMember> json_bodies(Tag<KernelOp>) { return {}; }

json json_schema(Tag<KernelOp>) {
  // A number (scalar), or a string: a buffer reference (pointer), a conditional node's name
  // (condition) or the name of a value (an enumerated scalar: "gelu").
  const json argument = {
      {"oneOf", json::array({{{"type", "number"}}, {{"$ref", "#/$defs/expr"}}, {{"$ref", "#/$defs/buffer_ref"}}})}};
  const char* from_rule = "optional for a kernel with a launch rule (the built-in ones): its rule's for the arguments";
  json properties = {{"kernel", {{"type", "string"}}},
                     {"grid", {{"$ref", "#/$defs/dim"}, {"description", from_rule}}},
                     {"block", {{"$ref", "#/$defs/dim"}, {"description", from_rule}}},
                     {"cluster",
                      {{"$ref", "#/$defs/dim"},
                       {"description", "thread-block cluster dimensions (the grid a multiple of them); " +
                                           std::string(from_rule) + ", else 1"}}},
                     {"shared_bytes",
                      {{"type", "integer"}, {"minimum", 0}, {"maximum", 4294967295u}, {"description", from_rule}}},
                     {"args", {{"type", "object"}, {"additionalProperties", argument}}}};
  return {{"required", json::array({"kernel"})}, {"properties", std::move(properties)}};
}

namespace {
constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();

// A kernel node's members, found in one walk over them (a file's node, or its fields).
constexpr std::array<std::string_view, 6> field_keys = {"kernel", "grid", "block", "cluster", "shared_bytes", "args"};
constexpr std::size_t kernel_at = 0, grid_at = 1, block_at = 2, cluster_at = 3, shared_at = 4, args_at = 5;
using Fields = std::array<std::optional<CompactJson::Ref>, field_keys.size()>;

// The registry's view of arguments: one pointer per parameter, to its bytes.
std::vector<const void*> argument_pointers(const std::vector<std::array<unsigned char, 8>>& bytes) {
  std::vector<const void*> out;
  out.reserve(bytes.size());
  for (const auto& b : bytes) out.push_back(b.data());
  return out;
}

// The shape of a node of `info`, a kernel with a launch rule: the file's where it gives one,
// checked against what the kernel needs (`rule`, the rule's shape for the node's arguments),
// else the rule's. False after reporting each problem.
bool rule_shape(const Fields& fields, const KernelInfo& info, const void* const* args, const LaunchShape& rule,
                NodeBinder& binder, LaunchShape& shape) {
  const auto kernel = [&] { return "kernel " + quoted_name(info.name); };  // for a problem only
  bool ok = true;
  shape = rule;
  if (const std::optional<Dim3> grid = optional_dim(fields[grid_at], "grid")) {
    shape.grid = *grid;
    const Dim3& g = shape.grid;
    const Dim3 least = info.launch.least_grid != nullptr ? info.launch.least_grid(args) : rule.grid;
    if (info.launch.grid_exact && g != rule.grid) {
      binder.problem("/grid", kernel() + " runs with a grid of " + to_string(rule.grid) + " only, found " + to_string(g) +
                                  " (each of its blocks would do its one thing again; omit \"grid\" for that one)");
      ok = false;
    } else if (!info.launch.grid_strides && (g.x < least.x || g.y < least.y || g.z < least.z)) {
      binder.problem("/grid", "grid " + to_string(g) + " leaves part of the output uncomputed: " + kernel() +
                                  " computes one part a block and needs a grid of at least " + to_string(least) +
                                  " for these arguments (omit \"grid\" for that one)");
      ok = false;
    }
    // Clusters the rule gives for its grid: a grid of the file's gets them only where it is a multiple.
    if (!fields[cluster_at] && (g.x % rule.cluster.x != 0 || g.y % rule.cluster.y != 0 || g.z % rule.cluster.z != 0)) {
      shape.cluster = Dim3();
    }
  }
  if (const std::optional<Dim3> block = optional_dim(fields[block_at], "block")) {
    shape.block = *block;
    const Dim3& b = shape.block;
    if (info.launch.block_exact && b != rule.block) {
      binder.problem("/block", kernel() + " runs with a block of " + to_string(rule.block) + " only, found " + to_string(b) +
                                   " (omit \"block\" for that one)");
      ok = false;
    } else if (!info.launch.block_exact && b.volume() > rule.block.volume()) {
      binder.problem("/block", "block " + to_string(b) + " has " + std::to_string(b.volume()) + " threads, " + kernel() +
                                   " runs with at most " + std::to_string(rule.block.volume()));
      ok = false;
    }
  }
  if (fields[cluster_at]) shape.cluster = dim_of(fields[cluster_at], "cluster");
  if (fields[shared_at]) {
    shape.shared_bytes = static_cast<std::uint32_t>(unsigned_of(fields[shared_at], "shared_bytes", u32_max));
    if (shape.shared_bytes < rule.shared_bytes) {
      binder.problem("/shared_bytes", "shared_bytes " + std::to_string(shape.shared_bytes) + " is less than the " +
                                          std::to_string(rule.shared_bytes) + " " + kernel() +
                                          " needs for these arguments (omit \"shared_bytes\" for that)");
      ok = false;
    }
  }
  return ok;
}
}  // namespace

void read_json(Tag<KernelOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  // Checked in the order the problems are reported, then written: a dimension in its shortest
  // form, shared_bytes as an unsigned number, the arguments each once.
  const Fields found = members_named(node, field_keys);
  const std::string_view kernel = string_view_of(found[kernel_at], "kernel");
  const char* const dims[] = {"grid", "block", "cluster"};
  std::optional<Dim3> shape[3];
  for (int i = 0; i < 3; ++i) shape[i] = optional_dim(found[grid_at + i], dims[i]);
  std::optional<std::uint64_t> shared;
  if (found[shared_at]) shared = unsigned_of(found[shared_at], "shared_bytes", u32_max);
  const std::vector<CompactJson::Member> args = read_arguments(found[args_at]);
  out.start_object();
  out.key("kernel");
  out.string(kernel);
  for (int i = 0; i < 3; ++i) {
    if (!shape[i]) continue;
    out.key(dims[i]);
    write_dim(out, *shape[i]);
  }
  if (shared) {
    out.key("shared_bytes");
    out.unsigned_integer(*shared);
  }
  write_arguments(out, args);
  out.end_object();
}

std::optional<NodeHandle> bind_json(Tag<KernelOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const Fields found = members_named(fields, field_keys);
  const KernelInfo* info = find_entry(string_view_of(found[kernel_at], "kernel"), "/kernel", binder);
  if (info == nullptr) return std::nullopt;
  if (info->is_call()) {
    binder.problem("/kernel",
                   quoted_name(info->name) + " is a library call, not a kernel (a node of kind \"library\" makes it)");
    return std::nullopt;
  }
  const CompactJson::Ref args = required(found[args_at], "args");
  std::vector<BoundArgument> values;
  if (!bind_arguments(args, *info, binder, values)) return std::nullopt;
  std::optional<LaunchShape> shape;
  if (info->launch) {
    // The kernel's own rule, the one its C++ launcher applies, gives what the file leaves out.
    std::vector<std::array<unsigned char, 8>> bytes(info->params.size(), std::array<unsigned char, 8>{});
    for (const BoundArgument& v : values) std::memcpy(bytes[v.index].data(), v.bytes, sizeof v.bytes);
    shape.emplace();
    const std::vector<const void*> pointers = argument_pointers(bytes);
    if (!rule_shape(found, *info, pointers.data(), info->launch.shape(pointers.data()), binder, *shape)) return std::nullopt;
  }
  auto node = binder.builder().kernel(name, *info);
  if (shape) {
    node.launch(*shape);
  } else {
    // A kernel without a rule: a shape the file does not give stays unset, and validation says so.
    if (const std::optional<Dim3> grid = optional_dim(found[grid_at], "grid")) node.grid(*grid);
    if (const std::optional<Dim3> block = optional_dim(found[block_at], "block")) node.block(*block);
    if (found[shared_at]) node.shared_memory(static_cast<std::uint32_t>(unsigned_of(found[shared_at], "shared_bytes", u32_max)));
    if (found[cluster_at]) node.cluster(dim_of(found[cluster_at], "cluster"));
  }
  for (const BoundArgument& v : values) {
    const KernelParam& p = info->params[v.index];
    if (!p.type.condition) {
      node.set_bytes(p.name, v.bytes, p.type.size());
      continue;
    }
    // The conditional node it names may be declared later in the file: the binder sets the
    // argument once it is. A name that finds none is reported; the graph is then not built.
    const std::string target = get_string(args, p.name.c_str());
    (void)binder.condition(target, pointer_to("/args", p.name), [node, name = p.name](Condition c) mutable {
      node.set(name, c);
    });
  }
  return NodeHandle(node);
}

namespace {
// The shape `info`'s rule gives for the node's arguments; none without a rule or with an
// argument unbound or of another size.
std::optional<LaunchShape> rule_of(const KernelOp& op, const KernelInfo& info) {
  if (!info.launch || op.args.size() != info.params.size()) return std::nullopt;
  std::vector<std::array<unsigned char, 8>> bytes(info.params.size(), std::array<unsigned char, 8>{});
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (!op.args.bound(i) || op.args.slot_size(i) != info.params[i].type.size()) return std::nullopt;
    std::memcpy(bytes[i].data(), op.args.data(i), op.args.slot_size(i));
  }
  return info.launch.shape(argument_pointers(bytes).data());
}
}  // namespace

json describe_json(const KernelOp& op, NodeDescriber& describer) {
  json fields = json::object();
  const KernelInfo* info = describer.registry().find_function(op.function);
  if (info == nullptr) info = describer.registry().find(op.kernel_name);
  if (info == nullptr) {
    describer.problem("/kernel", "the kernel (named " + quoted_name(op.kernel_name) + ") is not registered");
    return fields;
  }
  fields["kernel"] = info->name;
  // A shape the kernel's rule gives for these arguments is left out, as a person writes it.
  const std::optional<LaunchShape> rule = rule_of(op, *info);
  if (op.grid_set && !(rule && rule->grid == op.launch.grid)) fields["grid"] = write_dim(op.launch.grid);
  if (op.block_set && !(rule && rule->block == op.launch.block)) fields["block"] = write_dim(op.launch.block);
  if (op.launch.shared_bytes != (rule ? rule->shared_bytes : 0)) fields["shared_bytes"] = op.launch.shared_bytes;
  if (op.launch.cluster != (rule ? rule->cluster : Dim3())) fields["cluster"] = write_dim(op.launch.cluster);
  bool described = false;
  json args = describe_arguments(op.args, *info, describer, described);
  if (described) fields["args"] = std::move(args);
  return fields;
}

}  // namespace flowdsl::io
