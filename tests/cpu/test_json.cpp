// SPDX-License-Identifier: Apache-2.0
// JSON graph files: round trip with the C++ builder, the samples, and one test per error class,
// each checking the JSON pointer the error names.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"

using flowdsl_test::contains;

namespace {

// Host stand-ins for kernels: descriptions store only addresses.
void scale_f32(int, float, const float*, float*) {}
void multiply_add_f32(int, const float*, const float*, float*) {}
void fill_f16(std::uint64_t, __half, __half*) {}
void tick(void*) {}

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("scale_f32", scale_f32, {"n", "alpha", "x", "y"});
    r.add("multiply_add_f32", multiply_add_f32, {"n", "a", "b", "out"});
    r.add("fill_f16", fill_f16, {"n", "value", "out"});
    return true;
  }();
  (void)once;
  return r;
}

int counter = 0;
const flowdsl::HostFunctions hosts{{"tick", {tick, &counter}}};

// Addresses that look like device memory; nothing is dereferenced.
void* fake(std::uintptr_t at) { return reinterpret_cast<void*>(at); }

flowdsl::JsonError error_of(const std::string& text) {
  try {
    const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "test.json");
    flowdsl::check_graph(spec, registry(), hosts, "test.json");
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;
}

// A one-node graph around `node` (a JSON object's text), with buffers x and y of 1024 f32.
std::string graph_with(const std::string& node, const std::string& more_nodes = "") {
  return R"({"version": 1, "name": "t", "buffers": [
      {"name": "x", "type": "f32", "count": 1024}, {"name": "y", "type": "f32", "count": 1024},
      {"name": "h", "type": "f16", "count": 1024}],
    "nodes": [)" + node + more_nodes + "]}";
}

const std::string good_kernel =
    R"({"name": "k", "kind": "kernel", "kernel": "scale_f32", "grid": 4, "block": 256,
        "args": {"n": 1024, "alpha": 2.0, "x": "x", "y": "y"}})";

std::string kernel_with_args(const std::string& args) {
  return R"({"name": "k", "kind": "kernel", "kernel": "scale_f32", "grid": 4, "block": 256, "args": )" + args + "}";
}

}  // namespace

TEST_CASE("A C++ graph written to JSON reads back to an equal description", "[json][roundtrip]") {
  const std::uint64_t n = 1024;
  const std::vector<flowdsl::BufferSpec> buffers = {
      {"x", flowdsl::ScalarType::f32, n, {}, false},
      {"left", flowdsl::ScalarType::f32, n, {}, false},
      {"right", flowdsl::ScalarType::f32, n, {}, false},
      {"z", flowdsl::ScalarType::f32, n, {}, true},
      {"h", flowdsl::ScalarType::f16, n, {}, false},
  };
  const flowdsl::BufferAddresses addresses = {{"x", fake(0x10000)},     {"left", fake(0x20000)},
                                              {"right", fake(0x30000)}, {"z", fake(0x40000)},
                                              {"h", fake(0x50000)}};
  float* x = static_cast<float*>(addresses.at("x"));
  float* left = static_cast<float*>(addresses.at("left"));
  float* right = static_cast<float*>(addresses.at("right"));
  float* z = static_cast<float*>(addresses.at("z"));
  auto* h = static_cast<__half*>(addresses.at("h"));

  flowdsl::Graph g;
  auto clear = g.memset("clear", z, 0, n * 4);
  auto l = g.kernel("left", scale_f32, "scale_f32").launch(4, 256).args(1024, 2.5f, x, left).after(clear);
  auto r = g.kernel("right", scale_f32).launch({2, 2}, {128, 2}, 64).args(1024, -0.125f, x + 16, right).after(clear);
  auto join = g.empty("join").after(l, r);
  auto combine = g.kernel("combine", multiply_add_f32).launch(4, 256).args(1024, left, right, z).after(join);
  combine.reads(left, n * 4).reads(right).writes(z, n * 4);
  g.kernel("half", fill_f16).launch(4, 256).args(std::uint64_t{1024}, __float2half(0.75f), h).after(combine);
  g.memcpy("copy", x, z + 8, 512).after(combine);
  g.host("tick", tick, &counter).after("copy");

  const flowdsl::GraphSpec written = flowdsl::describe_graph(g, "roundtrip", buffers, addresses, registry(), hosts);
  const std::string text = flowdsl::to_json_text(written);
  const flowdsl::GraphSpec read = flowdsl::parse_graph(text);
  CHECK(read.name == "roundtrip");
  REQUIRE(read.buffers.size() == buffers.size());
  CHECK(read.buffers[3].output);
  flowdsl::check_graph(read, registry(), hosts);
  const flowdsl::Graph loaded = flowdsl::bind_graph(read, addresses, registry(), hosts);

  CHECK(loaded.topology_hash() == g.topology_hash());
  const auto& a = g.description();
  const auto& b = loaded.description();
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    INFO("node " << a.nodes[i].name);
    CHECK(a.nodes[i].name == b.nodes[i].name);
    CHECK(flowdsl::kind_name(a.nodes[i].op) == flowdsl::kind_name(b.nodes[i].op));
    CHECK(a.nodes[i].accesses.size() == b.nodes[i].accesses.size());
    if (const auto* ka = std::get_if<flowdsl::KernelOp>(&a.nodes[i].op)) {
      const auto& kb = std::get<flowdsl::KernelOp>(b.nodes[i].op);
      CHECK(ka->function == kb.function);
      CHECK(ka->args == kb.args);
      CHECK(ka->launch.block == kb.launch.block);
    }
    if (const auto* ma = std::get_if<flowdsl::MemcpyOp>(&a.nodes[i].op)) {
      const auto& mb = std::get<flowdsl::MemcpyOp>(b.nodes[i].op);
      CHECK((ma->dst == mb.dst && ma->src == mb.src && ma->bytes == mb.bytes));
    }
    if (const auto* ha = std::get_if<flowdsl::HostOp>(&a.nodes[i].op)) {
      CHECK(ha->user_data == std::get<flowdsl::HostOp>(b.nodes[i].op).user_data);
    }
  }
  CHECK(flowdsl::to_json_text(flowdsl::describe_graph(loaded, "roundtrip", buffers, addresses, registry(), hosts)) == text);
}

