// SPDX-License-Identifier: Apache-2.0
// The JSON Schema of graph files: the fixed parts, and one entry per node kind from its unit; and
// what the io layer asks of the list of kinds (their names, where their bodies sit).
#include "json_facets.hpp"

namespace flowdsl {
namespace io {

std::string kind_names() {
  std::string names;
#define FLOWDSL_IO_NAME(Op) names += (names.empty() ? "" : ", ") + std::string(Op::kind);
  FLOWDSL_NODE_KINDS(FLOWDSL_IO_NAME)
#undef FLOWDSL_IO_NAME
  return names;
}

BodyPlace body_place(const std::vector<BodyMember>& members, std::uint32_t b) {
  for (const BodyMember& member : members) {
    if (member.many) return {&member, b};
    if (b == 0) return {&member, 0};
    --b;
  }
  return {};
}

std::string BodyPlace::pointer() const {
  return "/" + std::string(member->name) + (member->many ? json_detail::token(index) : std::string());
}

std::string BodyPlace::title() const {
  if (member == nullptr || member->title == nullptr) return {};
  return member->many ? member->title + (" " + std::to_string(index)) : member->title;
}

}  // namespace io

namespace {

using nlohmann::json;

// Everything but the nodes' kinds.
const char* const fixed_schema = R"json(
{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://flowdsl.invalid/flowdsl.schema.json",
  "title": "flowdsl graph file, format version 1",
  "description": "See docs/json-format.md. The loader checks more than this schema (kernels, argument types and ranges, buffer bounds, dependencies, graph validity).",
  "type": "object",
  "required": ["version", "name"],
  "additionalProperties": false,
  "properties": {"version": {"const": 1}, "name": {"type": "string", "maxLength": 4096}, "kernel_files": {"type": "array", "items": {"$ref": "#/$defs/kernel_file"}}, "buffers": {"type": "array", "maxItems": 100000, "items": {"$ref": "#/$defs/buffer"}}, "nodes": {"type": "array", "maxItems": 1000000, "items": {"$ref": "#/$defs/node"}}, "bodies": {"type": "object", "propertyNames": {"minLength": 1}, "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "check_hazards": {"type": "boolean"}, "infer_edges": {"type": "boolean"}, "programmatic_edges": {"type": "boolean"}, "fuse": {"type": "boolean"}, "items_per_launch": {"type": "integer", "minimum": 1, "maximum": 9223372036854775807}},
  "$defs": {
    "scalar_type": {"enum": ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"]},
    "param_type": {"type": "string", "pattern": "^(const )?(i8|i16|i32|i64|u8|u16|u32|u64|f16|bf16|f32|f64)\\*$|^(i8|i16|i32|i64|u8|u16|u32|u64|f16|bf16|f32|f64)$|^condition$"},
    "expr": {"type": "object", "required": ["expr"], "additionalProperties": false, "description": "an integer computed from the reading process's rank and world: + - * / % and parentheses", "properties": {"expr": {"type": "string"}}},
    "count": {"oneOf": [{"type": "integer", "minimum": 0}, {"$ref": "#/$defs/expr"}]},
    "dim": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 4294967295}, {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer", "minimum": 0, "maximum": 4294967295}}]},
    "buffer_ref": {"oneOf": [{"type": "string"}, {"type": "object", "required": ["buffer"], "additionalProperties": false, "properties": {"buffer": {"type": "string"}, "offset": {"$ref": "#/$defs/count"}}}]},
    "access": {"oneOf": [{"type": "string"}, {"type": "object", "required": ["buffer"], "additionalProperties": false, "properties": {"buffer": {"type": "string"}, "offset": {"$ref": "#/$defs/count"}, "bytes": {"$ref": "#/$defs/count"}}}]},
    "init": {"oneOf": [{"const": "zeros"}, {"type": "object", "additionalProperties": false, "required": ["kind"], "properties": {"kind": {"const": "zeros"}}}, {"type": "object", "additionalProperties": false, "required": ["kind", "value"], "properties": {"kind": {"const": "constant"}, "value": {"type": "number"}}}, {"type": "object", "additionalProperties": false, "required": ["kind", "low", "high", "seed"], "properties": {"kind": {"const": "uniform"}, "low": {"type": "number"}, "high": {"type": "number"}, "seed": {"$ref": "#/$defs/count"}}}, {"type": "object", "additionalProperties": false, "required": ["kind", "mean", "stddev", "seed"], "properties": {"kind": {"const": "normal"}, "mean": {"type": "number"}, "stddev": {"type": "number", "exclusiveMinimum": 0}, "seed": {"$ref": "#/$defs/count"}}}, {"type": "object", "additionalProperties": false, "required": ["kind", "file"], "properties": {"kind": {"const": "npy"}, "file": {"type": "string"}}}, {"type": "object", "additionalProperties": false, "required": ["kind", "file", "tensor"], "properties": {"kind": {"const": "safetensors"}, "file": {"type": "string"}, "tensor": {"type": "string"}}}, {"type": "object", "additionalProperties": false, "required": ["kind", "file", "tensors"], "properties": {"kind": {"const": "safetensors"}, "file": {"type": "string"}, "tensors": {"type": "array", "minItems": 1, "maxItems": 64, "items": {"type": "string"}}}}]},
    "buffer": {"type": "object", "required": ["name", "type", "count"], "additionalProperties": false, "properties": {"name": {"type": "string", "minLength": 1}, "type": {"$ref": "#/$defs/scalar_type"}, "count": {"oneOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/expr"}]}, "init": {"$ref": "#/$defs/init"}, "output": {"type": "boolean"}}},
    "kernel_file": {"type": "object", "required": ["name", "file", "symbol", "params"], "additionalProperties": false, "properties": {"name": {"type": "string"}, "file": {"type": "string"}, "symbol": {"type": "string"}, "params": {"type": "array", "items": {"type": "object", "required": ["name", "type"], "additionalProperties": false, "properties": {"name": {"type": "string"}, "type": {"$ref": "#/$defs/param_type"}, "extent": {"type": "string"}}}}}},
    "body": {"oneOf": [{"type": "array", "items": {"$ref": "#/$defs/node"}}, {"type": "object", "required": ["use"], "additionalProperties": false, "properties": {"use": {"type": "string", "minLength": 1}}}]},
    "after": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "object", "required": ["node"], "additionalProperties": false, "properties": {"node": {"type": "string"}, "programmatic": {"type": "boolean"}}}]}},
    "common": {"name": {"type": "string"}, "after": {"$ref": "#/$defs/after"}, "reads": {"type": "array", "items": {"$ref": "#/$defs/access"}}, "writes": {"type": "array", "items": {"$ref": "#/$defs/access"}}}
  }
})json";

