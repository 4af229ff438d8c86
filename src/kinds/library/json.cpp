// SPDX-License-Identifier: Apache-2.0
// Library nodes in graph files: a registered library call by name ("call") and
// its arguments by parameter name, as for kernels.
#include <array>

#include "builder/registered_name.hpp"
#include "json_arguments.hpp"
#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

std::vector<BodyMember> json_bodies(Tag<LibraryOp>) { return {}; }

json json_schema(Tag<LibraryOp>) {
  const json argument = {
      {"oneOf", json::array({{{"type", "number"}}, {{"$ref", "#/$defs/expr"}}, {{"$ref", "#/$defs/buffer_ref"}}})}};
  json properties = {{"call", {{"type", "string"}}}, {"args", {{"type", "object"}, {"additionalProperties", argument}}}};
  return {{"required", json::array({"call"})}, {"properties", std::move(properties)}};
}

void read_json(Tag<LibraryOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  const auto [call_member, args_member] = members_named(node, std::array<std::string_view, 2>{"call", "args"});
  const std::string_view call = string_view_of(call_member, "call");
  const std::vector<CompactJson::Member> args = read_arguments(args_member);
  out.start_object();
  out.key("call");
  out.string(call);
  write_arguments(out, args);
  out.end_object();
}

std::optional<NodeHandle> bind_json(Tag<LibraryOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const KernelInfo* entry = find_entry(get_string_view(fields, "call"), "/call", binder);
  if (entry == nullptr) return std::nullopt;
  if (!entry->is_call()) {
    binder.problem(
        "/call", quoted_name(entry->name) + " is a kernel, not a library call (a node of kind \"kernel\" launches it)");
    return std::nullopt;
  }
  std::vector<BoundArgument> values;
  if (!bind_arguments(member(fields, "args"), *entry, binder, values)) return std::nullopt;
  auto node = binder.builder().library(name, *entry);
  for (const BoundArgument& v : values) {
    const KernelParam& p = entry->params[v.index];
    node.set_bytes(p.name, v.bytes, p.type.size());
  }
  return NodeHandle(node);
}

json describe_json(const LibraryOp& op, NodeDescriber& describer) {
  json fields = json::object();
  const KernelInfo* entry = detail::registered_entry(op.info, op.function, &describer.registry());
  if (entry == nullptr || !entry->is_call()) {
    describer.problem("/call", "the library call (named " + quoted_name(call_name_of(op)) + ") is not registered");
    return fields;
  }
  fields["call"] = entry->name;
  bool described = false;
  json args = describe_arguments(op.args, *entry, describer, described);
  if (described) fields["args"] = std::move(args);
  return fields;
}

}  // namespace flowdsl::io