// Checking the samples needs the built-in kernels (device code): the cli_validate_* tests do
// that with the `flowdsl` tool. Here, everything the reader alone can say.
TEST_CASE("Every sample graph file reads and writes back unchanged", "[json][samples]") {
  std::size_t samples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FLOWDSL_SAMPLES_DIR)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    ++samples;
    const flowdsl::GraphSpec spec = flowdsl::read_graph_file(entry.path().string());
    CHECK(spec.name == entry.path().stem().string());
    CHECK_FALSE(spec.nodes.empty());
    const std::string text = flowdsl::to_json_text(spec);
    CHECK(flowdsl::to_json_text(flowdsl::parse_graph(text)) == text);
  }
  CHECK(samples >= 6);
}

TEST_CASE("Malformed JSON is reported with line and column", "[json][errors]") {
  const auto e = error_of("{\n  \"version\": 1,\n  \"name\": ,\n}");
  CHECK(e.pointer().empty());
  CHECK_THAT(e.what(), contains("test.json: /: malformed JSON at line 3, column 11"));
}

TEST_CASE("A number beyond double's range is malformed JSON, not a crash", "[json][errors][fuzz]") {
  // Found by fuzz_json: nlohmann reports it as out_of_range, not as a parse error.
  const auto e = error_of(R"({"version": 1, "name": "t", "buffers": [{"name": "b", "type": "f32", "count": 104E576}]})");
  CHECK(e.pointer().empty());
  CHECK_THAT(e.what(), contains("malformed JSON: number overflow parsing '104E576'"));
}

TEST_CASE("An unsupported version is reported at /version", "[json][errors]") {
  const auto e = error_of(R"({"version": 2, "name": "t", "nodes": []})");
  CHECK(e.pointer() == "/version");
  CHECK_THAT(e.what(), contains("unsupported version 2 (this flowdsl reads version 1)"));
}

TEST_CASE("Missing and unknown members are reported where they are", "[json][errors]") {
  auto e = error_of(graph_with(R"({"name": "k", "kernel": "scale_f32"})"));
  CHECK(e.pointer() == "/nodes/0/kind");
  CHECK_THAT(e.what(), contains("missing required member 'kind'"));
  e = error_of(graph_with(R"({"name": "k", "kind": "empty", "agrs": {}})"));
  CHECK(e.pointer() == "/nodes/0/agrs");
  CHECK_THAT(e.what(), contains("unknown member 'agrs'"));
  e = error_of(graph_with(R"({"name": "k", "kind": "graph"})"));
  CHECK(e.pointer() == "/nodes/0/kind");
  CHECK_THAT(e.what(), contains("unknown node kind 'graph'"));
}

