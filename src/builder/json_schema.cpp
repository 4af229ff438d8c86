// Graph files: parsing with bounds, and the ADL serialisers of the spec types (schema only: no
// registry, no buffers; binding checks the rest).
#include <fstream>
#include <limits>
#include <sstream>

#include "flowdsl/json.hpp"
#include "json_support.hpp"

namespace flowdsl {
namespace json_detail {

std::string token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return "/" + out;
}

void fail(std::string pointer, std::string message) {
  throw JsonError({JsonProblem{std::move(pointer), std::move(message)}});
}

std::string type_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number with a fraction or exponent";
    default:
      return "an unsupported value";
  }
}

void expect_object(const json& j, std::initializer_list<std::string_view> allowed) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  for (const auto& item : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || item.key() == a;
    if (known) continue;
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    fail(token(item.key()), "unknown member '" + item.key() + "' (expected one of: " + list + ")");
  }
}

const json& member(const json& j, const char* key) {
  const json* found = optional_member(j, key);
  if (found == nullptr) fail(token(key), std::string("missing required member '") + key + "'");
  return *found;
}

const json* optional_member(const json& j, const char* key) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string as_string(const json& j) {
  if (!j.is_string()) fail("", "expected a string, found " + type_of(j));
  return j.get<std::string>();
}

std::uint64_t as_unsigned(const json& j, std::uint64_t max) {
  if (j.is_number_integer() && !j.is_number_unsigned()) {
    fail("", "value " + std::to_string(j.get<std::int64_t>()) + " is out of range: expected an integer in [0, " +
                 std::to_string(max) + "]");
  }
  if (!j.is_number_unsigned()) fail("", "expected a non-negative integer, found " + type_of(j));
  const auto value = j.get<std::uint64_t>();
  if (value > max) {
    fail("", "value " + std::to_string(value) + " is out of range: expected an integer in [0, " + std::to_string(max) +
                 "]");
  }
  return value;
}

std::string get_string(const json& j, const char* key) {
  const json& value = member(j, key);
  std::string out;
  within(token(key), [&] { out = as_string(value); });
  return out;
}

std::uint64_t get_unsigned(const json& j, const char* key, std::uint64_t max) {
  const json& value = member(j, key);
  std::uint64_t out = 0;
  within(token(key), [&] { out = as_unsigned(value, max); });
  return out;
}

double get_number(const json& j, const char* key) {
  const json& value = member(j, key);
  if (!value.is_number()) fail(token(key), "expected a number, found " + type_of(value));
  return value.get<double>();
}

bool get_bool(const json& j, const char* key) {
  const json& value = member(j, key);
  if (!value.is_boolean()) fail(token(key), "expected true or false, found " + type_of(value));
  return value.get<bool>();
}

}  // namespace json_detail

using namespace json_detail;

