// SPDX-License-Identifier: Apache-2.0
// Memset nodes in graph files: `count` elements of 1, 2 or 4 bytes set to `value`.
#include <limits>

#include "json_facets.hpp"

namespace flowdsl::io {

using namespace json_detail;

std::vector<BodyMember> json_bodies(Tag<MemsetOp>) { return {}; }

json json_schema(Tag<MemsetOp>) {
  return {{"required", json::array({"dst", "value", "count"})},
          {"properties",
           {{"dst", {{"$ref", "#/$defs/buffer_ref"}}},
            {"value", {{"type", "integer"}, {"minimum", 0}, {"maximum", 4294967295u}}},
            {"element_size", {{"enum", {1, 2, 4}}}},
            {"count", {{"$ref", "#/$defs/count"}}}}}};
}

void read_json(Tag<MemsetOp>, CompactJson::Ref node, CompactJson::Builder& out) {
  BufferRef dst;
  within("/dst", [&] { from_json(member(node, "dst"), dst); });
  const std::uint64_t value = get_unsigned(node, "value", std::numeric_limits<std::uint32_t>::max());
  const std::uint64_t count = get_unsigned(node, "count", json_max_buffer_bytes);
  const std::uint64_t element_size = optional_member(node, "element_size") ? get_unsigned(node, "element_size", 4) : 1;
  out.start_object();
  out.key("dst");
  write_buffer_ref(out, dst);
  out.key("value");
  out.unsigned_integer(value);
  out.key("element_size");
  out.unsigned_integer(element_size);
  out.key("count");
  out.unsigned_integer(count);
  out.end_object();
}

std::optional<NodeHandle> bind_json(Tag<MemsetOp>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder) {
  constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
  const auto element_size = static_cast<std::uint32_t>(get_unsigned(fields, "element_size", u32_max));
  const auto value = static_cast<std::uint32_t>(get_unsigned(fields, "value", u32_max));
  const std::uint64_t count = get_unsigned(fields, "count", json_max_buffer_bytes);
  if (element_size != 1 && element_size != 2 && element_size != 4) {
    binder.problem("/element_size", "element size " + std::to_string(element_size) + " is not 1, 2 or 4");
    return std::nullopt;
  }
  if (element_size < 4 && value >> (8 * element_size) != 0) {
    binder.problem("/value", "value " + std::to_string(value) + " is out of range of " + std::to_string(element_size) +
                                 "-byte elements");
    return std::nullopt;
  }
  BufferRef dst_ref;
  within("/dst", [&] { from_json(member(fields, "dst"), dst_ref); });
  void* dst = binder.address(dst_ref, count * element_size, element_size, "/dst");
  if (dst == nullptr) return std::nullopt;
  return NodeHandle(binder.builder().memset(name, dst, value, count, element_size));
}

json describe_json(const MemsetOp& op, NodeDescriber& describer) {
  return {{"dst", describer.locate(op.dst, "/dst")},
          {"value", op.value},
          {"element_size", op.element_size},
          {"count", op.count}};
}

}  // namespace flowdsl::io