TEST_CASE("An unknown kernel is reported at its node's kernel member", "[json][errors]") {
  const auto e = error_of(graph_with(R"({"name": "k", "kind": "kernel", "kernel": "saxpy", "args": {}})"));
  CHECK(e.pointer() == "/nodes/0/kernel");
  CHECK_THAT(e.what(), contains("unknown kernel 'saxpy'"));
}

TEST_CASE("Unknown and missing arguments are reported by parameter", "[json][errors]") {
  auto e = error_of(graph_with(kernel_with_args(R"({"n": 1, "alpha": 1.0, "beta": 2.0, "x": "x", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/beta");
  CHECK_THAT(e.what(), contains("unknown parameter 'beta' of kernel 'scale_f32' (parameters: n, alpha, x, y)"));
  e = error_of(graph_with(kernel_with_args(R"({"n": 1, "x": "x", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/alpha");
  CHECK_THAT(e.what(), contains("missing argument for parameter 'alpha' (f32)"));
}

TEST_CASE("Arguments of the wrong type are reported by parameter", "[json][errors]") {
  auto e = error_of(graph_with(kernel_with_args(R"({"n": 1, "alpha": "x", "x": "x", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/alpha");
  CHECK_THAT(e.what(), contains("wrong type: parameter 'alpha' takes f32 by value, found buffer 'x'"));
  e = error_of(graph_with(kernel_with_args(R"({"n": 1, "alpha": 1.0, "x": 7, "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/x");
  CHECK_THAT(e.what(), contains("takes const f32*, a buffer name, found a number"));
  e = error_of(graph_with(kernel_with_args(R"({"n": 1, "alpha": 1.0, "x": "h", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/x");
  CHECK_THAT(e.what(), contains("buffer 'h' holds f16"));
  e = error_of(graph_with(kernel_with_args(R"({"n": 1.5, "alpha": 1.0, "x": "x", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/n");
  CHECK_THAT(e.what(), contains("expected an integer"));
  e = error_of(graph_with(kernel_with_args(R"({"n": true, "alpha": 1.0, "x": "x", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/n");
  CHECK_THAT(e.what(), contains("found a boolean"));
}

TEST_CASE("Values out of range are reported by parameter or member", "[json][errors]") {
  auto e = error_of(graph_with(kernel_with_args(R"({"n": 3000000000, "alpha": 1.0, "x": "x", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/n");
  CHECK_THAT(e.what(), contains("value 3000000000 is out of range [-2147483648, 2147483647]"));
  e = error_of(graph_with(R"({"name": "f", "kind": "kernel", "kernel": "fill_f16", "args": {"n": 1, "value": 70000, "out": "h"}})"));
  CHECK(e.pointer() == "/nodes/0/args/value");
  CHECK_THAT(e.what(), contains("out of range"));
  e = error_of(graph_with(R"({"name": "k", "kind": "kernel", "kernel": "scale_f32", "block": [1, 2, 3, 4], "args": {}})"));
  CHECK(e.pointer() == "/nodes/0/block");
  e = error_of(graph_with(R"({"name": "c", "kind": "memcpy", "dst": "y", "src": {"buffer": "x", "offset": 4000}, "bytes": 400})"));
  CHECK(e.pointer() == "/nodes/0/src");
  CHECK_THAT(e.what(), contains("400 bytes at offset 4000 overrun buffer 'x' of 4096 bytes"));
  e = error_of(R"({"version": 1, "name": "t", "buffers": [{"name": "b", "type": "f64", "count": 1e300}], "nodes": []})");
  CHECK(e.pointer() == "/buffers/0/count");
  e = error_of(R"({"version": 1, "name": "t", "buffers": [{"name": "b", "type": "f64", "count": 18446744073709551615}], "nodes": []})");
  CHECK(e.pointer() == "/buffers/0/count");
  CHECK_THAT(e.what(), contains("out of range"));
}

TEST_CASE("A file may declare the items one launch processes, for throughput in items/s", "[json][items]") {
  const std::string declared = R"({"version": 1, "name": "t", "items_per_launch": 128, "nodes": []})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(declared, "t.json");
  CHECK(spec.items_per_launch == 128);
  CHECK(flowdsl::parse_graph(flowdsl::to_json_text(spec), "again").items_per_launch == 128);
  CHECK(flowdsl::parse_graph(R"({"version": 1, "name": "t", "nodes": []})").items_per_launch == 0);  // not declared
  CHECK_THAT(flowdsl::to_json_text(flowdsl::parse_graph(R"({"version": 1, "name": "t", "nodes": []})")),
             !contains("items_per_launch"));

  auto e = error_of(R"({"version": 1, "name": "t", "items_per_launch": 0, "nodes": []})");
  CHECK(e.pointer() == "/items_per_launch");
  CHECK_THAT(e.what(), contains("expected at least one item per launch"));
  e = error_of(R"({"version": 1, "name": "t", "items_per_launch": -3, "nodes": []})");
  CHECK(e.pointer() == "/items_per_launch");
  CHECK_THAT(e.what(), contains("value -3 is out of range"));
  e = error_of(R"({"version": 1, "name": "t", "items_per_launch": 2.5, "nodes": []})");
  CHECK(e.pointer() == "/items_per_launch");
  CHECK_THAT(e.what(), contains("expected a non-negative integer, found"));
}

TEST_CASE("Unknown buffers are reported where they are named", "[json][errors]") {
  auto e = error_of(graph_with(kernel_with_args(R"({"n": 1, "alpha": 1.0, "x": "nope", "y": "y"})")));
  CHECK(e.pointer() == "/nodes/0/args/x");
  CHECK_THAT(e.what(), contains("unknown buffer 'nope'"));
  e = error_of(graph_with(R"({"name": "z", "kind": "memset", "dst": "w", "value": 0, "count": 4})"));
  CHECK(e.pointer() == "/nodes/0/dst");
  e = error_of(graph_with(R"({"name": "z", "kind": "empty", "reads": ["q"]})"));
  CHECK(e.pointer() == "/nodes/0/reads/0");
}

TEST_CASE("A dependency on an unknown node is reported at its place in after", "[json][errors]") {
  const auto e = error_of(graph_with(good_kernel, R"(, {"name": "j", "kind": "empty", "after": ["k", "ghost"]})"));
  CHECK(e.pointer() == "/nodes/1/after/1");
  CHECK_THAT(e.what(), contains("dependency on unknown node 'ghost'"));
}

TEST_CASE("An unknown host function is reported at its node", "[json][errors]") {
  const auto e = error_of(graph_with(R"({"name": "cb", "kind": "host", "function": "print"})"));
  CHECK(e.pointer() == "/nodes/0/function");
  CHECK_THAT(e.what(), contains("unknown host function 'print' (known: tick)"));
}

TEST_CASE("A kernel registered without a launch rule needs its shape in the file", "[json][errors][shape]") {
  REQUIRE_FALSE(registry().find("scale_f32")->launch);
  const auto e = error_of(graph_with(R"({"name": "k", "kind": "kernel", "kernel": "scale_f32",
                                         "args": {"n": 1, "alpha": 1.0, "x": "x", "y": "y"}})"));
  CHECK(e.pointer() == "/nodes/0");
  CHECK_THAT(e.what(), contains("node 'k' (kernel): launch shape was never set"));
}

TEST_CASE("Core validation errors are mapped to their node's pointer", "[json][errors]") {
  auto e = error_of(graph_with(R"({"name": "k", "kind": "kernel", "kernel": "scale_f32", "grid": 4, "block": 2048,
                                    "args": {"n": 1, "alpha": 1.0, "x": "x", "y": "y"}})"));
  CHECK(e.pointer() == "/nodes/0");
  CHECK_THAT(e.what(), contains("node 'k' (kernel): block of 2048 threads (2048x1x1) exceeds 1024"));
  e = error_of(graph_with(R"({"name": "a", "kind": "empty", "after": ["b"]})", R"(, {"name": "b", "kind": "empty", "after": ["a"]})"));
  CHECK(e.pointer() == "/nodes/0");
  CHECK_THAT(e.what(), contains("cycle"));
  e = error_of(graph_with(good_kernel, R"(, {"name": "c", "kind": "memcpy", "dst": "y", "src": "x", "bytes": 0})"));
  CHECK(e.pointer() == "/nodes/1");
  CHECK_THAT(e.what(), contains("copies zero bytes"));
  e = error_of(R"({"version": 1, "name": "t", "nodes": []})");
  CHECK(e.pointer().empty());
  CHECK_THAT(e.what(), contains("empty"));
}

TEST_CASE("A spec made by a program with fields missing or ill-typed is reported at the member", "[json][errors]") {
  // Nothing read it, so nothing checked its members: binding reports them as it would a file's.
  flowdsl::GraphSpec spec = flowdsl::parse_graph(graph_with(good_kernel, R"(, {"name": "m", "kind": "memcpy",
      "dst": "y", "src": "x", "bytes": 64})"), "test.json");
  spec.nodes[0].fields = flowdsl::CompactJson::from_json({{"kernel", "scale_f32"}, {"grid", 4}, {"block", 256}});
  spec.nodes[1].fields = flowdsl::CompactJson::from_json({{"dst", 7}, {"src", "x"}, {"bytes", "many"}});
  try {
    flowdsl::check_graph(spec, registry(), hosts, "test.json");
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    REQUIRE(e.problems().size() == 2);
    CHECK(e.problems()[0].pointer == "/nodes/0/args");
    CHECK_THAT(e.problems()[0].message, contains("missing required member 'args'"));
    CHECK(e.problems()[1].pointer == "/nodes/1/bytes");
    CHECK_THAT(e.problems()[1].message, contains("expected a non-negative integer, found a string"));
  }
  // The same spec, mended, checks: the failed attempt left nothing behind.
  spec.nodes[0].fields = flowdsl::CompactJson::from_json(
      {{"kernel", "scale_f32"}, {"grid", 4}, {"block", 256}, {"args", {{"n", 1024}, {"alpha", 2.0}, {"x", "x"}, {"y", "y"}}}});
  spec.nodes[1].fields = flowdsl::CompactJson::from_json({{"dst", "y"}, {"src", "x"}, {"bytes", 64}});
  CHECK_NOTHROW(flowdsl::check_graph(spec, registry(), hosts, "test.json"));
}

TEST_CASE("Every problem is reported at once", "[json][errors]") {
  const auto e = error_of(graph_with(kernel_with_args(R"({"n": -3000000000, "alpha": 1.0, "x": "nope", "y": "y", "z": 1})")));
  REQUIRE(e.problems().size() == 3);
  CHECK_THAT(e.what(), contains("3 problems"));
}

TEST_CASE("Hostile input hits the reader's limits, not the machine's", "[json][errors][limits]") {
  auto e = error_of(std::string(100000, '[') + std::string(100000, ']'));
  CHECK_THAT(e.what(), contains("nesting deeper than 32 levels"));
  e = error_of(R"({"version": 1, "name": ")" + std::string(10000, 'a') + R"(", "nodes": []})");
  CHECK_THAT(e.what(), contains("a string of 10000 bytes, over the limit of 4096"));

  flowdsl::JsonLimits limits;
  limits.max_nodes = 10;
  std::string nodes;
  for (int i = 0; i < 11; ++i) nodes += std::string(i ? "," : "") + R"({"name": "n)" + std::to_string(i) + R"(", "kind": "empty"})";
  try {
    (void)flowdsl::parse_graph(R"({"version": 1, "name": "t", "nodes": [)" + nodes + "]}", "big.json", limits);
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& err) {
    CHECK(err.pointer() == "/nodes");
    CHECK_THAT(err.what(), contains("11 nodes exceed the limit of 10"));
  }
  limits = {};
  limits.max_bytes = 16;
  CHECK_THROWS_WITH(flowdsl::parse_graph(R"({"version": 1, "name": "t", "nodes": []})", "t", limits),
                    contains("over the limit of 16"));
}

TEST_CASE("Names with JSON pointer specials are escaped in pointers", "[json][errors]") {
  const auto e = error_of(graph_with(kernel_with_args(R"({"n": 1, "alpha": 1.0, "x": "x", "y": "y", "a/b~c": 1})")));
  CHECK(e.pointer() == "/nodes/0/args/a~1b~0c");
}

TEST_CASE("Kernels declared in kernel_files are checked against their declared parameters", "[json][kernel_files]") {
  const std::string text = R"({"version": 1, "name": "t",
    "kernel_files": [{"name": "twice", "file": "twice.cubin", "symbol": "twice",
                      "params": [{"name": "n", "type": "i32"}, {"name": "data", "type": "f32*"}]}],
    "buffers": [{"name": "x", "type": "f32", "count": 16}],
    "nodes": [{"name": "k", "kind": "kernel", "kernel": "twice", "grid": 1, "block": 16, "args": {"n": 16, "data": "x"}}]})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
  CHECK_NOTHROW(flowdsl::check_graph(spec, registry()));
  REQUIRE(spec.kernel_files.size() == 1);
  CHECK(flowdsl::to_string(spec.kernel_files[0].params[1].type) == "f32*");
  // Binding without loading the file says what to do.
  try {
    (void)flowdsl::bind_graph(spec, {{"x", fake(0x1000)}}, registry());
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/0/kernel");
    CHECK_THAT(e.what(), contains("declared in kernel_files but was not loaded"));
  }
  const auto e = error_of(R"({"version": 1, "name": "t", "kernel_files": [{"name": "k", "file": "f", "symbol": "s",
                              "params": [{"name": "n", "type": "int"}]}], "nodes": []})");
  CHECK(e.pointer() == "/kernel_files/0/params/0/type");
}

namespace {

// A file whose "bodies" member is `bodies` and whose nodes are `nodes` (JSON texts).
std::string file_with_bodies(const std::string& bodies, const std::string& nodes) {
  return R"({"version": 1, "name": "t", "buffers": [{"name": "x", "type": "f32", "count": 1024}],
    "bodies": )" + bodies + R"(, "nodes": )" + nodes + "}";
}

const std::string stage_body = R"({"stage": [
    {"name": "copy", "kind": "memcpy", "dst": "x", "src": {"buffer": "x", "offset": 2048}, "bytes": 1024},
    {"name": "join", "kind": "empty", "after": ["copy"]}]})";

flowdsl::JsonError parse_error_of(const std::string& text, const flowdsl::JsonLimits& limits = {}) {
  try {
    (void)flowdsl::parse_graph(text, "test.json", limits);
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;  // not reached: FAIL throws
}

// Bodies b0 ... b<levels>: b0 holds one node, each next one two children using the one before,
// so b<k> expands to 3 * 2^k - 2 nodes.
std::string doubling_bodies(int levels) {
  std::string bodies = R"({"b0": [{"name": "e", "kind": "empty"}])";
  for (int k = 1; k <= levels; ++k) {
    const std::string use = R"({"use": "b)" + std::to_string(k - 1) + R"("})";
    bodies += R"(, "b)" + std::to_string(k) + R"(": [{"name": "l", "kind": "child", "nodes": )" + use +
              R"(}, {"name": "r", "kind": "child", "nodes": )" + use + "}]";
  }
  return bodies + "}";
}

}  // namespace

TEST_CASE("A named body is a copy at each use", "[json][bodies]") {
  const std::string text = file_with_bodies(stage_body, R"([
    {"name": "a", "kind": "child", "nodes": {"use": "stage"}},
    {"name": "b", "kind": "child", "nodes": {"use": "stage"}, "after": ["a"]}])");
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
  REQUIRE(spec.bodies.count("stage") == 1);
  CHECK(spec.nodes.at(1).bodies.at(0).use == "stage");
  CHECK(spec.nodes.at(1).bodies.at(0).nodes.empty());
  const std::string written = flowdsl::to_json_text(spec);
  CHECK_THAT(written, contains(R"("use": "stage")"));
  CHECK(flowdsl::to_json_text(flowdsl::parse_graph(written)) == written);

  const flowdsl::BufferAddresses at = {{"x", fake(0x10000)}};
  const flowdsl::Graph g = flowdsl::bind_graph(spec, at, registry());
  const flowdsl::Description& d = g.description();
  REQUIRE(d.nodes.size() == 6);
  CHECK(flowdsl::node_path(d, 1) == "a/copy");
  CHECK(flowdsl::node_path(d, 5) == "b/join");
  // The same graph with its bodies inline: what describing it writes, and the same topology.
  const flowdsl::GraphSpec inline_spec =
      flowdsl::describe_graph(g, "t", spec.buffers, at, registry());
  CHECK(inline_spec.bodies.empty());
  CHECK(inline_spec.nodes.at(1).bodies.at(0).nodes.size() == 2);
  CHECK(flowdsl::bind_graph(inline_spec, at, registry()).topology_hash() == g.topology_hash());
}

TEST_CASE("Problems inside a named body are reported at the body's pointer, once", "[json][bodies]") {
  auto e = error_of(file_with_bodies(R"({"stage": [{"name": "copy", "kind": "memcpy", "dst": "nope", "src": "x", "bytes": 4}]})",
                                     R"([{"name": "a", "kind": "child", "nodes": {"use": "stage"}},
                                         {"name": "b", "kind": "child", "nodes": {"use": "stage"}}])"));
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "/bodies/stage/0/dst");
  CHECK_THAT(e.what(), contains("unknown buffer 'nope'"));
  // Validation names each copy by its path.
  e = error_of(file_with_bodies(R"({"stage": [{"name": "copy", "kind": "memcpy", "dst": "x", "src": "x", "bytes": 0}]})",
                                R"([{"name": "a", "kind": "child", "nodes": {"use": "stage"}},
                                    {"name": "b", "kind": "child", "nodes": {"use": "stage"}}])"));
  REQUIRE(e.problems().size() == 2);
  CHECK(e.problems()[0].pointer == "/bodies/stage/0");
  CHECK(e.problems()[1].pointer == "/bodies/stage/0");
  CHECK_THAT(e.what(), contains("node 'a/copy' (memcpy): copies zero bytes"));
  CHECK_THAT(e.what(), contains("node 'b/copy' (memcpy): copies zero bytes"));
  // Read problems are the reader's, at the same pointers.
  e = parse_error_of(file_with_bodies(R"({"stage": [{"name": "j", "kind": "empty", "agrs": 1}]})", "[]"));
  CHECK(e.pointer() == "/bodies/stage/0/agrs");
  e = parse_error_of(file_with_bodies(R"({"stage": {"use": "other"}})", "[]"));
  CHECK(e.pointer() == "/bodies/stage");
  CHECK_THAT(e.what(), contains("expected an array of nodes, found an object"));
}

TEST_CASE("A use of an undeclared body is reported at the use", "[json][bodies]") {
  auto e = parse_error_of(file_with_bodies(stage_body, R"([{"name": "a", "kind": "child", "nodes": {"use": "stag"}}])"));
  CHECK(e.pointer() == "/nodes/0/nodes/use");
  CHECK_THAT(e.what(), contains("unknown body 'stag' (not declared under \"bodies\")"));
  e = parse_error_of(file_with_bodies(R"({"loop": [{"name": "i", "kind": "if", "default": 1,
                                          "then": [{"name": "e", "kind": "empty"}], "else": {"use": "gone"}}]})",
                                      "[]"));
  CHECK(e.pointer() == "/bodies/loop/0/else/use");
  e = parse_error_of(file_with_bodies(stage_body, R"([{"name": "a", "kind": "child", "nodes": {"use": ""}}])"));
  CHECK(e.pointer() == "/nodes/0/nodes/use");
  e = parse_error_of(file_with_bodies(stage_body, R"([{"name": "a", "kind": "child", "nodes": {"use": "stage", "x": 1}}])"));
  CHECK(e.pointer() == "/nodes/0/nodes/x");
  // An unused named body is read, and not bound.
  CHECK_NOTHROW(flowdsl::check_graph(
      flowdsl::parse_graph(file_with_bodies(stage_body, R"([{"name": "e", "kind": "empty"}])")), registry()));
}

TEST_CASE("A named body that holds itself is reported with its cycle", "[json][bodies]") {
  auto e = parse_error_of(file_with_bodies(
      R"({"a": [{"name": "x", "kind": "child", "nodes": {"use": "b"}}],
          "b": [{"name": "y", "kind": "switch", "default": 0, "cases": [[{"name": "e", "kind": "empty"}], {"use": "a"}]}]})",
      R"([{"name": "top", "kind": "child", "nodes": {"use": "a"}}])"));
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "/bodies/b/0/cases/1/use");
  CHECK_THAT(e.what(), contains("body 'a' uses itself: 'a' -> 'b' -> 'a'"));
  const std::string itself = file_with_bodies(R"({"me": [{"name": "x", "kind": "child", "nodes": {"use": "me"}}]})", "[]");
  e = parse_error_of(itself);
  CHECK(e.pointer() == "/bodies/me/0/nodes/use");
  CHECK_THAT(e.what(), contains("body 'me' uses itself: 'me' -> 'me'"));
  // Reading a DOM (from_json) checks the same.
  CHECK_THROWS_WITH(nlohmann::json::parse(itself).get<flowdsl::GraphSpec>(), contains("body 'me' uses itself"));
  // A spec made in code is checked the same way before it is bound.
  flowdsl::GraphSpec spec = flowdsl::parse_graph(file_with_bodies(stage_body, "[]"));
  spec.bodies["stage"][1].kind = "child";
  spec.bodies["stage"][1].bodies.push_back(flowdsl::BodySpec{{}, "stage"});
  CHECK_THROWS_WITH(flowdsl::check_graph(spec, registry()), contains("body 'stage' uses itself"));
}

