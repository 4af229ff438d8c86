// SPDX-License-Identifier: Apache-2.0
// Graph files on the built-in kernel library: launch shapes from each kernel's rule (the one its
// C++ launcher applies), given shapes checked against it, enumerated arguments by name. No GPU:
// descriptions store only addresses.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "builtin_registry.hpp"
#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernels.hpp"
#include "flowdsl/rope.hpp"

using flowdsl_test::contains;
namespace fk = flowdsl::kernels;

namespace {

const flowdsl::KernelRegistry& builtins() { return flowdsl_test::builtin_registry(); }

void* fake(std::uintptr_t at) { return reinterpret_cast<void*>(at); }

// Buffers of an MLP layer: x [128, 256] and w [256, 512] in bf16, bias and h in float.
const flowdsl::BufferAddresses addresses = {
    {"x", fake(0x100000)}, {"w", fake(0x200000)}, {"b", fake(0x300000)}, {"h", fake(0x400000)}};
const std::string buffers = R"("buffers": [
    {"name": "x", "type": "bf16", "count": 32768}, {"name": "w", "type": "bf16", "count": 131072},
    {"name": "b", "type": "f32", "count": 512}, {"name": "h", "type": "f32", "count": 65536}])";

std::string linear(const std::string& activation, const std::string& shape = "") {
  return R"({"version": 1, "name": "t", )" + buffers + R"(, "nodes": [
    {"name": "scale", "kind": "kernel", "kernel": "scale.f32", "args": {"n": 512, "a": 2.0, "x": "b", "y": "b"}},
    {"name": "linear", "kind": "kernel", "kernel": "matmul.bf16", )" + shape + R"("after": ["scale"],
     "args": {"m": 128, "n": 512, "k": 256, "a": "x", "b": "w", "bias": "b", "activation": )" + activation +
         R"(, "c": "h"}}]})";
}

flowdsl::Graph bound(const std::string& text) {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "test.json");
  return flowdsl::bind_graph(spec, addresses, builtins());
}

flowdsl::JsonError error_of(const std::string& text) {
  try {
    flowdsl::check_graph(flowdsl::parse_graph(text, "test.json"), builtins(), {}, "test.json");
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;
}

// The same graph from the C++ launchers.
flowdsl::Graph launched(fk::Activation activation) {
  flowdsl::Graph g;
  auto* b = static_cast<float*>(addresses.at("b"));
  auto scale = fk::scale(g, "scale", 512, 2.0f, static_cast<const float*>(b), b);
  fk::matmul(g, "linear", 128, 512, 256, static_cast<const __nv_bfloat16*>(addresses.at("x")),
             static_cast<const __nv_bfloat16*>(addresses.at("w")), static_cast<const float*>(b), activation,
             static_cast<float*>(addresses.at("h")))
      .after(scale);
  return g;
}

const flowdsl::KernelOp& kernel_op(const flowdsl::Graph& g, std::size_t node) {
  return std::get<flowdsl::KernelOp>(g.description().nodes.at(node).op);
}

}  // namespace

TEST_CASE("A built-in kernel's node without a launch shape gets its launcher's", "[json][kernels][shape]") {
  const flowdsl::Graph file = bound(linear(R"("gelu")"));
  const flowdsl::Graph cpp = launched(fk::Activation::gelu);
  CHECK(file.topology_hash() == cpp.topology_hash());
  for (std::size_t i = 0; i < 2; ++i) {
    const flowdsl::KernelOp& a = kernel_op(file, i);
    const flowdsl::KernelOp& b = kernel_op(cpp, i);
    INFO("node " << i);
    CHECK(a.launch.grid == b.launch.grid);
    CHECK(a.launch.block == b.launch.block);
    CHECK(a.launch.shared_bytes == b.launch.shared_bytes);
    CHECK(a.args == b.args);
  }
  // 128 x 512 x 256 fills few multiprocessors with 128 x 256 tiles: 64 columns a block, k in two
  // halves across a cluster of two blocks.
  CHECK(kernel_op(file, 1).launch.grid == flowdsl::Dim3(8, 1, 2));
  CHECK(kernel_op(file, 1).launch.cluster == flowdsl::Dim3(1, 1, 2));
  CHECK(kernel_op(file, 1).launch.block == flowdsl::Dim3(384));
  for (std::size_t i = 0; i < 2; ++i) CHECK(kernel_op(file, i).launch.cluster == kernel_op(cpp, i).launch.cluster);
}

