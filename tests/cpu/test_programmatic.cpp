// SPDX-License-Identifier: Apache-2.0
// Programmatic edges (EdgeKind::programmatic): declared per edge in C++ and JSON, kernel to
// kernel only, hashed as their own kind, drawn dashed, written back as they were read.
#include <string>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"

using flowdsl_test::contains;

namespace {

// Host stand-ins for kernels: descriptions store only addresses.
void scale_f32(int, float, const float*, float*) {}

float x[256], y[256], z[256];

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("scale_f32", scale_f32, {"n", "alpha", "x: n", "y: n"});
    return true;
  }();
  (void)once;
  return r;
}

/// x -> first -> y -> second -> z, the second edge programmatic or not.
struct Chain {
  explicit Chain(bool programmatic) {
    first = g.kernel("first", scale_f32).launch(1, 256).args(256, 2.0f, x, y);
    second = g.kernel("second", scale_f32).launch(1, 256).args(256, 3.0f, y, z);
    if (programmatic) {
      second.after(first, flowdsl::programmatic);
    } else {
      second.after(first);
    }
  }
  flowdsl::Graph g;
  flowdsl::KernelNode<int, float, const float*, float*> first{nullptr, 0}, second{nullptr, 0};
};

std::string problems(const flowdsl::Graph& g) {
  std::string text;
  for (const flowdsl::Diagnostic& d : flowdsl::validate(g.description())) text += d.message + "\n";
  return text;
}

}  // namespace

TEST_CASE("A programmatic edge orders like a full one and hashes as another topology", "[programmatic]") {
  Chain plain(false), early(true);
  REQUIRE(problems(early.g).empty());
  CHECK(plain.g.topology_hash() != early.g.topology_hash());
  CHECK(Chain(true).g.topology_hash() == early.g.topology_hash());
  const flowdsl::Plan& plan = early.g.plan();
  REQUIRE(plan.steps.size() == 2);
  CHECK(plan.steps[1].deps == std::vector<std::uint32_t>{0});
  CHECK(plan.steps[1].programmatic == std::vector<std::uint32_t>{0});
  CHECK(plain.g.plan().steps[1].programmatic.empty());
}

TEST_CASE("A programmatic edge joins two kernels, and is not declared full as well", "[programmatic][validation]") {
  flowdsl::Graph g;
  auto copy = g.memcpy("copy", y, x, sizeof x);
  auto k = g.kernel("k", scale_f32).launch(1, 256).args(256, 2.0f, y, z).after(copy, flowdsl::programmatic);
  const std::string text = problems(g);
  CHECK_THAT(text, contains("programmatic edge from 'copy' (memcpy) to 'k' (kernel): programmatic edges join two kernel nodes"));

  Chain both(true);
  both.second.after(both.first);
  CHECK_THAT(problems(both.g), contains("edge from 'first' to 'second' is declared both full and programmatic: keep one"));
  Chain full_first(false);  // the full edge declared before the programmatic one
  full_first.second.after(full_first.first, flowdsl::programmatic);
  CHECK_THAT(problems(full_first.g),
             contains("edge from 'first' to 'second' is declared both full and programmatic: keep one"));
  (void)k;
}

TEST_CASE("Programmatic edges survive a copy of the graph into a body", "[programmatic][nesting]") {
  Chain chain(true);
  flowdsl::Graph outer;
  outer.child("stage", chain.g);
  const flowdsl::Plan& plan = outer.plan();
  REQUIRE(plan.bodies.size() == 1);
  CHECK(plan.bodies[0][1].programmatic == std::vector<std::uint32_t>{0});
}

