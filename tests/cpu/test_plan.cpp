// SPDX-License-Identifier: Apache-2.0
// Lowering: deterministic topological order with canonical dependency lists.
#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "lower/plan_storage.hpp"

namespace {

void touch(int*) {}

std::vector<std::string> order(const flowdsl::Graph& g) {
  std::vector<std::string> names;
  for (const auto& step : g.plan().steps) names.push_back(g.description().nodes[step.node].name);
  return names;
}

}  // namespace

TEST_CASE("A diamond lowers to upload, both branches in declaration order, join, download", "[plan]") {
  flowdsl::Graph g;
  int buf[4];
  auto down = g.memcpy("download", buf, buf + 1, 4);  // declared first, runs last
  auto join = g.empty("join");
  auto left = g.kernel("left", touch).launch(1, 1).args(buf);
  auto right = g.kernel("right", touch).launch(1, 1).args(buf);
  auto up = g.memcpy("upload", buf + 1, buf, 4);
  left.after(up);
  right.after(up);
  join.after(right, left);
  down.after(join);

  CHECK(order(g) == std::vector<std::string>{"upload", "left", "right", "join", "download"});
  const auto& plan = g.plan();
  CHECK(plan.steps[0].deps.empty());
  CHECK(plan.steps[1].deps == std::vector<std::uint32_t>{0});
  CHECK(plan.steps[2].deps == std::vector<std::uint32_t>{0});
  CHECK(plan.steps[3].deps == std::vector<std::uint32_t>{1, 2});  // ascending, whatever the call order
  CHECK(plan.steps[4].deps == std::vector<std::uint32_t>{3});
  CHECK(plan.position[up.id()] == 0);
  CHECK(plan.position[down.id()] == 4);
}

TEST_CASE("Every dependency comes before its dependant and appears once", "[plan]") {
  flowdsl::Graph g;
  std::vector<flowdsl::NodeHandle> nodes;
  for (int i = 0; i < 200; ++i) nodes.push_back(g.empty("n" + std::to_string(i)));
  // Edges from later to earlier declarations, with repeats, so that order must be computed.
  for (int i = 0; i < 200; ++i) {
    for (int j = i + 1; j < 200; j += 7) nodes[static_cast<std::size_t>(i)].after(nodes[static_cast<std::size_t>(j)]);
    if (i + 1 < 200) nodes[static_cast<std::size_t>(i)].after(nodes[static_cast<std::size_t>(i + 1)]);
  }
  const auto& plan = g.plan();
  REQUIRE(plan.steps.size() == 200);
  for (std::uint32_t pos = 0; pos < plan.steps.size(); ++pos) {
    const auto& deps = plan.steps[pos].deps;
    CHECK(std::is_sorted(deps.begin(), deps.end()));
    CHECK(std::adjacent_find(deps.begin(), deps.end()) == deps.end());
    for (auto d : deps) CHECK(d < pos);
  }
  CHECK(g.description().nodes[plan.steps.front().node].name == "n199");
}

