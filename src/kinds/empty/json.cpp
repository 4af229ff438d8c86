// SPDX-License-Identifier: Apache-2.0
// Empty nodes in graph files: nothing but a name and edges.
#include "json_facets.hpp"

namespace flowdsl::io {

std::vector<BodyMember> json_bodies(Tag<EmptyOp>) { return {}; }
json json_schema(Tag<EmptyOp>) { return {{"required", json::array()}, {"properties", json::object()}}; }
void read_json(Tag<EmptyOp>, CompactJson::Ref, CompactJson::Builder& out) {
  out.start_object();
  out.end_object();
}

std::optional<NodeHandle> bind_json(Tag<EmptyOp>, const std::string& name, CompactJson::Ref, NodeBinder& binder) {
  return binder.builder().empty(name);
}

json describe_json(const EmptyOp&, NodeDescriber&) { return json::object(); }
}  // namespace flowdsl::io
