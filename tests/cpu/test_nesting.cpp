// SPDX-License-Identifier: Apache-2.0
// Graphs nest: child-graph nodes own a body that validation, plan, hash, updates, JSON and DOT
// all recurse into, with nodes named by their path.
#include <algorithm>
#include <cstring>
#include <set>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;

namespace {

void scale(float*, float, int) {}
void host_fn(void*) {}
float x[64];

/// encoder: a -> b, two kernels.
flowdsl::Graph encoder() {
  flowdsl::Graph e;
  auto a = e.kernel("a", scale).launch(1, 32).args(x, 1.0f, 8);
  e.kernel("b", scale).launch(1, 32).args(x + 8, 2.0f, 8).after(a);
  return e;
}

std::vector<std::string> messages(const flowdsl::Graph& g) {
  std::vector<std::string> out;
  for (const auto& d : flowdsl::validate(g.description())) out.push_back(d.message);
  return out;
}

}  // namespace

TEST_CASE("A child graph copies its body, which plans and hashes with it", "[nesting][plan]") {
  flowdsl::Graph g;
  auto up = g.memcpy("upload", x, x + 32, 16);
  auto done = g.empty("done");  // declared before the child, runs after it
  auto enc = g.child("encoder", encoder()).after(up).before(done);
  const flowdsl::Description& d = g.description();
  REQUIRE(d.nodes.size() == 5);
  CHECK(flowdsl::node_path(d, 3) == "encoder/a");
  CHECK(d.nodes[3].parent == enc.id());
  CHECK(d.nodes[4].parent == enc.id());

  const flowdsl::Plan& plan = g.plan();
  REQUIRE(plan.steps.size() == 3);
  REQUIRE(plan.steps[1].bodies.size() == 1);
  const auto& body = plan.bodies[plan.steps[1].bodies[0]];
  REQUIRE(body.size() == 2);
  CHECK(body[1].deps == std::vector<std::uint32_t>{0});
  // Positions: each step, then its body's steps.
  CHECK(plan.position[up.id()] == 0);
  CHECK(plan.position[enc.id()] == 1);
  CHECK(plan.position[3] == 2);
  CHECK(plan.position[4] == 3);
  CHECK(plan.position[done.id()] == 4);

  // Equal nesting hashes equal; a change of structure inside the body changes the hash.
  flowdsl::Graph same;
  auto up2 = same.memcpy("upload", x, x + 32, 16);
  auto done2 = same.empty("done");
  auto enc2 = same.child("encoder", encoder()).after(up2).before(done2);
  CHECK(same.topology_hash() == g.topology_hash());
  enc2.body().empty("extra");
  CHECK(same.topology_hash() != g.topology_hash());
}

TEST_CASE("Nodes are declared in a body through its handle", "[nesting][builder]") {
  flowdsl::Graph g;
  auto outer = g.child("outer");
  auto inner = outer.body().child("inner");
  auto k = inner.body().kernel("step", scale).launch(1, 1).args(x, 1.0f, 1);
  inner.body().host("log", host_fn).after(k);
  CHECK(flowdsl::node_path(g.description(), k.id()) == "outer/inner/step");
  CHECK(outer.body().node("inner").id() == inner.id());
  CHECK_THROWS_WITH(g.node("step"), contains("no node named 'step'"));
  CHECK_THROWS_WITH(k.body(), contains("node 'outer/inner/step' (kernel) has 0 bodies"));
  CHECK(messages(g).empty());
}

TEST_CASE("Each use of a body is a copy whose nodes have typed handles of their own", "[nesting][builder]") {
  flowdsl::Graph g;
  const flowdsl::Graph body = encoder();
  auto first = g.child("first", body);
  auto second = g.child("second", body).after(first);
  // The second use's "b" gets its own factor; the first keeps the body's.
  second.body().node<flowdsl::KernelNode<float*, float, int>>("b").arg<1>(5.0f);
  const flowdsl::Description& d = g.description();
  const auto factor = [&](const char* path) {
    for (flowdsl::NodeId id = 0; id < d.nodes.size(); ++id) {
      if (flowdsl::node_path(d, id) != path) continue;
      float f = 0;
      std::memcpy(&f, std::get<flowdsl::KernelOp>(d.nodes[id].op).args.data(1), sizeof f);
      return f;
    }
    FAIL("no node " << path);
    return 0.0f;
  };
  CHECK(factor("first/b") == 2.0f);
  CHECK(factor("second/b") == 5.0f);
  using TwoArguments = flowdsl::KernelNode<float*, float>;
  using Doubles = flowdsl::KernelNode<double*, double, int>;
  using Scale = flowdsl::KernelNode<float*, float, int>;
  CHECK_THROWS_WITH(second.body().node<TwoArguments>("b"),
                    contains("node 'b' in body 0 of node 'second' does not fit the handle asked for: it takes 3 arguments, the handle 2"));
  CHECK_THROWS_WITH(second.body().node<Doubles>("b"), contains("its argument 1 has 4 bytes"));
  g.empty("join").after(second);
  CHECK_THROWS_WITH(g.node<Scale>("join"), contains("it is not a kernel node"));
}