TEST_CASE("The same description always lowers to the same plan", "[plan][determinism]") {
  auto build = [] {
    flowdsl::Graph g;
    int buf[1];
    auto a = g.kernel("a", touch).launch(1, 1).args(buf);
    auto b = g.kernel("b", touch).launch(1, 1).args(buf);
    auto c = g.empty("c").after(b, a);
    g.empty("d").after(c).after("a");
    g.empty("e");
    return g;
  };
  const flowdsl::Graph g1 = build();
  const flowdsl::Graph g2 = build();
  REQUIRE(g1.plan().steps.size() == g2.plan().steps.size());
  for (std::size_t i = 0; i < g1.plan().steps.size(); ++i) {
    CHECK(g1.plan().steps[i].node == g2.plan().steps[i].node);
    CHECK(g1.plan().steps[i].deps == g2.plan().steps[i].deps);
  }
  CHECK(order(g1) == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(flowdsl::lower(g1.description()).topology_hash == g1.topology_hash());
}

TEST_CASE("Lowering 100k nodes stays fast enough to run in a unit test", "[plan][scale]") {
  flowdsl::Graph g;
  int buf[1];
  auto prev = g.kernel("k0", touch).launch(1, 1).args(buf);
  for (int i = 1; i < 100000; ++i) {
    auto next = g.kernel("k" + std::to_string(i), touch).launch(1, 1).args(buf).after(prev);
    prev = next;
  }
  const auto& plan = g.plan();
  CHECK(plan.steps.size() == 100000);
  CHECK(plan.steps.back().deps == std::vector<std::uint32_t>{99998});
}

TEST_CASE("A join of many nodes keeps every dependency, in step order", "[plan]") {
  flowdsl::Graph g;
  int buf[16];
  std::vector<flowdsl::NodeHandle> sources;
  for (int i = 0; i < 9; ++i) sources.push_back(g.kernel("k" + std::to_string(i), touch).launch(1, 1).args(buf + i));
  auto join = g.empty("join");
  for (const auto& s : sources) join.after(s);
  const flowdsl::Plan& plan = g.plan();
  REQUIRE(plan.steps.size() == 10);
  CHECK(plan.steps[9].deps == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  const flowdsl::Plan copy = plan;  // copies hold their own lists
  CHECK(copy.steps[9].deps == plan.steps[9].deps);
}

TEST_CASE("IndexList keeps its values when it grows past its inline room, is copied and moved", "[plan]") {
  flowdsl::IndexList list;
  for (std::uint32_t i = 0; i < 11; ++i) list.push_back(i * 3);
  REQUIRE(list.size() == 11);
  for (std::uint32_t i = 0; i < 11; ++i) CHECK(list[i] == i * 3);
  flowdsl::IndexList copy = list;
  flowdsl::IndexList moved = std::move(list);
  CHECK(copy == moved);
  CHECK(list.empty());  // NOLINT: a moved-from list is empty
  flowdsl::IndexList small{1, 2};
  small.reserve(20);
  CHECK(small == std::vector<std::uint32_t>{1, 2});
  small = copy;
  CHECK(small.size() == 11);
  copy = flowdsl::IndexList{7};
  CHECK(copy == std::vector<std::uint32_t>{7});
}

namespace {

void step_kernel(float*, float) {}

// A graph of `n` kernels in `width` chains.
flowdsl::Graph chains(int n, int width) {
  static float slots[8];
  flowdsl::Graph g;
  std::vector<flowdsl::KernelNode<float*, float>> nodes;
  for (int i = 0; i < n; ++i) {
    nodes.push_back(g.kernel("k" + std::to_string(i), step_kernel).grid(1).block(32).args(slots + i % width, 1.0f));
    if (i >= width) nodes.back().after(nodes[static_cast<std::size_t>(i - width)]);
  }
  return g;
}

bool same_plan(const flowdsl::Plan& a, const flowdsl::Plan& b) {
  if (a.steps.size() != b.steps.size() || a.position != b.position || a.topology_hash != b.topology_hash) return false;
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    if (a.steps[i].node != b.steps[i].node || a.steps[i].deps != b.steps[i].deps) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("A dropped Graph's large plan lends its memory to the next plan, which equals a fresh lowering",
          "[plan][storage]") {
  flowdsl::lowering::trim_plan_storage();
  const flowdsl::PlanStep* kept_steps = nullptr;
  const std::uint32_t* kept_positions = nullptr;
  {
    const flowdsl::Graph first = chains(8192, 1);
    kept_steps = first.plan().steps.data();
    kept_positions = first.plan().position.data();
    CHECK(first.plan().steps.capacity() == 8192);
  }
  SECTION("a large plan takes it") {
    const flowdsl::Graph second = chains(5000, 3);
    const flowdsl::Plan& plan = second.plan();
    CHECK(plan.steps.data() == kept_steps);
    CHECK(plan.position.data() == kept_positions);
    CHECK(same_plan(plan, flowdsl::lower(second.description())));
  }
  SECTION("a small plan leaves it for a large one") {
    const flowdsl::Graph small = chains(100, 2);
    CHECK(small.plan().steps.data() != kept_steps);
    CHECK(same_plan(small.plan(), flowdsl::lower(small.description())));
    CHECK(flowdsl::lowering::take_steps(1500).capacity() == 1500);  // not a vector over 4 times its size
    CHECK(flowdsl::lowering::take_steps(6000).capacity() == 8192);
  }
  SECTION("a plan a runtime still holds gives nothing back until the runtime lets go") {
    std::shared_ptr<const flowdsl::Plan> held;
    {
      const flowdsl::Graph second = chains(5000, 3);
      const flowdsl::Plan& plan = second.plan();
      held = flowdsl::detail::plan_slot(second.state());  // as a Runtime keeps it
      REQUIRE(held.get() == &plan);
    }
    CHECK(held->steps.data() == kept_steps);
    CHECK(held->steps.size() == 5000);  // the Graph is gone; its plan is intact
    CHECK(flowdsl::lowering::take_steps(6000).capacity() == 6000);
    const flowdsl::Plan fresh = flowdsl::lower(chains(5000, 3).description());
    CHECK(held->topology_hash == fresh.topology_hash);
    held.reset();
    CHECK(flowdsl::lowering::take_steps(6000).capacity() == 8192);
  }
  SECTION("release_cached_memory frees what is kept") {
    flowdsl::release_cached_memory();
    CHECK(flowdsl::lowering::take_steps(6000).capacity() == 6000);
    const flowdsl::Graph again = chains(5000, 3);  // and graphs are made as before
    CHECK(same_plan(again.plan(), flowdsl::lower(again.description())));
  }
}