TEST_CASE("The node limit counts a named body at each use, so uses cannot multiply past it", "[json][bodies][limits]") {
  flowdsl::JsonLimits limits;
  limits.max_nodes = 1000;
  const std::string top = R"([{"name": "top", "kind": "child", "nodes": {"use": "b10"}}])";
  auto e = parse_error_of(file_with_bodies(doubling_bodies(10), top), limits);
  CHECK(e.pointer() == "/nodes");
  CHECK_THAT(e.what(), contains("3071 nodes, counting those of every body and each named body at each of its uses, "
                                "exceed the limit of 1000"));
  limits.max_nodes = 3071;
  CHECK(flowdsl::parse_graph(file_with_bodies(doubling_bodies(10), top), "t", limits).bodies.size() == 11);
  // Sixty levels would expand to 3 * 2^60 - 1 nodes: refused at once, for nesting as well.
  e = parse_error_of(file_with_bodies(doubling_bodies(60), R"([{"name": "top", "kind": "child", "nodes": {"use": "b60"}}])"));
  REQUIRE(e.problems().size() == 2);
  CHECK_THAT(e.problems()[0].message, contains("3458764513820540927 nodes"));
  CHECK_THAT(e.problems()[1].message,
             contains("with each named body written out at its uses, the nodes nest 125 levels deep, over the limit of 32"));
  // Inline bodies count too.
  limits.max_nodes = 2;
  e = parse_error_of(R"({"version": 1, "name": "t", "nodes": [{"name": "c", "kind": "child", "nodes": [
                        {"name": "a", "kind": "empty"}, {"name": "b", "kind": "empty"}]}]})", limits);
  CHECK_THAT(e.what(), contains("3 nodes, counting those of every body"));
}

