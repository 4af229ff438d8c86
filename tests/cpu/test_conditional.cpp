// Conditional nodes (IF, WHILE, SWITCH) in C++: CUDA's body rules as validation reports them,
// and what of a conditional node is structure (hashed).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

using flowdsl_test::contains;

namespace {

// Host stand-ins for kernels: descriptions store only addresses.
void step(float*, float, int) {}
void decide(const float*, float, flowdsl::Condition) {}
void host_fn(void*) {}

float x[64];

std::vector<std::string> messages(const flowdsl::Graph& g) {
  std::vector<std::string> out;
  for (const auto& d : flowdsl::validate(g.description())) out.push_back(d.message);
  return out;
}

bool has(const std::vector<std::string>& all, const std::string& message) {
  return std::find(all.begin(), all.end(), message) != all.end();
}

// A WHILE whose body steps and then decides whether to go on: valid as it stands.
struct Loop {
  flowdsl::Graph g;
  flowdsl::ConditionalNode loop = g.while_loop("solve", flowdsl::ConditionDefault{1});
  flowdsl::Body body = loop.body();
  flowdsl::NodeHandle stepped = body.kernel("step", step).launch(1, 32).args(x, 0.5f, 8);
  flowdsl::NodeHandle decided =
      body.kernel("decide", decide).launch(1, 32).args(x, 1e-3f, loop.condition()).after(stepped);
};

}  // namespace

TEST_CASE("A WHILE whose body sets its condition is valid", "[conditional][validation]") {
  Loop l;
  CHECK(messages(l.g).empty());
  const flowdsl::Plan& plan = l.g.plan();
  REQUIRE(plan.steps.size() == 1);
  REQUIRE(plan.steps[0].bodies.size() == 1);
  CHECK(plan.bodies[plan.steps[0].bodies[0]].size() == 2);
}

TEST_CASE("A host node inside a WHILE body is reported naming both nodes", "[conditional][validation]") {
  Loop l;
  l.body.host("log", host_fn).after(l.decided);
  const auto all = messages(l.g);
  REQUIRE(all.size() == 1);
  CHECK(all[0] == "node 'solve/log' (host): a host node cannot run inside conditional node 'solve' (CUDA allows "
                  "kernel, memcpy, memset, empty, child and conditional nodes there)");
}

TEST_CASE("A conditional node inside a child graph is reported", "[conditional][validation]") {
  flowdsl::Graph g;
  auto c = g.child("stage");
  auto choose = c.body().if_then("choose", flowdsl::ConditionDefault{1});
  choose.body().empty("work");
  const auto all = messages(g);
  REQUIRE(all.size() == 1);
  CHECK(all[0] == "node 'stage/choose' (if): a conditional node cannot sit inside child graph 'stage' (CUDA cannot "
                  "nest a graph holding one as a child): put it in a conditional node's body or at the top level");
}

TEST_CASE("A WHILE whose condition no kernel of its body sets is reported", "[conditional][validation]") {
  flowdsl::Graph g;
  auto loop = g.while_loop("solve", flowdsl::ConditionDefault{1});
  loop.body().kernel("step", step).launch(1, 32).args(x, 0.5f, 8);
  const std::string never = "node 'solve' (while): no kernel in its body sets its condition, so the loop would never "
                            "end or never run: pass its condition() to a kernel of its body";
  CHECK(messages(g) == std::vector<std::string>{never});

  // Set from outside the body, it still never changes inside the loop.
  g.kernel("before", decide).launch(1, 32).args(x, 1e-3f, loop.condition()).before(loop);
  CHECK(messages(g) == std::vector<std::string>{never});
}

TEST_CASE("An IF that nothing sets and that has no default is reported", "[conditional][validation]") {
  flowdsl::Graph g;
  auto fix = g.if_then("renorm");
  fix.body().kernel("scale", step).launch(1, 32).args(x, 0.5f, 8);
  CHECK(messages(g) == std::vector<std::string>{"node 'renorm' (if): nothing sets its condition: give it a default "
                                                "value or pass its condition() to a kernel"});
  auto stats = g.kernel("stats", decide).launch(1, 32).args(x, 1.0f, fix.condition());
  fix.after(stats);
  CHECK(messages(g).empty());
}