namespace {

constexpr std::uint32_t u32_max = std::numeric_limits<std::uint32_t>::max();

// Reads `array` element by element, each under its index.
template <class T>
std::vector<T> read_array(const json& j, const char* key) {
  std::vector<T> out;
  const json* array = optional_member(j, key);
  if (array == nullptr) return out;
  if (!array->is_array()) fail(token(key), "expected an array, found " + type_of(*array));
  out.resize(array->size());
  for (std::size_t i = 0; i < array->size(); ++i) {
    within(token(key) + token(i), [&] { from_json((*array)[i], out[i]); });
  }
  return out;
}

template <class T>
void write_array(json& j, const char* key, const std::vector<T>& values) {
  if (values.empty()) return;
  json array = json::array();
  for (const T& v : values) array.push_back(v);
  j[key] = std::move(array);
}

Dim3 read_dim(const json& j, const char* key) {
  const json* value = optional_member(j, key);
  if (value == nullptr) return Dim3{};
  Dim3 d;
  within(token(key), [&] {
    if (value->is_number()) {
      d.x = static_cast<std::uint32_t>(as_unsigned(*value, u32_max));
      return;
    }
    if (!value->is_array() || value->empty() || value->size() > 3) {
      fail("", "expected an integer or an array of 1 to 3 integers, found " + type_of(*value));
    }
    std::uint32_t* axes[3] = {&d.x, &d.y, &d.z};
    for (std::size_t i = 0; i < value->size(); ++i) {
      within(token(i), [&] { *axes[i] = static_cast<std::uint32_t>(as_unsigned((*value)[i], u32_max)); });
    }
  });
  return d;
}

json write_dim(const Dim3& d) {
  if (d.y == 1 && d.z == 1) return d.x;
  if (d.z == 1) return json::array({d.x, d.y});
  return json::array({d.x, d.y, d.z});
}

ScalarType read_scalar_type(const json& j, const char* key) {
  const std::string text = get_string(j, key);
  ScalarType type{};
  if (!parse_scalar_type(text, type)) {
    fail(token(key), "unknown element type '" + text + "' (expected i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64)");
  }
  return type;
}

std::vector<std::string> read_names(const json& j, const char* key) {
  std::vector<std::string> out;
  const json* array = optional_member(j, key);
  if (array == nullptr) return out;
  if (!array->is_array()) fail(token(key), "expected an array of node names, found " + type_of(*array));
  for (std::size_t i = 0; i < array->size(); ++i) {
    within(token(key) + token(i), [&] { out.push_back(as_string((*array)[i])); });
  }
  return out;
}

void read_kernel(const json& j, KernelNodeSpec& k) {
  expect_object(j, {"name", "kind", "kernel", "grid", "block", "shared_bytes", "args", "after", "reads", "writes"});
  k.kernel = get_string(j, "kernel");
  k.launch.grid = read_dim(j, "grid");
  k.launch.block = read_dim(j, "block");
  if (optional_member(j, "shared_bytes") != nullptr) {
    k.launch.shared_bytes = static_cast<std::uint32_t>(get_unsigned(j, "shared_bytes", u32_max));
  }
  const json* args = optional_member(j, "args");
  if (args == nullptr) return;
  if (!args->is_object()) fail("/args", "expected an object of arguments by parameter name, found " + type_of(*args));
  for (const auto& item : args->items()) {
    ArgumentSpec arg{item.key(), ScalarValue{}};
    const json& v = item.value();
    within("/args" + token(item.key()), [&] {
      if (v.is_number_unsigned()) {
        arg.value = ScalarValue{ScalarValue::Kind::unsigned_integer, 0, v.get<std::uint64_t>(), 0};
      } else if (v.is_number_integer()) {
        arg.value = ScalarValue{ScalarValue::Kind::signed_integer, v.get<std::int64_t>(), 0, 0};
      } else if (v.is_number_float()) {
        arg.value = ScalarValue{ScalarValue::Kind::floating, 0, 0, v.get<double>()};
      } else if (v.is_string() || v.is_object()) {
        BufferRef ref;
        from_json(v, ref);
        arg.value = std::move(ref);
      } else {
        fail("", "expected a number (scalar parameter) or a buffer name (pointer parameter), found " + type_of(v));
      }
    });
    k.args.push_back(std::move(arg));
  }
}

void read_memcpy(const json& j, MemcpyNodeSpec& m) {
  expect_object(j, {"name", "kind", "dst", "src", "bytes", "after", "reads", "writes"});
  within("/dst", [&] { from_json(member(j, "dst"), m.dst); });
  within("/src", [&] { from_json(member(j, "src"), m.src); });
  m.bytes = get_unsigned(j, "bytes", json_max_buffer_bytes);
}

void read_memset(const json& j, MemsetNodeSpec& m) {
  expect_object(j, {"name", "kind", "dst", "value", "element_size", "count", "after", "reads", "writes"});
  within("/dst", [&] { from_json(member(j, "dst"), m.dst); });
  m.value = static_cast<std::uint32_t>(get_unsigned(j, "value", u32_max));
  if (optional_member(j, "element_size") != nullptr) {
    m.element_size = static_cast<std::uint32_t>(get_unsigned(j, "element_size", 4));
  }
  m.count = get_unsigned(j, "count", json_max_buffer_bytes);
}

}  // namespace

