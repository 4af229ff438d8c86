// SPDX-License-Identifier: Apache-2.0
// Runtime::explain through the recording backend, without a GPU: hit, update (which nodes), miss
// (how the closest cached executable differs), debug mode; and that explaining changes nothing.
#include <cstdlib>
#include <memory>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;
using flowdsl_test::make_runtime;
using flowdsl_test::Record;

namespace {

void scale(float*, float, int) {}
void shift(float*, float, int) {}

float x[16];

/// a -> b -> c, kernels named "scale".
struct Chain {
  flowdsl::Graph g;
  flowdsl::KernelNode<float*, float, int> a = g.kernel("a", scale, "scale").launch(1, 32).args(x, 1.0f, 1);
  flowdsl::KernelNode<float*, float, int> b = g.kernel("b", scale, "scale").launch(1, 32).args(x, 1.0f, 2).after(a);
  flowdsl::KernelNode<float*, float, int> c = g.kernel("c", scale, "scale").launch(1, 32).args(x, 1.0f, 3).after(b);
};

bool same(const flowdsl::RuntimeStatistics& s, const flowdsl::RuntimeStatistics& t) {
  return s.launches == t.launches && s.hits == t.hits && s.misses == t.misses && s.node_updates == t.node_updates &&
         s.evictions == t.evictions && s.debug_launches == t.debug_launches && s.value_diffs == t.value_diffs;
}

}  // namespace

TEST_CASE("Explaining a launch with nothing cached says it will miss", "[runtime][explain]") {
  Record counts;
  auto rt = make_runtime(counts);
  Chain chain;
  const auto e = rt.explain(chain.g);
  CHECK(e.kind == flowdsl::LaunchKind::instantiated);
  CHECK(e.differences.empty());
  CHECK(e.text() == "miss: no executable is cached");
}

TEST_CASE("Explaining a launch of an unchanged cached graph says it will hit", "[runtime][explain]") {
  Record counts;
  auto rt = make_runtime(counts);
  Chain chain;
  rt.launch(chain.g);
  const auto e = rt.explain(chain.g);
  CHECK(e.kind == flowdsl::LaunchKind::hit);
  CHECK(e.text() == "hit: cached, no parameter changed");
  CHECK(rt.launch(chain.g).kind == flowdsl::LaunchKind::hit);
}

TEST_CASE("Explaining a launch after parameter changes names the nodes to update", "[runtime][explain]") {
  Record counts;
  auto rt = make_runtime(counts);
  Chain chain;
  rt.launch(chain.g);
  chain.c.arg<1>(2.0f);
  chain.a.arg<2>(7);
  const auto e = rt.explain(chain.g);
  CHECK(e.kind == flowdsl::LaunchKind::updated);
  REQUIRE(e.updated_nodes.size() == 2);
  CHECK(e.text() == "update: cached, 2 nodes to update in place ('c', 'a')");
  const auto report = rt.launch(chain.g);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 2);
}

TEST_CASE("Explaining a launch of a rebuilt graph names the nodes whose values differ",
          "[runtime][explain][value-diff]") {
  Record counts;
  auto rt = make_runtime(counts);
  Chain first;
  rt.launch(first.g);
  Chain rebuilt;
  const auto same = rt.explain(rebuilt.g);
  CHECK(same.kind == flowdsl::LaunchKind::hit);
  CHECK(same.compared_values);
  CHECK(same.text() == "hit: cached, and another graph left parameters equal to this one's (compared by value)");
  rebuilt.b.arg<1>(4.0f);
  const auto e = rt.explain(rebuilt.g);
  CHECK(e.kind == flowdsl::LaunchKind::updated);
  CHECK(e.compared_values);
  CHECK(e.updated_nodes == std::vector<std::string>{"b"});
  CHECK(e.text() == "update: cached, 1 node to update in place ('b'), where another graph left other values "
                    "(compared by value)");
  CHECK(rt.launch(rebuilt.g).nodes_updated == 1);
  CHECK_FALSE(rt.explain(rebuilt.g).compared_values);
}

TEST_CASE("Explaining a miss names the node and field that differ from the closest executable",
          "[runtime][explain]") {
  Record counts;
  auto rt = make_runtime(counts);
  Chain chain;
  rt.launch(chain.g);
  chain.b.grid(64);
  rt.launch(chain.g);  // cached: b with a grid of 64
  chain.b.grid(128);
  const auto e = rt.explain(chain.g);
  CHECK(e.kind == flowdsl::LaunchKind::instantiated);
  CHECK(e.closest_equal_nodes == 2);
  REQUIRE(e.differences.size() == 1);
  CHECK(e.differences[0] == "node 'b': grid 64x1x1 -> 128x1x1");
  CHECK_THAT(e.text(), contains("miss: the closest cached executable has 2 equal nodes; node 'b': grid 64x1x1 -> 128x1x1"));
}