TEST_CASE("A Condition argument of another graph is reported", "[conditional][validation]") {
  flowdsl::Graph other;
  auto foreign = other.if_then("foreign", flowdsl::ConditionDefault{0});
  foreign.body().empty("work");

  flowdsl::Graph g;
  g.kernel("decide", decide).launch(1, 32).args(x, 1e-3f, foreign.condition());
  CHECK(messages(g) == std::vector<std::string>{"node 'decide' (kernel): argument 2 takes a Condition, but is not the "
                                                "condition() of a conditional node of this graph"});
}

TEST_CASE("A Condition argument set from outside the body holding its node is reported", "[conditional][validation]") {
  flowdsl::Graph g;
  auto outer = g.if_then("outer", flowdsl::ConditionDefault{1});
  auto inner = outer.body().while_loop("inner", flowdsl::ConditionDefault{1});
  inner.body().kernel("decide", decide).launch(1, 32).args(x, 1e-3f, inner.condition());
  g.kernel("meddle", decide).launch(1, 32).args(x, 1e-3f, inner.condition()).before(outer);
  CHECK(messages(g) == std::vector<std::string>{"node 'meddle' (kernel): argument 2 sets the condition of node "
                                                "'outer/inner', which must sit in this kernel's body or a body holding "
                                                "it (CUDA's rule)"});
}

TEST_CASE("A SWITCH of no cases and an empty body are reported", "[conditional][validation]") {
  flowdsl::Graph g;
  g.switch_cases("none", 0, flowdsl::ConditionDefault{0});
  auto two = g.if_else("choose", flowdsl::ConditionDefault{1});
  two.body(0).empty("yes");
  const auto all = messages(g);
  CHECK(has(all, "node 'none' (switch): a switch needs at least one case"));
  CHECK(has(all, "node 'choose' (if): body 1 is empty: declare at least one node in it"));
  CHECK(all.size() == 2);
  CHECK_THROWS_WITH(two.body(2), contains("node 'choose' (if) has 2 bodies"));
}

TEST_CASE("A conditional node's default value, cases and ELSE are structure", "[conditional][hash]") {
  struct Shape {
    std::optional<unsigned> loop_default = 1;  // the loop's body sets it: it may have none
    std::uint32_t cases = 3;
    bool has_else = false;
  };
  // Names and kernel arguments differ with `other`: neither is hashed.
  const auto hash = [](const Shape& s, bool other) {
    const std::string prefix = other ? "other_" : "";
    flowdsl::Graph g;
    auto pick = g.switch_cases(prefix + "pick", s.cases, flowdsl::ConditionDefault{0});
    for (std::uint32_t c = 0; c < s.cases; ++c) {
      pick.body(c).kernel("k", step).launch(1, 32).args(x, other ? 2.0f : 1.0f, 8);
    }
    const flowdsl::ConditionDefault yes{1};
    auto choose = s.has_else ? g.if_else(prefix + "choose", yes) : g.if_then(prefix + "choose", yes);
    choose.after(pick);
    for (std::uint32_t b = 0; b < (s.has_else ? 2u : 1u); ++b) choose.body(b).empty("e");
    std::optional<flowdsl::ConditionDefault> initial;
    if (s.loop_default) initial = flowdsl::ConditionDefault{*s.loop_default};
    auto loop = g.while_loop(prefix + "loop", initial).after(choose);
    loop.body().kernel("decide", decide).launch(1, 32).args(x + (other ? 8 : 0), 1e-3f, loop.condition());
    return g.topology_hash();
  };
  const Shape base;
  CHECK(hash(base, false) == hash(base, true));
  Shape changed = base;
  changed.loop_default = 0;
  CHECK(hash(changed, false) != hash(base, false));
  changed.loop_default.reset();
  CHECK(hash(changed, false) != hash(base, false));
  changed = base;
  changed.cases = 4;
  CHECK(hash(changed, false) != hash(base, false));
  changed = base;
  changed.has_else = true;
  CHECK(hash(changed, false) != hash(base, false));
}
