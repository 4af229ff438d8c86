// Lowering: deterministic topological order with canonical dependency lists.
#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

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
