// SPDX-License-Identifier: Apache-2.0
// Library nodes without a GPU: declaration, validation, hash, accesses, JSON and DOT.
#include <cstring>
#include <string>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"

using flowdsl_test::contains;

namespace {

// Stand-ins for library calls: descriptions store only their addresses.
int scale_call(cudaStream_t, int, float, const float*, float*) { return 0; }
int other_call(cudaStream_t, int, float, const float*, float*) { return 0; }
void scale_kernel(int, float, const float*, float*) {}

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add_call("scale.call", scale_call, {"n", "a", "x: n", "y: n"}, "y = a x, as a library call");
    r.add("scale.kernel", scale_kernel, {"n", "a", "x: n", "y: n"});
    return true;
  }();
  (void)once;
  return r;
}

void* fake(std::uintptr_t at) { return reinterpret_cast<void*>(at); }

std::string graph_with(const std::string& nodes) {
  return R"({"version": 1, "name": "t", "buffers": [
      {"name": "x", "type": "f32", "count": 1024}, {"name": "y", "type": "f32", "count": 1024}],
    "nodes": [)" + nodes + "]}";
}

flowdsl::JsonError error_of(const std::string& text) {
  try {
    flowdsl::check_graph(flowdsl::parse_graph(text, "test.json"), registry(), {}, "test.json");
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;
}

}  // namespace

TEST_CASE("A registered library node describes the same node as the typed builder", "[library][builder]") {
  const flowdsl::KernelInfo& entry = *registry().find("scale.call");
  CHECK(entry.is_call());
  float x[4], y[4];
  flowdsl::Graph typed;
  typed.library("s", scale_call).args(4, 2.0f, x, y);
  flowdsl::Graph named;
  named.library("s", entry).set("n", 4).set("a", 2.0f).set("x", static_cast<const float*>(x)).set("y", y);

  const auto& a = std::get<flowdsl::LibraryOp>(typed.description().nodes[0].op);
  const auto& b = std::get<flowdsl::LibraryOp>(named.description().nodes[0].op);
  CHECK(a.function == b.function);
  CHECK(a.invoke == b.invoke);
  CHECK(a.args == b.args);
  CHECK(b.call_name == "scale.call");
  CHECK(flowdsl::kind_name(typed.description().nodes[0].op) == "library");
  CHECK(typed.topology_hash() == named.topology_hash());
}

TEST_CASE("A library node's arguments are parameters; its call is structure", "[library][hash]") {
  float x[4], y[4], z[4];
  flowdsl::Graph g;
  auto s = g.library("s", scale_call).args(4, 2.0f, x, y);
  const std::uint64_t hash = g.topology_hash();
  const flowdsl::Plan* plan = &g.plan();
  const auto version = g.parameter_version();
  s.arg<3>(z).arg<1>(3.0f);
  CHECK(&g.plan() == plan);  // no structural change: the plan is kept
  CHECK(g.topology_hash() == hash);
  std::vector<flowdsl::NodeId> changed;
  g.changes_since(version, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{s.id()});

  flowdsl::Graph other;
  other.library("s", other_call).args(4, 2.0f, x, y);
  CHECK(other.topology_hash() != hash);
}

TEST_CASE("Validation names a library node's unset arguments", "[library][validation]") {
  float y[4];
  flowdsl::Graph g;
  g.library("gemm", *registry().find("scale.call")).set("y", y);
  CHECK_THROWS_WITH(g.plan(), contains("node 'gemm' (library): argument 'n' was never set") &&
                                  contains("node 'gemm' (library): argument 'x' was never set"));
  flowdsl::Graph typed;
  typed.library("t", scale_call);
  CHECK_THROWS_WITH(typed.plan(), contains("node 't' (library): argument 0 was never set"));
}

TEST_CASE("A registered library node's parameters are checked by name and type", "[library][builder]") {
  flowdsl::Graph g;
  auto node = g.library("s", *registry().find("scale.call"));
  CHECK_THROWS_WITH(node.set("alpha", 1.0f), contains("node 's' (library call 'scale.call'): no parameter named 'alpha'"));
  CHECK_THROWS_WITH(node.set("a", 1), contains("parameter 'a' takes f32, not i32"));
  CHECK_THROWS_WITH(g.library("k", *registry().find("scale.kernel")), contains("'scale.kernel' is a kernel, not a library call"));
}

