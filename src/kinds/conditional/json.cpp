// SPDX-License-Identifier: Apache-2.0
// Conditional nodes (IF, WHILE, SWITCH) in graph files: an optional "default"
// (the value assigned at every launch) and the bodies: an IF's "then" and optional "else", a
// WHILE's "body", a SWITCH's "cases" (an array of bodies, case i runs for value i).
#include <limits>

#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

namespace {

json schema_of_fields() {
  return {{"required", json::array()},
          {"properties", {{"default", {{"type", "integer"}, {"minimum", 0}, {"maximum", 4294967295u}}}}}};
}

void read_fields(CompactJson::Ref node, CompactJson::Builder& out) {
  out.start_object();
  if (optional_member(node, "default")) {
    out.key("default");
    out.unsigned_integer(get_unsigned(node, "default", std::numeric_limits<unsigned>::max()));
  }
  out.end_object();
}

std::optional<ConditionDefault> default_of(CompactJson::Ref fields) {
  if (!optional_member(fields, "default")) return std::nullopt;
  return ConditionDefault{static_cast<unsigned>(get_unsigned(fields, "default", std::numeric_limits<unsigned>::max()))};
}

json describe_fields(const ConditionalFields& op) {
  json fields = json::object();
  if (op.default_value) fields["default"] = *op.default_value;
  return fields;
}


}  // namespace

std::vector<BodyMember> json_bodies(Tag<IfOp>) {
  return {{"then", "then"}, {"else", "else", /*many=*/false, /*optional=*/true}};
}
std::vector<BodyMember> json_bodies(Tag<WhileOp>) { return {{"body", "body (while)"}}; }
std::vector<BodyMember> json_bodies(Tag<SwitchOp>) { return {{"cases", "case", /*many=*/true}}; }

json json_schema(Tag<IfOp>) { return schema_of_fields(); }
json json_schema(Tag<WhileOp>) { return schema_of_fields(); }
json json_schema(Tag<SwitchOp>) { return schema_of_fields(); }

void read_json(Tag<IfOp>, CompactJson::Ref node, CompactJson::Builder& out) { read_fields(node, out); }
void read_json(Tag<WhileOp>, CompactJson::Ref node, CompactJson::Builder& out) { read_fields(node, out); }
void read_json(Tag<SwitchOp>, CompactJson::Ref node, CompactJson::Builder& out) { read_fields(node, out); }

std::optional<NodeHandle> bind_json(Tag<IfOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  // With "else" the file gives two bodies.
  if (binder.bodies() > 1) return binder.builder().if_else(name, default_of(fields));
  return binder.builder().if_then(name, default_of(fields));
}
std::optional<NodeHandle> bind_json(Tag<WhileOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  return binder.builder().while_loop(name, default_of(fields));
}
std::optional<NodeHandle> bind_json(Tag<SwitchOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  return binder.builder().switch_cases(name, binder.bodies(), default_of(fields));
}

json describe_json(const IfOp& op, NodeDescriber&) { return describe_fields(op); }
json describe_json(const WhileOp& op, NodeDescriber&) { return describe_fields(op); }
json describe_json(const SwitchOp& op, NodeDescriber&) { return describe_fields(op); }

}  // namespace flowdsl::io