// docs/contributing.md, "Documentation snippets": a ```json block that is a whole graph file
// must read; one marked <!-- json: check --> must also pass check_graph with no registered
// kernel (it declares its kernels in kernel_files).
TEST_CASE("The graph files of docs/json-format.md read, and those marked so check", "[json][docs]") {
  std::ifstream in(FLOWDSL_DOCS_DIR "/json-format.md");
  REQUIRE(in);
  std::size_t files = 0, checked = 0;
  std::string line, previous, block;
  bool in_json = false, check = false;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (in_json && line.rfind("```", 0) == 0) {
      in_json = false;
      if (block.find("\"version\"") == std::string::npos) continue;  // a fragment of a file
      INFO("docs/json-format.md, block ending at line " << number);
      ++files;
      const flowdsl::GraphSpec spec = flowdsl::parse_graph(block, "json-format.md");
      if (check) {
        ++checked;
        CHECK_NOTHROW(flowdsl::check_graph(spec, flowdsl::KernelRegistry{}, {}, "json-format.md"));
      }
    } else if (in_json) {
      block += line + "\n";
    } else if (line.rfind("```json", 0) == 0) {
      in_json = true;
      check = previous == "<!-- json: check -->";
      block.clear();
    }
    if (!line.empty()) previous = line;
  }
  CHECK(files >= 2);
  CHECK(checked >= 1);
}

TEST_CASE("docs/flowdsl.schema.json is the schema the node kinds give", "[json][schema]") {
  std::ifstream in(FLOWDSL_DOCS_DIR "/flowdsl.schema.json");
  REQUIRE(in);
  const nlohmann::json documented = nlohmann::json::parse(in);
  const nlohmann::json generated = flowdsl::graph_file_schema();
  INFO("regenerate it with: flowdsl schema > docs/flowdsl.schema.json");
  CHECK(documented == generated);
  CHECK(generated["$defs"]["node"]["properties"]["kind"]["enum"].size() == std::variant_size_v<flowdsl::Operation>);
}
