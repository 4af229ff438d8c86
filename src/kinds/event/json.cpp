// SPDX-License-Identifier: Apache-2.0
// Event nodes in graph files: an event is named in the file and supplied by the
// program that binds it (Externals::events), as host functions are: a file cannot carry one.
#include <set>

#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

namespace {

json event_schema() {
  return {{"required", json::array({"event"})}, {"properties", {{"event", {{"type", "string"}}}}}};
}

json describe_event(CudaEvent event, NodeDescriber& describer) {
  for (const auto& [name, known] : describer.events()) {
    if (known == event) return {{"event", name}};
  }
  describer.problem("/event", "the event matches no named event");
  return json::object();
}

void collect_events(const std::vector<NodeSpec>& nodes, std::set<std::string>& out) {
  for (const NodeSpec& node : nodes) {
    for (const BodySpec& body : node.bodies) collect_events(body.nodes, out);  // named bodies: below
    if (node.kind != EventRecordOp::kind && node.kind != EventWaitOp::kind) continue;
    const auto event = node.fields.root().find("event");
    if (event && event->is_string()) out.insert(std::string(event->get_string()));
  }
}

}  // namespace

std::vector<BodyMember> json_bodies(Tag<EventRecordOp>) { return {}; }
std::vector<BodyMember> json_bodies(Tag<EventWaitOp>) { return {}; }
json json_schema(Tag<EventRecordOp>) { return event_schema(); }
json json_schema(Tag<EventWaitOp>) { return event_schema(); }
void read_json(Tag<EventRecordOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  write_string_member(out, "event", get_string(node, "event"));
}
void read_json(Tag<EventWaitOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  write_string_member(out, "event", get_string(node, "event"));
}

std::optional<NodeHandle> bind_json(Tag<EventRecordOp>, const std::string& name, CompactJson::Ref fields,
                                    NodeBinder& binder) {
  const CudaEvent event = binder.event(get_string(fields, "event"), "/event");
  if (event == nullptr) return std::nullopt;
  return NodeHandle(binder.builder().record_event(name, event));
}

std::optional<NodeHandle> bind_json(Tag<EventWaitOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const CudaEvent event = binder.event(get_string(fields, "event"), "/event");
  if (event == nullptr) return std::nullopt;
  return NodeHandle(binder.builder().wait_event(name, event));
}

json describe_json(const EventRecordOp& op, NodeDescriber& describer) { return describe_event(op.event, describer); }
json describe_json(const EventWaitOp& op, NodeDescriber& describer) { return describe_event(op.event, describer); }

}  // namespace flowdsl::io

namespace flowdsl {

std::vector<std::string> event_names(const GraphSpec& spec) {
  std::set<std::string> names;
  io::collect_events(spec.nodes, names);
  for (const auto& named : spec.bodies) io::collect_events(named.second, names);
  return {names.begin(), names.end()};
}

}  // namespace flowdsl
