// SPDX-License-Identifier: Apache-2.0
// Conditional nodes without a GPU: the graphs CUDA accepts validate (setters ahead of an IF, in
// a WHILE's body, in a child graph beside the node; a WHILE inside an IF), each of CUDA's rules
// is refused with a message naming it before the backend is asked for anything, and graphs
// that number their conditions differently still share a topology.
#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;

namespace {

// Stand-ins for kernels: validation needs only their signatures.
void increment(int*) {}
void keep_below(const int*, int, flowdsl::Condition) {}
void scale(float*, float, int) {}
void nothing(void*) {}

int counter[1];
float data[64];

/// counter = 0, then a WHILE counting to 5, its condition set in its body.
flowdsl::ConditionalNode counting_loop(flowdsl::Body where) {
  auto zero = where.memset("zero", counter, 0, 1, 4);
  auto loop = where.while_loop("count", flowdsl::ConditionDefault{1}).after(zero);
  auto inc = loop.body().kernel("increment", increment).launch(1, 32).args(counter);
  loop.body().kernel("decide", keep_below).launch(1, 32).args(counter, 5, loop.condition()).after(inc);
  return loop;
}
flowdsl::Body top(flowdsl::Graph& g) { return flowdsl::Body(&g.state(), flowdsl::no_node, 0); }

std::string problems(const flowdsl::Graph& g) {
  std::string text;
  for (const auto& d : flowdsl::validate(g.description())) text += d.message + "\n";
  return text;
}

}  // namespace

TEST_CASE("Conditional graphs that CUDA accepts validate", "[conditional][validation]") {
  SECTION("an IF and a SWITCH set by kernels ahead of them") {
    flowdsl::Graph g;
    auto gate = g.if_else("gate");
    auto pick = g.switch_cases("pick", 3);
    g.kernel("open", keep_below).launch(1, 32).args(counter, 5, gate.condition()).before(gate);
    g.kernel("choose", keep_below).launch(1, 32).args(counter, 2, pick.condition()).before(pick);
    gate.body(0).kernel("then", scale).launch(1, 32).args(data, 2.0f, 64);
    gate.body(1).kernel("else", scale).launch(1, 32).args(data, -1.0f, 64);
    for (std::uint32_t c = 0; c < 3; ++c) pick.body(c).memset("case" + std::to_string(c), data, c, 64, 4);
    pick.after(gate);
    CHECK(problems(g).empty());
  }
  SECTION("a WHILE set in its body, and one also set ahead of it") {
    flowdsl::Graph g;
    counting_loop(top(g));
    auto tested = g.while_loop("tested").after("count");
    g.kernel("enter", keep_below).launch(1, 32).args(counter, 5, tested.condition()).before(tested).after("count");
    tested.body().kernel("again", keep_below).launch(1, 32).args(counter, 5, tested.condition());
    CHECK(problems(g).empty());
  }
  SECTION("a WHILE inside an IF, set two levels down") {
    flowdsl::Graph g;
    auto gate = g.if_then("gate");
    g.kernel("open", keep_below).launch(1, 32).args(counter, 1, gate.condition()).before(gate);
    counting_loop(gate.body());
    CHECK(problems(g).empty());
    CHECK(g.plan().bodies.size() == 2);
  }
  SECTION("an IF set from a child graph beside it") {
    flowdsl::Graph g;
    auto stage = g.child("stage");
    auto branch = g.if_then("branch").after(stage);
    stage.body().kernel("decide", keep_below).launch(1, 32).args(counter, 1, branch.condition());
    branch.body().empty("nop");
    CHECK(problems(g).empty());
  }
}