TEST_CASE("The registered launch rule is the launcher's", "[kernels][shape]") {
  const flowdsl::KernelInfo* matmul = builtins().find("matmul.bf16");
  REQUIRE(matmul != nullptr);
  REQUIRE(matmul->launch);
  CHECK_FALSE(matmul->launch.grid_strides);
  CHECK_FALSE(matmul->launch.block_exact);
  const flowdsl::KernelInfo* scale = builtins().find("scale.f32");
  REQUIRE(scale != nullptr);
  REQUIRE(scale->launch);
  CHECK(scale->launch.grid_strides);
  CHECK(scale->launch.block_exact);
}

TEST_CASE("A grid too small for matmul.bf16 is refused at the node's grid", "[json][kernels][shape][errors]") {
  const auto e = error_of(linear(R"("gelu")", R"("grid": [1, 1], )"));
  CHECK(e.pointer() == "/nodes/1/grid");
  CHECK_THAT(e.what(), contains("grid 1x1x1 leaves part of the output uncomputed: kernel 'matmul.bf16' computes one part "
                                "a block and needs a grid of at least 2x1x1 for these arguments"));
  // A larger grid leaves nothing out: its extra blocks find no tile.
  CHECK_NOTHROW(bound(linear(R"("gelu")", R"("grid": [3, 2], )")));
  // The least grid is the wide tiles' (2x1x1), not the rule's split one: such a grid gets no
  // clusters (its z is not a multiple of the rule's), and only its z = 0 blocks work.
  CHECK(kernel_op(bound(linear(R"("gelu")", R"("grid": [3, 2], )")), 1).launch.cluster == flowdsl::Dim3());
  CHECK(kernel_op(bound(linear(R"("gelu")", R"("grid": [8, 1, 2], "cluster": [1, 1, 2], )")), 1).launch.cluster ==
        flowdsl::Dim3(1, 1, 2));
}

TEST_CASE("A block or shared memory a built-in kernel cannot run with is refused", "[json][kernels][shape][errors]") {
  auto e = error_of(linear(R"("gelu")", R"("block": 512, )"));
  CHECK(e.pointer() == "/nodes/1/block");
  CHECK_THAT(e.what(), contains("block 512x1x1 has 512 threads, kernel 'matmul.bf16' runs with at most 384"));
  e = error_of(linear(R"("gelu")", R"("shared_bytes": 1024, )"));
  CHECK(e.pointer() == "/nodes/1/shared_bytes");
  CHECK_THAT(e.what(), contains("shared_bytes 1024 is less than the"));
  e = error_of(R"({"version": 1, "name": "t", )" + buffers + R"(, "nodes": [
    {"name": "scale", "kind": "kernel", "kernel": "scale.f32", "block": 128, "args": {"n": 512, "a": 2.0, "x": "b", "y": "b"}}]})");
  CHECK(e.pointer() == "/nodes/0/block");
  CHECK_THAT(e.what(), contains("kernel 'scale.f32' runs with a block of 256x1x1 only, found 128x1x1"));
  // A striding kernel computes everything on any grid.
  CHECK_NOTHROW(bound(R"({"version": 1, "name": "t", )" + buffers + R"(, "nodes": [
    {"name": "scale", "kind": "kernel", "kernel": "scale.f32", "grid": 1, "args": {"n": 512, "a": 2.0, "x": "b", "y": "b"}}]})"));
}

