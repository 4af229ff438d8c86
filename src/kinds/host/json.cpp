// SPDX-License-Identifier: Apache-2.0
// Host nodes in graph files: a host function known by name (a file cannot carry
// code; see HostFunctions).
#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

std::vector<BodyMember> json_bodies(Tag<HostOp>) { return {}; }

json json_schema(Tag<HostOp>) {
  return {{"required", json::array({"function"})}, {"properties", {{"function", {{"type", "string"}}}}}};
}

void read_json(Tag<HostOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  write_string_member(out, "function", get_string(node, "function"));
}

std::optional<NodeHandle> bind_json(Tag<HostOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const std::string function = get_string(fields, "function");
  const auto it = binder.hosts().find(function);
  if (it == binder.hosts().end()) {
    std::string known;
    for (const auto& entry : binder.hosts()) known += (known.empty() ? "" : ", ") + entry.first;
    binder.problem("/function", "unknown host function " + quoted_name(function) +
                                    " (known: " + (known.empty() ? "none" : known) + ")");
    return std::nullopt;
  }
  return NodeHandle(binder.builder().host(name, it->second.fn, it->second.user_data));
}

json describe_json(const HostOp& op, NodeDescriber& describer) {
  for (const auto& [name, f] : describer.hosts()) {
    if (f.fn == op.fn && f.user_data == op.user_data) return {{"function", name}};
  }
  describer.problem("/function", "the host function and user data match no named host function");
  return json::object();
}

}  // namespace flowdsl::io