TEST_CASE("Explaining a miss names added and removed nodes, changed edges and kernels", "[runtime][explain]") {
  Record counts;
  auto rt = make_runtime(counts);
  Chain chain;
  rt.launch(chain.g);
  SECTION("a node added") {
    chain.g.kernel("d", scale, "scale").launch(1, 32).args(x, 1.0f, 4).after(chain.c);
    const auto e = rt.explain(chain.g);
    REQUIRE(e.differences.size() == 1);
    CHECK(e.differences[0] == "node 'd' (kernel) added");
    CHECK(e.closest_equal_nodes == 3);
  }
  SECTION("an edge added") {
    chain.c.after(chain.a);
    const auto e = rt.explain(chain.g);
    REQUIRE(e.differences.size() == 1);
    CHECK(e.differences[0] == "node 'c': after 'b' -> 'a', 'b'");
  }
  SECTION("another kernel, block and shared memory on one node") {
    flowdsl::Graph g;
    g.kernel("a", scale, "scale").launch(1, 32).args(x, 1.0f, 1);
    auto b = g.kernel("b", shift, "shift").launch(1, 64, 128).args(x, 1.0f, 2);
    g.kernel("c", scale, "scale").launch(1, 32).args(x, 1.0f, 3).after(b);
    const auto e = rt.explain(g);
    CHECK(e.closest_equal_nodes == 2);  // a and c; b differs in four ways
    CHECK(e.difference_count == 4);
    REQUIRE(e.differences.size() == 3);
    CHECK(e.differences[0] == "node 'b': function scale -> shift");
    CHECK(e.differences[1] == "node 'b': block 32x1x1 -> 64x1x1");
    CHECK(e.differences[2] == "node 'b': shared memory 0 -> 128");
    CHECK_THAT(e.text(), contains("(and 1 more)"));
  }
  SECTION("a node removed, against the closest of several executables") {
    flowdsl::Graph other;
    other.kernel("z", shift, "shift").launch(9, 9).args(x, 1.0f, 0);
    rt.launch(other);
    flowdsl::Graph g;
    auto a = g.kernel("a", scale, "scale").launch(1, 32).args(x, 1.0f, 1);
    g.kernel("b", scale, "scale").launch(1, 32).args(x, 1.0f, 2).after(a);
    const auto e = rt.explain(g);
    CHECK(e.closest_equal_nodes == 2);
    REQUIRE(e.differences.size() == 1);
    CHECK(e.differences[0] == "node 'c' (kernel) removed");
  }
}

TEST_CASE("A cached structure outlives its Graph and stays what was instantiated", "[runtime][explain]") {
  // The runtime shares the description of the Graph that missed rather than copying it: later
  // parameter changes write into it, a structural change copies it first, and it outlives the Graph.
  Record counts;
  auto rt = make_runtime(counts);
  {
    Chain chain;
    rt.launch(chain.g);
    chain.b.args(x, 5.0f, 7);  // parameters: in place
    chain.c.grid(4);           // structure: the Graph's own copy from here on
    CHECK(rt.explain(chain.g).differences == std::vector<std::string>{"node 'c': grid 1x1x1 -> 4x1x1"});
  }
  Chain other;
  other.b.grid(64);
  const auto e = rt.explain(other.g);
  CHECK(e.closest_equal_nodes == 2);
  CHECK(e.differences == std::vector<std::string>{"node 'b': grid 1x1x1 -> 64x1x1"});
  other.b.grid(1);
  // The executable holds the values it was made with (1, 2 for b), not those written later into
  // the shared description: this Graph's equal values make a hit.
  CHECK(rt.launch(other.g).kind == flowdsl::LaunchKind::hit);
}

TEST_CASE("Explaining changes neither the cache's order nor its statistics", "[runtime][explain]") {
  Record counts;
  auto rt = make_runtime(counts, /*capacity=*/2);
  Chain first, second, third;
  second.b.grid(2);
  third.b.grid(3);
  rt.launch(first.g);
  rt.launch(second.g);  // first is now the least recently used
  const auto before = rt.statistics();
  for (int i = 0; i < 3; ++i) {
    CHECK(rt.explain(first.g).kind == flowdsl::LaunchKind::hit);
    CHECK(rt.explain(third.g).kind == flowdsl::LaunchKind::instantiated);
  }
  CHECK(same(rt.statistics(), before));
  CHECK(counts.instantiations == 2);
  CHECK(counts.updates == 0);
  CHECK(counts.launches == 2);
  rt.launch(third.g);  // evicts first: explaining it did not make it recently used
  CHECK(rt.explain(first.g).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.explain(second.g).kind == flowdsl::LaunchKind::hit);
}

TEST_CASE("Explaining an invalid graph throws the validation error", "[runtime][explain][errors]") {
  Record counts;
  auto rt = make_runtime(counts);
  flowdsl::Graph g;
  g.kernel("k", scale).args(x, 1.0f, 1);  // no launch shape
  CHECK_THROWS_AS(rt.explain(g), flowdsl::ValidationError);
}

TEST_CASE("Debug mode is set by the options or by FLOWDSL_DEBUG=1, and explained as such", "[runtime][debug]") {
  Record counts;
  Chain chain;
  flowdsl::RuntimeOptions options;
  options.debug = true;
  flowdsl::Runtime by_option(options, std::make_unique<flowdsl_test::RecordingBackend>(counts));
  CHECK(by_option.debug());
  CHECK(by_option.explain(chain.g).kind == flowdsl::LaunchKind::debug);
  CHECK_THAT(by_option.explain(chain.g).text(), contains("node by node"));

  ::setenv("FLOWDSL_DEBUG", "1", 1);
  flowdsl::Runtime by_environment({}, std::make_unique<flowdsl_test::RecordingBackend>(counts));
  ::setenv("FLOWDSL_DEBUG", "0", 1);
  flowdsl::Runtime off({}, std::make_unique<flowdsl_test::RecordingBackend>(counts));
  ::unsetenv("FLOWDSL_DEBUG");
  CHECK(by_environment.debug());
  CHECK_FALSE(off.debug());
  CHECK(std::string(flowdsl::to_string(flowdsl::LaunchKind::debug)) == "debug");
}
