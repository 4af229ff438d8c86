// Conditional nodes in graph files and DOT dumps (first cut: bodies inline).
#include "io_facets.hpp"

namespace flowdsl::io {

std::vector<const char*> json_bodies(Tag<IfOp>) { return {"then", "else"}; }
std::vector<const char*> json_bodies(Tag<WhileOp>) { return {"body"}; }
std::vector<const char*> json_bodies(Tag<SwitchOp>) { return {}; }
json json_schema(Tag<IfOp>) { return {{"required", json::array()}, {"properties", json::object()}}; }
json json_schema(Tag<WhileOp>) { return {{"required", json::array()}, {"properties", json::object()}}; }
json json_schema(Tag<SwitchOp>) { return {{"required", json::array()}, {"properties", json::object()}}; }
json read_json(Tag<IfOp>, json&&) { return json::object(); }
json read_json(Tag<WhileOp>, json&&) { return json::object(); }
json read_json(Tag<SwitchOp>, json&&) { return json::object(); }

std::optional<NodeHandle> bind_json(Tag<IfOp>, const std::string& name, const json&, NodeBinder& binder) {
  return binder.builder().if_then(name);
}
std::optional<NodeHandle> bind_json(Tag<WhileOp>, const std::string& name, const json&, NodeBinder& binder) {
  return binder.builder().while_loop(name);
}
std::optional<NodeHandle> bind_json(Tag<SwitchOp>, const std::string& name, const json&, NodeBinder& binder) {
  return binder.builder().switch_cases(name, 1);
}

json describe_json(const IfOp&, NodeDescriber&) { return json::object(); }
json describe_json(const WhileOp&, NodeDescriber&) { return json::object(); }
json describe_json(const SwitchOp&, NodeDescriber&) { return json::object(); }
void dot_label(const IfOp&, DotLabel& label) { label.lines.push_back("if"); }
void dot_label(const WhileOp&, DotLabel& label) { label.lines.push_back("while"); }
void dot_label(const SwitchOp&, DotLabel& label) { label.lines.push_back("switch"); }
const char* dot_colour(Tag<IfOp>) { return "khaki"; }
const char* dot_colour(Tag<WhileOp>) { return "khaki"; }
const char* dot_colour(Tag<SwitchOp>) { return "khaki"; }

}  // namespace flowdsl::io