TEST_CASE("Each of CUDA's rules is refused with its message before the backend is asked", "[conditional][validation]") {
  struct Case {
    const char* rule;
    void (*build)(flowdsl::Graph&);
    const char* message;
  };
  const Case cases[] = {
      {"a host node in a body",
       [](flowdsl::Graph& g) { g.if_then("gate", flowdsl::ConditionDefault{1}).body().host("log", nothing); },
       "node 'gate/log' (host): cannot run inside conditional node 'gate' (CUDA allows kernel, memcpy, "
       "memset, empty, child, library and conditional nodes there)"},
      {"a conditional node in a child graph",
       [](flowdsl::Graph& g) { g.child("stage").body().if_then("inner", flowdsl::ConditionDefault{1}).body().empty("nop"); },
       "node 'stage/inner' (if): a conditional node cannot sit inside child graph 'stage' (CUDA cannot nest a graph "
       "holding one as a child)"},
      {"a WHILE that nothing in its body sets",
       [](flowdsl::Graph& g) {
         g.while_loop("count", flowdsl::ConditionDefault{1}).body().kernel("increment", increment).launch(1, 32).args(counter);
       },
       "node 'count' (while): no kernel in its body sets its condition, so the loop would never end or never run"},
      {"a WHILE set only from outside its body",
       [](flowdsl::Graph& g) {
         auto loop = g.while_loop("count");
         g.kernel("enter", keep_below).launch(1, 32).args(counter, 5, loop.condition()).before(loop);
         loop.body().kernel("increment", increment).launch(1, 32).args(counter);
       },
       "node 'count' (while): no kernel in its body sets its condition"},
      {"a setter outside the body holding its node",
       [](flowdsl::Graph& g) {
         auto loop = counting_loop(top(g));
         auto inner = loop.body().if_then("inner").after("decide");
         inner.body().kernel("increment", increment).launch(1, 32).args(counter);
         g.kernel("decide", keep_below).launch(1, 32).args(counter, 5, inner.condition()).before(loop);
       },
       "node 'decide' (kernel): argument 2 sets the condition of node 'count/inner', which must sit in this kernel's "
       "body or a body holding it (CUDA's rule)"},
      {"an IF that nothing sets",
       [](flowdsl::Graph& g) { g.if_then("gate").body().kernel("increment", increment).launch(1, 32).args(counter); },
       "node 'gate' (if): nothing sets its condition: give it a default value or pass its condition() to a kernel"},
      {"a SWITCH without cases", [](flowdsl::Graph& g) { g.switch_cases("none", 0); },
       "node 'none' (switch): a switch needs at least one case"},
  };
  flowdsl_test::Record record;
  flowdsl::Runtime runtime = flowdsl_test::make_runtime(record);
  for (const Case& c : cases) {
    INFO(c.rule);
    flowdsl::Graph g;
    c.build(g);
    CHECK_THAT(problems(g), contains(c.message));
    CHECK_THROWS_AS(runtime.launch(g), flowdsl::ValidationError);
  }
  CHECK(record.instantiations == 0);
  CHECK(record.launches == 0);
  CHECK(runtime.size() == 0);
}

TEST_CASE("Graphs that number their conditions differently share a topology", "[conditional][hash]") {
  auto build = [](flowdsl::Graph& g, bool loop_first) {
    auto gate = g.if_then("gate");
    if (!loop_first) (void)gate.condition();  // the first condition asked for is symbol 0
    auto loop = counting_loop(top(g));
    g.kernel("open", keep_below).launch(1, 32).args(counter, 1, gate.condition()).before(gate);
    gate.body().empty("nop");
    gate.before(loop);
  };
  flowdsl::Graph a, b;
  build(a, false);
  build(b, true);
  CHECK(a.description().symbols != b.description().symbols);
  CHECK(a.topology_hash() == b.topology_hash());

  flowdsl_test::Record record;
  flowdsl::Runtime runtime = flowdsl_test::make_runtime(record);
  CHECK(runtime.launch(a).kind == flowdsl::LaunchKind::instantiated);
  CHECK(runtime.launch(b).kind == flowdsl::LaunchKind::updated);
  CHECK(record.instantiations == 1);
}
