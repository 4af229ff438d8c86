// SPDX-License-Identifier: Apache-2.0
// Memory nodes in graph files: an alloc of `bytes` bytes, whose memory the other nodes reference
// by the alloc's name wherever a buffer name goes; a free naming its alloc.
#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

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

}  // namespace flowdsl::io