TEST_CASE("An enumerated argument binds the same by name and by number", "[json][kernels][enum]") {
  const flowdsl::Graph by_name = bound(linear(R"("gelu")"));
  const flowdsl::Graph by_number = bound(linear("2"));
  CHECK(kernel_op(by_name, 1).args == kernel_op(by_number, 1).args);
  CHECK(kernel_op(by_name, 1).args == kernel_op(launched(fk::Activation::gelu), 1).args);
}

TEST_CASE("An unknown enumerator is refused with the valid names", "[json][kernels][enum][errors]") {
  const auto e = error_of(linear(R"("gleu")"));
  CHECK(e.pointer() == "/nodes/1/args/activation");
  CHECK_THAT(e.what(), contains("parameter 'activation': unknown value 'gleu' (values: none, relu, gelu, silu, or their "
                                "numbers 0 to 3)"));
}

TEST_CASE("DOT and describe_graph write enumerated arguments by name", "[json][dot][kernels][enum]") {
  const flowdsl::Graph g = launched(fk::Activation::gelu);
  flowdsl::DotOptions options;
  options.show_arguments = true;
  options.registry = &builtins();
  CHECK_THAT(flowdsl::to_dot(g, options), contains("activation = gelu"));

  const std::vector<flowdsl::BufferSpec> specs = {{"x", flowdsl::ScalarType::bf16, 32768, {}, false},
                                                  {"w", flowdsl::ScalarType::bf16, 131072, {}, false},
                                                  {"b", flowdsl::ScalarType::f32, 512, {}, false},
                                                  {"h", flowdsl::ScalarType::f32, 65536, {}, false}};
  const std::string text = flowdsl::to_json_text(flowdsl::describe_graph(g, "t", specs, addresses, builtins()));
  CHECK_THAT(text, contains(R"("activation": "gelu")"));
  CHECK_THAT(text, !contains(R"("grid")"));  // the rule's shapes are left out
  const flowdsl::Graph read = bound(text);
  CHECK(read.topology_hash() == g.topology_hash());
  CHECK(kernel_op(read, 1).args == kernel_op(g, 1).args);
  CHECK(flowdsl::to_json_text(flowdsl::describe_graph(read, "t", specs, addresses, builtins())) == text);
}

TEST_CASE("The sample graph files leave launch shapes and enumerated values to the kernels", "[json][kernels][samples]") {
  std::size_t samples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FLOWDSL_SAMPLES_DIR)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    const flowdsl::GraphSpec spec = flowdsl::read_graph_file(entry.path().string());
    CHECK_NOTHROW(flowdsl::check_graph(spec, builtins()));
    const std::string text = flowdsl::to_json_text(spec);
    CHECK_THAT(text, !contains(R"("grid")") && !contains(R"("block")") && !contains(R"("shared_bytes")"));
    CHECK_THAT(text, !contains(R"("activation": 0)") && !contains(R"("activation": 2)"));
    ++samples;
  }
  CHECK(samples >= 6);
}

