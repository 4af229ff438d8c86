// SPDX-License-Identifier: Apache-2.0
// Memory nodes in graph files and DOT dumps: an alloc of `bytes` bytes, whose memory the other
// nodes reference by the alloc's name wherever a buffer name goes; a free naming its alloc. DOT
// draws both as cylinders, with the allocation's lifetime as a dashed edge from alloc to free.
#include "dot_text.hpp"
#include "io_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

namespace {

// The alloc node whose memory a free frees, or no_node.
NodeId alloc_of(const Description& d, const FreeOp& op) { return allocation_of(d, op.memory); }

}  // namespace

std::vector<BodyMember> json_bodies(Tag<AllocOp>) { return {}; }
std::vector<BodyMember> json_bodies(Tag<FreeOp>) { return {}; }

json json_schema(Tag<AllocOp>) {
  return {{"required", json::array({"bytes"})}, {"properties", {{"bytes", {{"$ref", "#/$defs/count"}}}}}};
}
json json_schema(Tag<FreeOp>) {
  return {{"required", json::array({"alloc"})}, {"properties", {{"alloc", {{"type", "string"}}}}}};
}

void read_json(Tag<AllocOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  const std::uint64_t bytes = get_unsigned(node, "bytes", json_max_buffer_bytes);
  out.start_object();
  out.key("bytes");
  out.unsigned_integer(bytes);
  out.end_object();
}
void read_json(Tag<FreeOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  write_string_member(out, "alloc", get_string(node, "alloc"));
}

std::optional<NodeHandle> bind_json(Tag<AllocOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const AllocNode node = binder.builder().alloc(name, get_unsigned(fields, "bytes", json_max_buffer_bytes));
  binder.declared_alloc(name, node.id());
  return NodeHandle(node);
}

std::optional<NodeHandle> bind_json(Tag<FreeOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const std::optional<std::uint64_t> memory = binder.alloc_memory(get_string(fields, "alloc"), "/alloc");
  if (!memory) return std::nullopt;
  FreeOp op;
  op.memory = *memory;
  return binder.builder().add<NodeHandle>(name, std::move(op));
}

json describe_json(const AllocOp& op, NodeDescriber&) { return {{"bytes", op.bytes}}; }

json describe_json(const FreeOp& op, NodeDescriber& describer) {
  const BufferRef at = describer.locate(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(op.memory)), "/alloc");
  if (at.buffer.empty()) return json::object();
  if (at.offset != 0) {
    describer.problem("/alloc", "frees an address " + std::to_string(at.offset) + " bytes into alloc " +
                                    quoted_name(at.buffer) +
                                    ": a file names the alloc, so a free frees the address its alloc gave");
    return json::object();
  }
  return {{"alloc", at.buffer}};
}

void dot_label(const AllocOp& op, DotLabel& label) {
  label.lines.push_back("alloc " + std::to_string(op.bytes) + " bytes");
}

void dot_label(const FreeOp& op, DotLabel& label) {
  const NodeId alloc = alloc_of(label.description, op);
  label.lines.push_back(alloc == no_node ? std::string("free (no alloc)")
                                         : "free " + quoted_name(node_path(label.description, alloc)));
}

DotStyle dot_style(Tag<AllocOp>) { return {"lightpink", "cylinder"}; }
DotStyle dot_style(Tag<FreeOp>) { return {"lightpink", "cylinder"}; }

}  // namespace flowdsl::io
