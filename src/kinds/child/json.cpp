// SPDX-License-Identifier: Apache-2.0
// Child-graph nodes in graph files: the body's nodes inline, under "nodes".
#include "json_facets.hpp"

namespace flowdsl::io {

std::vector<BodyMember> json_bodies(Tag<ChildOp>) { return {{"nodes", nullptr}}; }
json json_schema(Tag<ChildOp>) { return {{"required", json::array()}, {"properties", json::object()}}; }
void read_json(Tag<ChildOp>, CompactJson::Ref, CompactJson::Builder& out) {
  out.start_object();
  out.end_object();
}

std::optional<NodeHandle> bind_json(Tag<ChildOp>, const std::string& name, CompactJson::Ref, NodeBinder& binder) {
  return binder.builder().child(name);
}

json describe_json(const ChildOp&, NodeDescriber&) { return json::object(); }
}  // namespace flowdsl::io