bool parse_param_type(std::string_view text, ParamType& out) {
  ParamType type;
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
  } else {
    fail(where, "unknown initialisation '" + kind + "' (expected zeros, constant, uniform, normal or npy)");
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

void from_json(const json& j, BufferRef& v) {
  v = BufferRef{};
  if (j.is_string()) {
    v.buffer = as_string(j);
    return;
  }
  if (!j.is_object()) fail("", "expected a buffer name or {\"buffer\": name, \"offset\": bytes}, found " + type_of(j));
  expect_object(j, {"buffer", "offset"});
  v.buffer = get_string(j, "buffer");
  if (optional_member(j, "offset") != nullptr) v.offset = get_unsigned(j, "offset", json_max_buffer_bytes);
}

void to_json(json& j, const AccessSpec& v) {
  if (v.bytes == 0) {
    j = v.at;
    return;
  }
  j = json{{"buffer", v.at.buffer}, {"bytes", v.bytes}};
  if (v.at.offset != 0) j["offset"] = v.at.offset;
}

void from_json(const json& j, AccessSpec& v) {
  v = AccessSpec{};
  if (j.is_string()) {
    v.at.buffer = as_string(j);
    return;
  }
  if (!j.is_object()) fail("", "expected a buffer name or {\"buffer\", \"offset\", \"bytes\"}, found " + type_of(j));
  expect_object(j, {"buffer", "offset", "bytes"});
  v.at.buffer = get_string(j, "buffer");
  if (optional_member(j, "offset") != nullptr) v.at.offset = get_unsigned(j, "offset", json_max_buffer_bytes);
  if (optional_member(j, "bytes") != nullptr) v.bytes = get_unsigned(j, "bytes", json_max_buffer_bytes);
}

namespace {

struct WriteOp {
  json& j;
  void operator()(const KernelNodeSpec& k) const {
    j["kind"] = "kernel";
    j["kernel"] = k.kernel;
    j["grid"] = write_dim(k.launch.grid);
    j["block"] = write_dim(k.launch.block);
    if (k.launch.shared_bytes != 0) j["shared_bytes"] = k.launch.shared_bytes;
    json args = json::object();
    for (const ArgumentSpec& a : k.args) {
      if (const auto* ref = std::get_if<BufferRef>(&a.value)) {
        args[a.param] = *ref;
        continue;
      }
      const auto& s = std::get<ScalarValue>(a.value);
      switch (s.kind) {
        case ScalarValue::Kind::signed_integer:
          args[a.param] = s.i;
          break;
        case ScalarValue::Kind::unsigned_integer:
          args[a.param] = s.u;
          break;
        case ScalarValue::Kind::floating:
          args[a.param] = s.f;
          break;
      }
    }
    j["args"] = std::move(args);
  }
  void operator()(const MemcpyNodeSpec& m) const {
    j["kind"] = "memcpy";
    j["dst"] = m.dst;
    j["src"] = m.src;
    j["bytes"] = m.bytes;
  }
  void operator()(const MemsetNodeSpec& m) const {
    j["kind"] = "memset";
    j["dst"] = m.dst;
    j["value"] = m.value;
    j["element_size"] = m.element_size;
    j["count"] = m.count;
  }
  void operator()(const EmptyNodeSpec&) const { j["kind"] = "empty"; }
  void operator()(const HostNodeSpec& h) const {
    j["kind"] = "host";
    j["function"] = h.function;
  }
};

}  // namespace

void to_json(json& j, const NodeSpec& v) {
  j = json{{"name", v.name}};
  std::visit(WriteOp{j}, v.op);
  if (!v.after.empty()) j["after"] = v.after;
  write_array(j, "reads", v.reads);
  write_array(j, "writes", v.writes);
}

void from_json(const json& j, NodeSpec& v) {
  v = NodeSpec{};
  v.name = get_string(j, "name");
  const std::string kind = get_string(j, "kind");
  if (kind == "kernel") {
    v.op = KernelNodeSpec{};
    read_kernel(j, std::get<KernelNodeSpec>(v.op));
  } else if (kind == "memcpy") {
    v.op = MemcpyNodeSpec{};
    read_memcpy(j, std::get<MemcpyNodeSpec>(v.op));
  } else if (kind == "memset") {
    v.op = MemsetNodeSpec{};
    read_memset(j, std::get<MemsetNodeSpec>(v.op));
  } else if (kind == "empty") {
    expect_object(j, {"name", "kind", "after", "reads", "writes"});
    v.op = EmptyNodeSpec{};
  } else if (kind == "host") {
    expect_object(j, {"name", "kind", "function", "after", "reads", "writes"});
    v.op = HostNodeSpec{get_string(j, "function")};
  } else {
    fail("/kind", "unknown node kind '" + kind + "' (expected kernel, memcpy, memset, empty or host)");
  }
  v.after = read_names(j, "after");
  v.reads = read_array<AccessSpec>(j, "reads");
  v.writes = read_array<AccessSpec>(j, "writes");
}

void to_json(json& j, const KernelFileSpec& v) {
  json params = json::array();
  for (const KernelParam& p : v.params) params.push_back(json{{"name", p.name}, {"type", to_string(p.type)}});
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
      expect_object(params[i], {"name", "type"});
      KernelParam p{get_string(params[i], "name"), {}};
      const std::string type = get_string(params[i], "type");
      if (!parse_param_type(type, p.type)) {
        fail("/type", "unknown parameter type '" + type + "' (expected a scalar type such as f32, or a pointer such as f32* or const f32*)");
      }
      v.params.push_back(std::move(p));
    });
  }
}

void to_json(json& j, const GraphSpec& v) {
  j = json{{"version", v.version}, {"name", v.name}};
  write_array(j, "kernel_files", v.kernel_files);
  j["buffers"] = v.buffers;
  j["nodes"] = v.nodes;
}

