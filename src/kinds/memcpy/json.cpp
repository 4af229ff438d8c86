// SPDX-License-Identifier: Apache-2.0
// Memcpy nodes in graph files: a copy of `bytes` bytes between buffers.
#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

std::vector<BodyMember> json_bodies(Tag<MemcpyOp>) { return {}; }

json json_schema(Tag<MemcpyOp>) {
  return {{"required", json::array({"dst", "src", "bytes"})},
          {"properties",
           {{"dst", {{"$ref", "#/$defs/buffer_ref"}}},
            {"src", {{"$ref", "#/$defs/buffer_ref"}}},
            {"bytes", {{"$ref", "#/$defs/count"}}}}}};
}

void read_json(Tag<MemcpyOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  BufferRef dst, src;
  within("/dst", [&] { from_json(member(node, "dst"), dst); });
  within("/src", [&] { from_json(member(node, "src"), src); });
  const std::uint64_t bytes = get_unsigned(node, "bytes", json_max_buffer_bytes);
  out.start_object();
  out.key("dst");
  write_buffer_ref(out, dst);
  out.key("src");
  write_buffer_ref(out, src);
  out.key("bytes");
  out.unsigned_integer(bytes);
  out.end_object();
}

std::optional<NodeHandle> bind_json(Tag<MemcpyOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  const std::uint64_t bytes = get_unsigned(fields, "bytes", json_max_buffer_bytes);
  BufferRef dst_ref, src_ref;
  within("/dst", [&] { from_json(member(fields, "dst"), dst_ref); });
  within("/src", [&] { from_json(member(fields, "src"), src_ref); });
  void* dst = binder.address(dst_ref, bytes, 1, "/dst");
  void* src = binder.address(src_ref, bytes, 1, "/src");
  if (dst == nullptr || src == nullptr) return std::nullopt;
  return NodeHandle(binder.builder().memcpy(name, dst, src, bytes));
}

json describe_json(const MemcpyOp& op, NodeDescriber& describer) {
  return {{"dst", describer.locate(op.dst, "/dst")}, {"src", describer.locate(op.src, "/src")}, {"bytes", op.bytes}};
}

}  // namespace flowdsl::io