TEST_CASE("Names are unique within a body, and problems name the path", "[nesting][validation]") {
  flowdsl::Graph g;
  auto c = g.child("c");
  c.body().kernel("a", scale).args(x, 1.0f, 1);     // launch shape never set
  c.body().empty("dup");
  c.body().empty("dup");
  g.empty("a");                                     // same name as c/a: fine, another body
  auto empty_child = g.child("hollow");
  const auto all = messages(g);
  CHECK(std::count_if(all.begin(), all.end(), [](const std::string& m) {
          return m == "node 'c/a' (kernel): launch shape was never set (call grid() and block(), or launch())";
        }) == 1);
  CHECK(std::any_of(all.begin(), all.end(), [](const std::string& m) {
    return m.find("node 'c/dup' is declared 2 times") != std::string::npos;
  }));
  CHECK(std::any_of(all.begin(), all.end(), [](const std::string& m) {
    return m == "node 'hollow' (child): body 0 is empty: declare at least one node in it";
  }));
  CHECK(all.size() == 3);
  (void)empty_child;
}

TEST_CASE("An edge between bodies is reported with both paths", "[nesting][validation]") {
  flowdsl::Graph g;
  auto c = g.child("c");
  auto inside = c.body().empty("inside");
  auto outside = g.empty("outside");
  inside.after(outside);
  const auto all = messages(g);
  REQUIRE(all.size() == 1);
  CHECK(all[0] == "edge from 'outside' to 'c/inside' crosses a body boundary: both ends of an edge must lie in one body");
}

TEST_CASE("A parameter changed inside a body updates that node alone", "[nesting][runtime]") {
  flowdsl_test::Record record;
  auto rt = flowdsl_test::make_runtime(record, 4);
  flowdsl::Graph g;
  auto c = g.child("c");
  auto k = c.body().kernel("k", scale).launch(1, 1).args(x, 1.0f, 1);
  g.empty("after").after(c);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::instantiated);
  k.arg<1>(3.0f);
  const auto report = rt.launch(g);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(record.asked == std::vector<std::uint32_t>{g.plan().position[k.id()]});
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::hit);
}

TEST_CASE("Child graphs travel through JSON with their bodies inline", "[nesting][json]") {
  const std::string text = R"({"version": 1, "name": "t",
    "buffers": [{"name": "x", "type": "f32", "count": 64}],
    "nodes": [
      {"name": "clear", "kind": "memset", "dst": "x", "value": 0, "count": 256},
      {"name": "stage", "kind": "child", "after": ["clear"], "nodes": [
        {"name": "copy", "kind": "memcpy", "dst": "x", "src": {"buffer": "x", "offset": 128}, "bytes": 64},
        {"name": "inner", "kind": "child", "after": ["copy"], "nodes": [{"name": "join", "kind": "empty"}]}]}]})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
  REQUIRE(spec.nodes.size() == 2);
  REQUIRE(spec.nodes[1].bodies.size() == 1);
  CHECK(spec.nodes[1].bodies[0].nodes[1].bodies[0].nodes[0].name == "join");
  const flowdsl::Graph g = flowdsl::inspect_graph(spec, flowdsl::KernelRegistry{});
  CHECK(g.size() == 5);

  // Written back, it reads the same.
  const flowdsl::GraphSpec again = flowdsl::parse_graph(flowdsl::to_json_text(spec));
  CHECK(flowdsl::to_json_text(again) == flowdsl::to_json_text(spec));

  // A problem inside a body is reported at its pointer.
  std::string bad = text;
  bad.replace(bad.find("\"offset\": 128"), 13, "\"offset\": 255");
  try {
    (void)flowdsl::inspect_graph(flowdsl::parse_graph(bad), flowdsl::KernelRegistry{});
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/1/nodes/0/src");
  }
  std::string dangling = text;
  dangling.replace(dangling.find("\"after\": [\"copy\"]"), 17, "\"after\": [\"clear\"]");
  try {
    (void)flowdsl::inspect_graph(flowdsl::parse_graph(dangling), flowdsl::KernelRegistry{});
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/1/nodes/1/after/0");
    CHECK_THAT(e.what(), contains("dependency on unknown node 'clear'"));
  }
}

TEST_CASE("A C++ graph with bodies is described as JSON with its bodies inline", "[nesting][json]") {
  flowdsl::Graph g;
  auto c = g.child("c");
  auto copy = c.body().memcpy("copy", x, x + 16, 64);
  c.body().empty("join").after(copy);
  const flowdsl::BufferAddresses at{{"x", x}};
  const flowdsl::GraphSpec spec =
      flowdsl::describe_graph(g, "t", {flowdsl::BufferSpec{"x", flowdsl::ScalarType::f32, 64, {}, false}}, at, {});
  REQUIRE(spec.nodes.size() == 1);
  REQUIRE(spec.nodes[0].bodies.at(0).nodes.size() == 2);
  CHECK(spec.nodes[0].bodies[0].nodes[1].after == std::vector<std::string>{"copy"});
  const flowdsl::Graph back = flowdsl::bind_graph(spec, at, {});
  CHECK(back.topology_hash() == g.topology_hash());
}

TEST_CASE("DOT draws a body as a cluster named by its node's path", "[nesting][dot]") {
  flowdsl::Graph g;
  auto c = g.child("c");
  c.body().empty("inside");
  const std::string dot = flowdsl::to_dot(g);
  CHECK_THAT(dot, contains("subgraph cluster_n0_0 {"));
  CHECK_THAT(dot, contains("label=\"c\";"));
  CHECK_THAT(dot, contains("n0 -> n1 [style=dotted"));
}
