// SPDX-License-Identifier: Apache-2.0
// Graph files: the ADL serialisers of the spec types (schema only: no registry, no buffers;
// binding checks the rest); json_parse.cpp parses. Each kind reads its own members
// (src/kinds/<kind>/json.cpp).
#include <algorithm>
#include <array>
#include <limits>

#include "flowdsl/json.hpp"
#include "json_facets.hpp"

namespace flowdsl {

using namespace json_detail;

namespace {

constexpr std::uint32_t u32_max = std::numeric_limits<std::uint32_t>::max();
constexpr std::size_t max_init_tensors = 64;  // tensors one buffer concatenates

// Reads the member `key` found at `array` (a pointer or an optional: null when absent) element
// by element, each under its index.
template <class T, class Found>
std::vector<T> read_found_array(const Found& array, const char* key) {
  std::vector<T> out;
  if (!array) return out;
  if (!array->is_array()) fail(token(key), "expected an array, found " + type_of(*array));
  out.resize(array->size());
  std::size_t i = 0;
  for (const auto& element : elements_of(*array)) {
    within_made([&] { return token(key) + token(i); }, [&] { from_json(element, out[i]); });
    ++i;
  }
  return out;
}

// The same, of the member `key` of `j`.
template <class T, class J>
std::vector<T> read_array(const J& j, const char* key) {
  return read_found_array<T>(optional_member(j, key), key);
}

template <class T>
void write_array(json& j, const char* key, const std::vector<T>& values) {
  if (values.empty()) return;
  json array = json::array();
  for (const T& v : values) array.push_back(v);
  j[key] = std::move(array);
}

ScalarType read_scalar_type(const json& j, const char* key) {
  const std::string text = get_string(j, key);
  ScalarType type{};
  if (!parse_scalar_type(text, type)) {
    fail(token(key), "unknown element type " + quoted_name(text) +
                         " (expected i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64)");
  }
  return type;
}

// "after": node names, or {"node": name, "programmatic": bool} for an edge of another kind.
void read_after(const std::optional<Ref>& array, NodeSpec& v) {
  if (!array) return;
  if (!array->is_array()) fail("/after", "expected an array of node names, found " + type_of(*array));
  v.after.reserve(array->size());
  std::size_t i = 0;
  for (const Ref item : array->elements()) {
    within_made([&] { return "/after" + token(i); }, [&] {
      if (!item.is_object()) {
        v.after.push_back(as_string(item));
        return;
      }
      for (const CompactJson::Member m : item.members()) {
        if (m.key != "node" && m.key != "programmatic") {
          fail(token(m.key), "unknown member (an edge has \"node\" and \"programmatic\")");
        }
      }
      v.after.push_back(get_string(item, "node"));
      const std::optional<Ref> kind = item.find("programmatic");
      if (kind && !kind->is_boolean()) fail("/programmatic", "expected true or false, found " + type_of(*kind));
      if (kind && kind->get_bool()) v.programmatic.push_back(static_cast<std::uint32_t>(v.after.size() - 1));
    });
    ++i;
  }
}

// Reads an array of nodes.
void read_nodes(Ref value, std::vector<NodeSpec>& out, CompactJson::Builder& scratch) {
  if (!value.is_array()) fail("", "expected an array of nodes, found " + type_of(value));
  out.resize(value.size());
  std::size_t i = 0;
  for (const Ref node : value.elements()) {
    within_element(i, [&] { read_node(node, out[i], scratch); });
    ++i;
  }
}

// Reads one body: its nodes inline, or {"use": name}.
void read_body(Ref value, BodySpec& out, CompactJson::Builder& scratch) {
  if (value.is_object()) {
    expect_object(value, {"use"});
    out.use = get_string(value, "use");
    if (out.use.empty()) fail("/use", "expected the name of a body declared under \"bodies\"");
    return;
  }
  if (!value.is_array()) fail("", "expected an array of nodes or {\"use\": <body name>}, found " + type_of(value));
  read_nodes(value, out.nodes, scratch);
}

// Appends the bodies member `m` of `from` holds. An absent member of one body that is not
// optional is an empty body, which validation reports as such.
void read_bodies(Ref from, const io::BodyMember& m, std::vector<BodySpec>& out, CompactJson::Builder& scratch) {
  const std::optional<Ref> bodies = from.find(m.name);
  if (!bodies) {
    if (!m.many && !m.optional) out.emplace_back();
    return;
  }
  within_member(m.name, [&] {
    if (!m.many) {
      read_body(*bodies, out.emplace_back(), scratch);
      return;
    }
    if (!bodies->is_array()) fail("", "expected an array of bodies, found " + type_of(*bodies));
    std::size_t i = 0;
    for (const Ref body : bodies->elements()) {
      within_element(i++, [&] { read_body(body, out.emplace_back(), scratch); });
    }
  });
}

// The members a node of the kind may have: everyone's, its schema's and its bodies'. Built once
// per kind: reading a node must not build its kind's schema.
template <class Op>
const std::vector<std::string_view>& allowed_members(io::Tag<Op> tag) {
  static const json schema = io::json_schema(tag);
  static const std::vector<std::string_view> allowed = [&] {
    std::vector<std::string_view> out = {"name", "kind", "after", "reads", "writes"};
    for (const auto& item : schema.at("properties").items()) out.push_back(item.key());
    for (const io::BodyMember& body : io::json_bodies(tag)) out.push_back(body.name);
    return out;
  }();
  return allowed;
}

}  // namespace

void json_detail::read_node(Ref j, NodeSpec& v, CompactJson::Builder& scratch) {
  // Null fields rather than the default's empty object: the kind's reader below sets them, and a
  // node read this way then allocates nothing it throws away.
  v = NodeSpec{{}, {}, CompactJson(), {}, {}, {}, {}, {}};
  static constexpr std::array<std::string_view, 5> keys = {"name", "kind", "after", "reads", "writes"};
  const auto [name, kind, after, reads, writes] = members_named(j, keys);
  v.name = string_of(name, "name");
  // Refused here, at its member: bound, a name holding '/' would read as a path into a body.
  // An empty name is reported by validation, with the node's other problems.
  if (const std::string problem = node_name_problem(v.name); !v.name.empty() && !problem.empty()) {
    fail("/name", "the node name " + quoted_name(v.name) + " is not valid: " + problem);
  }
  v.kind = string_of(kind, "kind");
  // The kind's members first, then the bodies and what every node has, so that the first
  // problem stays the same.
  const bool known = io::with_kind(v.kind, [&](auto tag) {
    expect_object(j, allowed_members(tag));
    scratch.clear();
    io::read_json(tag, j, scratch);
    v.fields = scratch.finish();
    for (const io::BodyMember& body : io::json_bodies(tag)) read_bodies(j, body, v.bodies, scratch);
  });
  if (!known) fail("/kind", "unknown node kind " + quoted_name(v.kind) + " (expected " + io::kind_names() + ")");
  read_after(after, v);
  v.reads = read_found_array<AccessSpec>(reads, "reads");
  v.writes = read_found_array<AccessSpec>(writes, "writes");
}

void json_detail::read_node(const nlohmann::json& j, NodeSpec& v) {
  const CompactJson node = CompactJson::from_json(j);
  CompactJson::Builder scratch;
  read_node(node.root(), v, scratch);
}

bool parse_param_type(std::string_view text, ParamType& out) {
  ParamType type;
  if (text == "condition") {
    type.scalar = ScalarType::u64;
    type.condition = true;
    out = type;
    return true;
  }
  if (text.substr(0, 6) == "const ") {
    type.is_const = true;
    text.remove_prefix(6);
  }
  if (!text.empty() && text.back() == '*') {
    type.pointer = true;
    text.remove_suffix(1);
  }
  if (type.is_const && !type.pointer) return false;  // "const f32" says nothing a kernel could use
  if (!parse_scalar_type(text, type.scalar)) return false;
  out = type;
  return true;
}

void to_json(json& j, const BufferInit& v) {
  switch (v.kind) {
    case BufferInit::Kind::zeros:
      j = json{{"kind", "zeros"}};
      break;
    case BufferInit::Kind::constant:
      j = json{{"kind", "constant"}, {"value", v.value}};
      break;
    case BufferInit::Kind::uniform:
      j = json{{"kind", "uniform"}, {"low", v.low}, {"high", v.high}, {"seed", v.seed}};
      break;
    case BufferInit::Kind::normal:
      j = json{{"kind", "normal"}, {"mean", v.mean}, {"stddev", v.stddev}, {"seed", v.seed}};
      break;
    case BufferInit::Kind::npy:
      j = json{{"kind", "npy"}, {"file", v.file}};
      break;
    case BufferInit::Kind::safetensors:
      j = json{{"kind", "safetensors"}, {"file", v.file}};
      if (v.tensors.size() == 1) {
        j["tensor"] = v.tensors[0];
      } else {
        j["tensors"] = v.tensors;
      }
      break;
  }
}

void from_json(const json& j, BufferInit& v) {
  v = BufferInit{};
  const std::string kind = j.is_string() ? as_string(j) : get_string(j, "kind");
  const std::string where = j.is_string() ? "" : "/kind";
  if (kind == "zeros") {
    if (!j.is_string()) expect_object(j, {"kind"});
  } else if (kind == "constant") {
    expect_object(j, {"kind", "value"});
    v.kind = BufferInit::Kind::constant;
    v.value = get_number(j, "value");
  } else if (kind == "uniform") {
    expect_object(j, {"kind", "low", "high", "seed"});
    v.kind = BufferInit::Kind::uniform;
    v.low = get_number(j, "low");
    v.high = get_number(j, "high");
    v.seed = get_unsigned(j, "seed", std::numeric_limits<std::uint64_t>::max());
    if (!(v.low < v.high)) fail("/high", "expected high > low");
  } else if (kind == "normal") {
    expect_object(j, {"kind", "mean", "stddev", "seed"});
    v.kind = BufferInit::Kind::normal;
    v.mean = get_number(j, "mean");
    v.stddev = get_number(j, "stddev");
    v.seed = get_unsigned(j, "seed", std::numeric_limits<std::uint64_t>::max());
    if (!(v.stddev > 0)) fail("/stddev", "expected a positive standard deviation");
  } else if (kind == "npy") {
    expect_object(j, {"kind", "file"});
    v.kind = BufferInit::Kind::npy;
    v.file = get_string(j, "file");
  } else if (kind == "safetensors") {
    expect_object(j, {"kind", "file", "tensor", "tensors"});
    v.kind = BufferInit::Kind::safetensors;
    v.file = get_string(j, "file");
    const json* list = optional_member(j, "tensors");
    if ((list != nullptr) == (optional_member(j, "tensor") != nullptr)) {
      fail("", "expected either \"tensor\": name or \"tensors\": [names]");
    }
    if (list == nullptr) {
      v.tensors = {get_string(j, "tensor")};
    } else {
      within("/tensors", [&] {
        if (!list->is_array() || list->empty() || list->size() > max_init_tensors) {
          fail("", "expected an array of 1 to " + std::to_string(max_init_tensors) + " tensor names");
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
          within_element(i, [&] { v.tensors.push_back(as_string((*list)[i])); });
        }
      });
    }
  } else {
    fail(where, "unknown initialisation " + quoted_name(kind) +
                    " (expected zeros, constant, uniform, normal, npy or safetensors)");
  }
}

void to_json(json& j, const BufferSpec& v) {
  j = json{{"name", v.name}, {"type", to_string(v.type)}, {"count", v.count}, {"init", v.init}};
  if (v.output) j["output"] = true;
}

void from_json(const json& j, BufferSpec& v) {
  expect_object(j, {"name", "type", "count", "init", "output"});
  v.name = get_string(j, "name");
  if (v.name.empty()) fail("/name", "expected a non-empty buffer name");
  v.type = read_scalar_type(j, "type");
  v.count = get_unsigned(j, "count", json_max_buffer_bytes / size_of(v.type));
  if (v.count == 0) fail("/count", "expected at least one element");
  v.init = BufferInit{};
  if (const json* init = optional_member(j, "init")) within("/init", [&] { from_json(*init, v.init); });
  v.output = optional_member(j, "output") != nullptr && get_bool(j, "output");
}

void to_json(json& j, const BufferRef& v) {
  if (v.offset == 0) {
    j = v.buffer;
  } else {
    j = json{{"buffer", v.buffer}, {"offset", v.offset}};
  }
}

namespace {
template <class J>
void read_buffer_ref(const J& j, BufferRef& v) {
  v = BufferRef{};
  if (j.is_string()) {
    v.buffer = as_string(j);
    return;
  }
  if (!j.is_object()) fail("", "expected a buffer name or {\"buffer\": name, \"offset\": bytes}, found " + type_of(j));
  expect_object(j, {"buffer", "offset"});
  v.buffer = get_string(j, "buffer");
  if (optional_member(j, "offset")) v.offset = get_unsigned(j, "offset", json_max_buffer_bytes);
}
}  // namespace

void from_json(const json& j, BufferRef& v) { read_buffer_ref(j, v); }
void from_json(CompactJson::Ref j, BufferRef& v) { read_buffer_ref(j, v); }

void to_json(json& j, const AccessSpec& v) {
  if (v.bytes == 0) {
    j = v.at;
    return;
  }
  j = json{{"buffer", v.at.buffer}, {"bytes", v.bytes}};
  if (v.at.offset != 0) j["offset"] = v.at.offset;
}

namespace {
template <class J>
void read_access(const J& j, AccessSpec& v) {
  v = AccessSpec{};
  if (j.is_string()) {
    v.at.buffer = as_string(j);
    return;
  }
  if (!j.is_object()) fail("", "expected a buffer name or {\"buffer\", \"offset\", \"bytes\"}, found " + type_of(j));
  expect_object(j, {"buffer", "offset", "bytes"});
  v.at.buffer = get_string(j, "buffer");
  if (optional_member(j, "offset")) v.at.offset = get_unsigned(j, "offset", json_max_buffer_bytes);
  if (optional_member(j, "bytes")) v.bytes = get_unsigned(j, "bytes", json_max_buffer_bytes);
}
}  // namespace

void from_json(const json& j, AccessSpec& v) { read_access(j, v); }
void from_json(CompactJson::Ref j, AccessSpec& v) { read_access(j, v); }

void json_detail::write_buffer_ref(CompactJson::Builder& out, const BufferRef& ref) {
  if (ref.offset == 0) {
    out.string(ref.buffer);
    return;
  }
  out.start_object();
  out.key("buffer");
  out.string(ref.buffer);
  out.key("offset");
  out.unsigned_integer(ref.offset);
  out.end_object();
}

void to_json(json& j, const NodeSpec& v) {
  j = json{{"name", v.name}, {"kind", v.kind}};
  for (const CompactJson::Member m : v.fields.root().members()) j[std::string(m.key)] = m.value.to_json();
  io::with_kind(v.kind, [&](auto tag) {
    const std::vector<io::BodyMember> members = io::json_bodies(tag);
    for (std::uint32_t b = 0; b < v.bodies.size(); ++b) {
      const io::BodyPlace place = io::body_place(members, b);
      if (place.member == nullptr) break;
      if (place.member->many) {
        j[place.member->name].push_back(v.bodies[b]);
      } else {
        j[place.member->name] = v.bodies[b];
      }
    }
  });
  if (!v.after.empty()) {
    json& after = j["after"] = json::array();
    for (std::uint32_t i = 0; i < v.after.size(); ++i) {
      if (std::binary_search(v.programmatic.begin(), v.programmatic.end(), i)) {
        after.push_back({{"node", v.after[i]}, {"programmatic", true}});
      } else {
        after.push_back(v.after[i]);
      }
    }
  }
  write_array(j, "reads", v.reads);
  write_array(j, "writes", v.writes);
}

void from_json(const json& j, NodeSpec& v) { read_node(j, v); }

void to_json(json& j, const BodySpec& v) {
  if (v.use.empty()) {
    j = v.nodes;
  } else {
    j = json{{"use", v.use}};
  }
}

void from_json(const json& j, BodySpec& v) {
  const CompactJson body = CompactJson::from_json(j);
  CompactJson::Builder scratch;
  v = BodySpec{};
  read_body(body.root(), v, scratch);
}

void to_json(json& j, const KernelFileSpec& v) {
  json params = json::array();
  for (const KernelParam& p : v.params) {
    params.push_back(json{{"name", p.name}, {"type", to_string(p.type)}});
    if (!p.extent.empty()) params.back()["extent"] = p.extent;
  }
  j = json{{"name", v.name}, {"file", v.file}, {"symbol", v.symbol}, {"params", std::move(params)}};
}

void from_json(const json& j, KernelFileSpec& v) {
  expect_object(j, {"name", "file", "symbol", "params"});
  v.name = get_string(j, "name");
  v.file = get_string(j, "file");
  v.symbol = get_string(j, "symbol");
  const json& params = member(j, "params");
  if (!params.is_array()) fail("/params", "expected an array of {\"name\", \"type\"}, found " + type_of(params));
  v.params.clear();
  for (std::size_t i = 0; i < params.size(); ++i) {
    within("/params" + token(i), [&] {
      expect_object(params[i], {"name", "type", "extent"});
      KernelParam p{get_string(params[i], "name"), {}, {}, {}};
      if (optional_member(params[i], "extent") != nullptr) p.extent = get_string(params[i], "extent");
      const std::string type = get_string(params[i], "type");
      if (!parse_param_type(type, p.type)) {
        fail("/type", "unknown parameter type " + quoted_name(type) +
                          " (expected a scalar type such as f32, a pointer such as f32* or const f32*, or condition)");
      }
      v.params.push_back(std::move(p));
    });
  }
}

void to_json(json& j, const GraphSpec& v) {
  j = json{{"version", v.version}, {"name", v.name}};
  write_array(j, "kernel_files", v.kernel_files);
  j["buffers"] = v.buffers;
  if (!v.check_hazards) j["check_hazards"] = false;
  if (v.infer_edges) j["infer_edges"] = true;
  if (v.programmatic_edges) j["programmatic_edges"] = true;
  if (v.fuse) j["fuse"] = true;
  if (v.items_per_launch != 0) j["items_per_launch"] = v.items_per_launch;
  j["nodes"] = v.nodes;
  if (!v.bodies.empty()) j["bodies"] = v.bodies;
}

void from_json(const json& j, GraphSpec& v) {
  read_graph(j, v);
  const JsonLimits limits;
  std::vector<JsonProblem> problems = check_named_bodies(v, &limits);
  if (!problems.empty()) throw JsonError(std::move(problems));
}

void json_detail::read_graph(const json& j, GraphSpec& v) {
  if (!j.is_object()) fail("", "expected a graph object, found " + type_of(j));
  // The version first: a newer file should say so rather than fail on a member it added.
  const json& version = member(j, "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != json_format_version) {
    fail("/version", "unsupported version " + version.dump() + " (this flowdsl reads version " +
                         std::to_string(json_format_version) + ")");
  }
  expect_object(j, {"version", "name", "kernel_files", "buffers", "nodes", "bodies", "check_hazards", "infer_edges",
                    "programmatic_edges", "fuse", "items_per_launch"});
  v.version = json_format_version;
  v.name = get_string(j, "name");
  v.kernel_files = read_array<KernelFileSpec>(j, "kernel_files");
  v.buffers = read_array<BufferSpec>(j, "buffers");
  v.nodes = read_array<NodeSpec>(j, "nodes");
  v.bodies.clear();
  if (const json* bodies = optional_member(j, "bodies")) {
    if (!bodies->is_object()) fail("/bodies", "expected an object of bodies by name, found " + type_of(*bodies));
    for (const auto& item : bodies->items()) {
      within("/bodies" + token(item.key()), [&] {
        if (item.key().empty()) fail("", "expected a non-empty body name");
        const CompactJson nodes = CompactJson::from_json(item.value());
        CompactJson::Builder scratch;
        read_nodes(nodes.root(), v.bodies[item.key()], scratch);
      });
    }
  }
  v.check_hazards = optional_member(j, "check_hazards") == nullptr || get_bool(j, "check_hazards");
  v.infer_edges = optional_member(j, "infer_edges") != nullptr && get_bool(j, "infer_edges");
  v.programmatic_edges = optional_member(j, "programmatic_edges") != nullptr && get_bool(j, "programmatic_edges");
  v.fuse = optional_member(j, "fuse") != nullptr && get_bool(j, "fuse");
  v.items_per_launch = 0;
  if (optional_member(j, "items_per_launch") != nullptr) {
    v.items_per_launch = get_unsigned(j, "items_per_launch", std::numeric_limits<std::int64_t>::max());
    if (v.items_per_launch == 0) fail("/items_per_launch", "expected at least one item per launch");
  }
}

std::string to_json_text(const GraphSpec& spec) {
  json j;
  to_json(j, spec);
  return j.dump(2) + "\n";
}

}  // namespace flowdsl