TEST_CASE("Typed launcher nodes bind arguments by parameter name, composite ones take edges", "[kernels][handles]") {
  fk::ensure_builtins();
  flowdsl::Graph g;
  auto* b = static_cast<float*>(addresses.at("b"));
  auto* h = static_cast<float*>(addresses.at("h"));
  auto scale = fk::scale(g, "scale", 512, 2.0f, static_cast<const float*>(b), b);
  scale.set("a", 3.0f).set("n", 256);
  const auto& op = kernel_op(g, 0);
  float a = 0;
  std::int64_t n = 0;
  std::memcpy(&a, op.args.data(1), sizeof a);
  std::memcpy(&n, op.args.data(0), sizeof n);
  CHECK(a == 3.0f);
  CHECK(n == 256);
  CHECK_THROWS_WITH(scale.set("alpha", 1.0f), contains("no parameter named 'alpha' (parameters: n, a, x, y)"));
  CHECK_THROWS_WITH(scale.set("x", 1.0f), contains("does not convert"));
  // A sum is two kernels: after() reaches the first, before() the last.
  auto* partials = reinterpret_cast<double*>(std::uintptr_t{0x500000});
  auto sum = fk::sum(g, "sum", 512, static_cast<const float*>(b), partials, h).after(scale);
  auto done = g.empty("done");
  sum.before(done);
  const flowdsl::Description& d = g.description();
  bool scale_then_partial = false, finish_then_done = false;
  for (const flowdsl::Edge& e : d.edges) {
    scale_then_partial |= e.from.id == scale.id() && e.to.id == sum.partial.id();
    finish_then_done |= e.from.id == sum.finish.id() && e.to.id == done.id();
  }
  CHECK(scale_then_partial);
  CHECK(finish_then_done);
}

TEST_CASE("Every list of fusable kernels in the docs names each one the registry holds", "[kernels][fusion][docs]") {
  std::vector<std::string> fusable;
  for (const flowdsl::KernelInfo* k : builtins().list()) {
    if (k->element.empty()) continue;
    const std::string base = k->name.substr(0, k->name.find('.'));
    if (std::find(fusable.begin(), fusable.end(), base) == fusable.end()) fusable.push_back(base);
  }
  REQUIRE(fusable.size() >= 10);
  for (const char* file : {"README.md", "docs/architecture.md", "docs/json-format.md", "docs/python.md",
                           "include/flowdsl/fusion.hpp", "include/flowdsl/graph.hpp"}) {
    std::ifstream in(std::string(FLOWDSL_SOURCE_DIR) + "/" + file);
    REQUIRE(in);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Each list starts "fill, iota, scale" (with or without backquotes) and ends within a paragraph.
    bool found = false;
    for (std::size_t at = text.find("fill"); at != std::string::npos; at = text.find("fill", at + 1)) {
      const std::string list = text.substr(at, 240);
      if (list.find("iota") > 12 || list.find("scale") > 24) continue;
      found = true;
      for (const std::string& name : fusable) {
        INFO(file << ": the list at byte " << at << " lacks " << name);
        CHECK(list.find(name) != std::string::npos);
      }
    }
    INFO(file);
    CHECK(found);
  }
}

TEST_CASE("RoPE inverse frequencies follow theta and Llama 3's scaling", "[kernels][rope]") {
  // Spot values for Llama-3.2-1B's rotary settings (head_dim 64, theta 500000, llama3 factor 32,
  // low 1, high 4, original 8192), from Hugging Face's formula evaluated in double.
  const std::vector<float> plain = fk::rope_inverse_frequencies(64, 500000.0);
  REQUIRE(plain.size() == 32);
  CHECK(plain[0] == 1.0f);
  CHECK(plain[16] == Approx(0.001414213562373095).epsilon(1e-6));
  fk::RopeScaling llama3;
  llama3.kind = fk::RopeScaling::Kind::llama3;
  llama3.factor = 32;
  const std::vector<float> scaled = fk::rope_inverse_frequencies(64, 500000.0, llama3);
  CHECK(scaled[10] == plain[10]);                                          // short wavelength: kept
  CHECK(scaled[16] == Approx(0.00042955679655936815).epsilon(1e-6));       // between: interpolated
  CHECK(scaled[20] == Approx(8.570255489881478e-06).epsilon(1e-6));        // long: divided by 32
  CHECK(scaled[31] == Approx(9.418306725434909e-08).epsilon(1e-6));
  CHECK_THROWS_AS(fk::rope_inverse_frequencies(63, 10000.0), flowdsl::UsageError);
  llama3.high_freq_factor = 0.5;
  CHECK_THROWS_AS(fk::rope_inverse_frequencies(64, 500000.0, llama3), flowdsl::UsageError);
}