TEST_CASE("JSON writes a programmatic edge as an object and reads it back", "[programmatic][json]") {
  const std::string text = R"({"version": 1, "name": "pdl",
    "buffers": [{"name": "x", "type": "f32", "count": 256}, {"name": "y", "type": "f32", "count": 256},
                {"name": "z", "type": "f32", "count": 256}],
    "nodes": [
      {"name": "first", "kind": "kernel", "kernel": "scale_f32", "grid": 1, "block": 256,
       "args": {"n": 256, "alpha": 2.0, "x": "x", "y": "y"}},
      {"name": "second", "kind": "kernel", "kernel": "scale_f32", "grid": 1, "block": 256,
       "args": {"n": 256, "alpha": 3.0, "x": "y", "y": "z"}, "after": [{"node": "first", "programmatic": true}]}
    ]})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "pdl.json");
  REQUIRE(spec.nodes[1].after == std::vector<std::string>{"first"});
  CHECK(spec.nodes[1].programmatic == std::vector<std::uint32_t>{0});
  const flowdsl::Graph g = flowdsl::inspect_graph(spec, registry());
  CHECK(g.plan().steps[1].programmatic == std::vector<std::uint32_t>{0});
  CHECK(g.topology_hash() == Chain(true).g.topology_hash());

  const nlohmann::json written = spec.nodes[1];
  CHECK(written["after"] == nlohmann::json::parse(R"([{"node": "first", "programmatic": true}])"));

  // The graph-wide switch, read and bound.
  std::string with_switch = text;
  with_switch.insert(with_switch.find('{') + 1, "\"programmatic_edges\": true, ");
  const flowdsl::GraphSpec switched = flowdsl::parse_graph(with_switch, "pdl.json");
  CHECK(switched.programmatic_edges);
  CHECK(flowdsl::inspect_graph(switched, registry()).description().programmatic_edges);
  CHECK(nlohmann::json(switched)["programmatic_edges"] == true);

  // A full edge written as an object, and problems at their pointers.
  const auto full = flowdsl::parse_graph(R"({"version": 1, "name": "t", "nodes": [
      {"name": "a", "kind": "empty"}, {"name": "b", "kind": "empty", "after": [{"node": "a", "programmatic": false}]}]})");
  CHECK(full.nodes[1].programmatic.empty());
  try {
    (void)flowdsl::parse_graph(R"({"version": 1, "name": "t", "nodes": [
      {"name": "a", "kind": "empty"}, {"name": "b", "kind": "empty", "after": [{"node": "a", "early": true}]}]})");
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/1/after/0/early");
  }
}

TEST_CASE("DOT draws a programmatic edge dashed", "[programmatic][dot]") {
  const std::string dot = flowdsl::to_dot(Chain(true).g);
  CHECK_THAT(dot, contains("[style=dashed, label=\"programmatic\""));
  CHECK_THAT(flowdsl::to_dot(Chain(false).g), !contains("programmatic"));
}

TEST_CASE("programmatic_edges makes the edges between kernels that wait for their producers programmatic",
          "[programmatic][switch]") {
  flowdsl::KernelRegistry waiting;
  waiting.add("waits", scale_f32, {"n", "alpha", "x: n", "y: n"}, "", /*waits_for_producers=*/true);
  const flowdsl::KernelInfo& info = *waiting.find("waits");
  auto build = [&](const flowdsl::KernelInfo* kernel, bool on) {
    flowdsl::Graph g;
    auto first = g.kernel("first", *kernel).launch(1, 256);
    first.set("n", 256).set("alpha", 2.0f).set<const float*>("x", x).set<float*>("y", y);
    auto second = g.kernel("second", *kernel).launch(1, 256);
    second.set("n", 256).set("alpha", 3.0f).set<const float*>("x", y).set<float*>("y", z).after(first);
    auto fill = g.memset("fill", x, 0, 16).after(second);
    (void)fill;
    g.programmatic_edges(on);
    return g;
  };
  const flowdsl::Graph on = build(&info, true), off = build(&info, false);
  CHECK(on.plan().steps[1].programmatic == std::vector<std::uint32_t>{0});
  CHECK(on.plan().steps[2].programmatic.empty());  // kernel to memset stays full
  CHECK(off.plan().steps[1].programmatic.empty());
  CHECK(on.topology_hash() != off.topology_hash());
  // The same graph with the edge declared programmatic hashes equal.
  flowdsl::Graph by_hand;
  {
    auto first = by_hand.kernel("first", info).launch(1, 256);
    first.set("n", 256).set("alpha", 2.0f).set<const float*>("x", x).set<float*>("y", y);
    auto second = by_hand.kernel("second", info).launch(1, 256);
    second.set("n", 256).set("alpha", 3.0f).set<const float*>("x", y).set<float*>("y", z).after(first, flowdsl::programmatic);
    by_hand.memset("fill", x, 0, 16).after(second);
  }
  CHECK(by_hand.topology_hash() == on.topology_hash());
  // A kernel that does not say it waits (scale_f32 of the test registry) keeps its full edges.
  const flowdsl::Graph plain = build(registry().find("scale_f32"), true);
  CHECK(plain.plan().steps[1].programmatic.empty());
}