TEST_CASE("A library node's extents are checked against its buffers and feed the hazard check", "[library][hazards]") {
  auto* x = static_cast<float*>(fake(0x10000));
  auto* y = static_cast<float*>(fake(0x20000));
  const flowdsl::KernelInfo& entry = *registry().find("scale.call");
  {
    flowdsl::Graph g;
    g.buffer("x", x, 1024 * sizeof(float)).buffer("y", y, 1024 * sizeof(float));
    g.library("s", entry).set("n", 2048).set("a", 1.0f).set("x", static_cast<const float*>(x)).set("y", y);
    CHECK_THROWS_WITH(g.plan(), contains("node 's' (library): argument 'x' reads 2048 elements (n) of buffer 'x' (1024)"));
  }
  {
    flowdsl::Graph g;
    g.library("first", entry).set("n", 1024).set("a", 1.0f).set("x", static_cast<const float*>(x)).set("y", y);
    g.library("second", entry).set("n", 1024).set("a", 2.0f).set("x", static_cast<const float*>(x)).set("y", y);
    CHECK_THROWS_WITH(g.plan(), contains("'first'") && contains("'second'"));
  }
  {
    // A typed node of a globally registered call has no entry of its own: its declared accesses count.
    flowdsl::Graph g;
    g.library("first", scale_call).args(1024, 1.0f, x, y).writes(y, 1024 * sizeof(float));
    g.library("second", other_call).args(1024, 1.0f, x, y).writes(y, 1024 * sizeof(float));
    CHECK_THROWS_WITH(g.plan(), contains("'first'") && contains("'second'"));
  }
}

TEST_CASE("A programmatic edge into a library node is refused", "[library][programmatic]") {
  float x[4], y[4];
  flowdsl::Graph g;
  auto k = g.kernel("k", scale_kernel).launch(1, 32).args(4, 1.0f, x, y);
  g.library("s", scale_call).args(4, 2.0f, y, x).after(k, flowdsl::programmatic);
  CHECK_THROWS_WITH(g.plan(), contains("'s'"));
}

TEST_CASE("A graph file's library node binds by call name and writes back unchanged", "[library][json]") {
  const std::string text = graph_with(
      R"({"name": "s", "kind": "library", "call": "scale.call", "args": {"n": 1024, "a": 2.0, "x": "x", "y": "y"}})");
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
  flowdsl::check_graph(spec, registry());
  const flowdsl::BufferAddresses addresses = {{"x", fake(0x10000)}, {"y", fake(0x20000)}};
  const flowdsl::Graph g = flowdsl::bind_graph(spec, addresses, registry());
  const auto& op = std::get<flowdsl::LibraryOp>(g.description().nodes[0].op);
  CHECK(op.info == registry().find("scale.call"));
  float a = 0;
  std::memcpy(&a, op.args.data(1), sizeof a);
  CHECK(a == 2.0f);

  const flowdsl::GraphSpec written = flowdsl::describe_graph(g, "t", spec.buffers, addresses, registry());
  const flowdsl::Graph again = flowdsl::bind_graph(flowdsl::parse_graph(flowdsl::to_json_text(written)), addresses, registry());
  CHECK(again.topology_hash() == g.topology_hash());
  CHECK(std::get<flowdsl::LibraryOp>(again.description().nodes[0].op).args == op.args);
}

TEST_CASE("A graph file's bad library node is reported at its JSON pointer", "[library][json][errors]") {
  CHECK_THROWS_WITH(flowdsl::parse_graph(graph_with(R"({"name": "s", "kind": "library", "args": {}})")),
                    contains("/nodes/0") && contains("call"));
  CHECK(error_of(graph_with(R"({"name": "s", "kind": "library", "call": "nope", "args": {}})")).problems()[0].pointer ==
        "/nodes/0/call");
  const flowdsl::JsonError kernel = error_of(graph_with(
      R"({"name": "s", "kind": "library", "call": "scale.kernel", "args": {"n": 1, "a": 1, "x": "x", "y": "y"}})"));
  CHECK(kernel.problems()[0].pointer == "/nodes/0/call");
  CHECK_THAT(kernel.problems()[0].message, contains("is a kernel, not a library call"));
  const flowdsl::JsonError args = error_of(graph_with(
      R"({"name": "s", "kind": "library", "call": "scale.call", "args": {"n": 1024, "a": 1, "x": "x", "z": "y"}})"));
  CHECK(args.problems()[0].pointer == "/nodes/0/args/z");
  CHECK(args.problems()[1].pointer == "/nodes/0/args/y");
  const flowdsl::JsonError call_as_kernel = error_of(graph_with(
      R"({"name": "k", "kind": "kernel", "kernel": "scale.call", "grid": 1, "block": 32, "args": {}})"));
  CHECK_THAT(call_as_kernel.problems()[0].message, contains("is a library call, not a kernel"));
}

TEST_CASE("DOT draws a library node with its call and arguments", "[library][dot]") {
  auto* x = static_cast<float*>(fake(0x10000));
  auto* y = static_cast<float*>(fake(0x20000));
  flowdsl::Graph g;
  g.buffer("x", x, 4096).buffer("y", y, 4096);
  g.library("gemm", *registry().find("scale.call")).set("n", 1024).set("a", 2.0f).set("x", static_cast<const float*>(x)).set("y", y);
  flowdsl::DotOptions options;
  options.show_arguments = true;
  options.registry = &registry();
  const std::string dot = flowdsl::to_dot(g, options);
  CHECK_THAT(dot, contains("library scale.call"));
  CHECK_THAT(dot, contains("x = x"));
  CHECK_THAT(dot, contains("n = 1024"));
}