// The node object: what every node has, then per kind its own members and bodies.
json node_schema() {
  const json access_array = {{"type", "array"}, {"items", {{"$ref", "#/$defs/access"}}}};
  json node = {{"type", "object"},
               {"required", {"name", "kind"}},
               {"properties",
                {{"name", {{"type", "string"}}},
                 {"kind", {{"enum", json::array()}}},
                 {"after", {{"$ref", "#/$defs/after"}}},
                 {"reads", access_array},
                 {"writes", access_array}}},
               {"allOf", json::array()}};
  const auto add = [&](auto tag, std::string_view kind) {
    node["properties"]["kind"]["enum"].push_back(kind);
    json own = io::json_schema(tag);
    for (const io::BodyMember& body : io::json_bodies(tag)) {
      if (!body.optional) own["required"].push_back(body.name);
      const json one = {{"$ref", "#/$defs/body"}};
      own["properties"][body.name] = body.many ? json{{"type", "array"}, {"minItems", 1}, {"items", one}} : one;
    }
    if (own["properties"].empty()) return;  // nothing beyond what every node has
    if (own["required"].empty()) own.erase("required");
    node["allOf"].push_back({{"if", {{"properties", {{"kind", {{"const", kind}}}}}}}, {"then", std::move(own)}});
  };
#define FLOWDSL_IO_SCHEMA(Op) add(io::Tag<Op>{}, Op::kind);
  FLOWDSL_NODE_KINDS(FLOWDSL_IO_SCHEMA)
#undef FLOWDSL_IO_SCHEMA
  return node;
}

}  // namespace

json graph_file_schema() {
  json schema = json::parse(fixed_schema);
  schema["$defs"]["node"] = node_schema();
  return schema;
}

}  // namespace flowdsl