void from_json(const json& j, GraphSpec& v) {
  if (!j.is_object()) fail("", "expected a graph object, found " + type_of(j));
  // The version first: a newer file should say so rather than fail on a member it added.
  const json& version = member(j, "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != json_format_version) {
    fail("/version", "unsupported version " + version.dump() + " (this flowdsl reads version " +
                         std::to_string(json_format_version) + ")");
  }
  expect_object(j, {"version", "name", "kernel_files", "buffers", "nodes"});
  v.version = json_format_version;
  v.name = get_string(j, "name");
  v.kernel_files = read_array<KernelFileSpec>(j, "kernel_files");
  v.buffers = read_array<BufferSpec>(j, "buffers");
  v.nodes = read_array<NodeSpec>(j, "nodes");
}

namespace {

// Thrown from the parser callback when the text exceeds a limit; turned into a JsonError.
struct LimitExceeded {
  std::string message;
};

json parse_bounded(std::string_view text, const std::string& source, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw JsonError({{"", "the text is " + std::to_string(text.size()) + " bytes, over the limit of " +
                              std::to_string(limits.max_bytes)}},
                    source);
  }
  std::size_t values = 0;
  const json::parser_callback_t bound = [&](int depth, json::parse_event_t event, json& parsed) {
    if (static_cast<std::size_t>(depth) > limits.max_depth) {
      throw LimitExceeded{"nesting deeper than " + std::to_string(limits.max_depth) + " levels"};
    }
    if (event == json::parse_event_t::key || event == json::parse_event_t::value) {
      if (++values > limits.max_values) {
        throw LimitExceeded{"more than " + std::to_string(limits.max_values) + " values"};
      }
      if (parsed.is_string() && parsed.get_ref<const std::string&>().size() > limits.max_string) {
        throw LimitExceeded{"a string of " + std::to_string(parsed.get_ref<const std::string&>().size()) +
                            " bytes, over the limit of " + std::to_string(limits.max_string)};
      }
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), bound);
  } catch (const LimitExceeded& e) {
    throw JsonError({{"", "input exceeds the reader's limits: " + e.message}}, source);
  } catch (const json::parse_error& e) {
    // nlohmann gives the byte position; lines and columns are what a person looks for.
    const std::size_t end = std::min<std::size_t>(e.byte, text.size());
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i + 1 < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::string what = e.what();
    const std::size_t detail = what.find(": ");
    if (detail != std::string::npos) what = what.substr(detail + 2);
    throw JsonError({{"", "malformed JSON at line " + std::to_string(line) + ", column " +
                              std::to_string(end > line_start ? end - line_start : 1) + ": " + what}},
                    source);
  } catch (const json::exception& e) {
    // A number beyond double's range: nlohmann reports it without a position.
    std::string what = e.what();
    const std::size_t detail = what.find("] ");
    if (detail != std::string::npos) what = what.substr(detail + 2);
    throw JsonError({{"", "malformed JSON: " + what}}, source);
  }
}

}  // namespace

GraphSpec parse_graph(std::string_view text, std::string source, const JsonLimits& limits) {
  const json j = parse_bounded(text, source, limits);
  try {
    if (j.is_object()) {
      const auto nodes = j.find("nodes");
      if (nodes != j.end() && nodes->is_array() && nodes->size() > limits.max_nodes) {
        fail("/nodes", std::to_string(nodes->size()) + " nodes exceed the limit of " + std::to_string(limits.max_nodes));
      }
      const auto buffers = j.find("buffers");
      if (buffers != j.end() && buffers->is_array() && buffers->size() > limits.max_buffers) {
        fail("/buffers",
             std::to_string(buffers->size()) + " buffers exceed the limit of " + std::to_string(limits.max_buffers));
      }
    }
    GraphSpec spec;
    from_json(j, spec);
    return spec;
  } catch (const JsonError& e) {
    throw JsonError(e.problems(), source);
  }
}

GraphSpec read_graph_file(const std::string& path, const JsonLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JsonError({{"", "cannot open the file"}}, path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw JsonError({{"", "cannot read the file"}}, path);
  if (static_cast<std::uint64_t>(size) > limits.max_bytes) {
    throw JsonError({{"", "the file is " + std::to_string(size) + " bytes, over the limit of " +
                              std::to_string(limits.max_bytes)}},
                    path);
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  in.read(text.data(), size);
  if (!in) throw JsonError({{"", "cannot read the file"}}, path);
  return parse_graph(text, path, limits);
}

std::string to_json_text(const GraphSpec& spec) {
  json j;
  to_json(j, spec);
  return j.dump(2) + "\n";
}

}  // namespace flowdsl
