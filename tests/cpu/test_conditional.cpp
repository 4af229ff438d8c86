// SPDX-License-Identifier: Apache-2.0
// Conditional nodes (IF, WHILE, SWITCH): CUDA's body rules as validation reports them, what of a
// conditional node is structure (hashed), and conditional nodes in graph files.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"

using flowdsl_test::contains;

namespace {

// Host stand-ins for kernels: descriptions store only addresses.
void step(float*, float, int) {}
void decide(const float*, float, flowdsl::Condition) {}
void host_fn(void*) {}

float x[64];

const flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("step", step, {"x", "a", "n"});
    r.add("decide", decide, {"residual", "tolerance", "loop"});
    return true;
  }();
  (void)once;
  return r;
}

const std::vector<flowdsl::BufferSpec> buffers = {{"x", flowdsl::ScalarType::f32, 64, {}, false}};
const flowdsl::BufferAddresses addresses = {{"x", x}};

// A graph file of `nodes` (a JSON array's text) on buffer x.
std::string file_of(const std::string& nodes) {
  return R"({"version": 1, "name": "t", "buffers": [{"name": "x", "type": "f32", "count": 64}], "nodes": )" + nodes + "}";
}

// The graph `text` binds to, after checking that written back it reads the same.
flowdsl::Graph bound(const std::string& text) {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "t.json");
  const std::string written = flowdsl::to_json_text(spec);
  CHECK(flowdsl::to_json_text(flowdsl::parse_graph(written)) == written);
  flowdsl::Graph g = flowdsl::bind_graph(spec, addresses, registry(), {}, "t.json");
  // Described again, the bound graph is the file.
  CHECK(flowdsl::to_json_text(flowdsl::describe_graph(g, "t", buffers, addresses, registry())) == written);
  return g;
}

flowdsl::JsonError error_of(const std::string& text) {
  try {
    (void)flowdsl::inspect_graph(flowdsl::parse_graph(text, "t.json"), registry(), {}, "t.json");
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;  // not reached: FAIL throws
}

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
  CHECK(all[0] == "node 'solve/log' (host): cannot run inside conditional node 'solve' (CUDA allows "
                  "kernel, memcpy, memset, empty, child, library and conditional nodes there)");
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

TEST_CASE("IF and SWITCH nodes travel through JSON with their bodies and defaults", "[conditional][json]") {
  const flowdsl::Graph g = bound(file_of(R"([
    {"name": "choose", "kind": "if", "default": 1,
     "then": [{"name": "a", "kind": "kernel", "kernel": "step", "grid": 1, "block": 32, "args": {"x": "x", "a": 2.0, "n": 8}}],
     "else": [{"name": "b", "kind": "empty"}]},
    {"name": "bucket", "kind": "switch", "default": 2, "after": ["choose"], "cases": [
      [{"name": "zero", "kind": "empty"}],
      [{"name": "one", "kind": "memset", "dst": "x", "value": 0, "count": 16}],
      [{"name": "maybe", "kind": "if", "default": 0, "then": [{"name": "deep", "kind": "empty"}]}]]}])"));
  const flowdsl::Description& d = g.description();
  REQUIRE(d.nodes.size() == 8);
  const auto& choose = std::get<flowdsl::IfOp>(d.nodes[0].op);
  CHECK(choose.has_else);
  CHECK(choose.default_value == 1u);
  CHECK(flowdsl::node_path(d, 2) == "choose/b");
  CHECK(d.nodes[2].body == 1);
  const auto& bucket = std::get<flowdsl::SwitchOp>(d.nodes[3].op);
  CHECK(bucket.cases == 3);
  CHECK(bucket.default_value == 2u);
  CHECK(flowdsl::node_path(d, 7) == "bucket/maybe/deep");
  const auto& maybe = std::get<flowdsl::IfOp>(d.nodes[6].op);
  CHECK_FALSE(maybe.has_else);
  CHECK(d.nodes[6].body == 2);
}

TEST_CASE("Problems inside a case are reported at the case's pointer", "[conditional][json]") {
  auto e = error_of(file_of(R"([{"name": "s", "kind": "switch", "default": 0, "cases": [
      [{"name": "a", "kind": "empty"}], [{"name": "b", "kind": "empty"}],
      [{"name": "c", "kind": "memset", "dst": "nope", "value": 0, "count": 4}]]}])"));
  CHECK(e.pointer() == "/nodes/0/cases/2/0/dst");
  CHECK_THAT(e.what(), contains("unknown buffer 'nope'"));
  e = error_of(file_of(R"([{"name": "s", "kind": "switch", "default": 0, "cases": [[{"name": "a", "kind": "empty"}], 5]}])"));
  CHECK(e.pointer() == "/nodes/0/cases/1");
  CHECK_THAT(e.what(), contains("expected an array of nodes or {\"use\": <body name>}, found an integer"));
  e = error_of(file_of(R"([{"name": "s", "kind": "switch", "default": 0, "cases": []}])"));
  CHECK(e.pointer() == "/nodes/0");
  CHECK_THAT(e.what(), contains("node 's' (switch): a switch needs at least one case"));
  e = error_of(file_of(R"([{"name": "i", "kind": "if", "default": -1, "then": [{"name": "a", "kind": "empty"}]}])"));
  CHECK(e.pointer() == "/nodes/0/default");
  CHECK_THAT(e.what(), contains("out of range"));
  e = error_of(file_of(R"([{"name": "i", "kind": "if", "default": 1, "then": [{"name": "a", "kind": "empty"}], "else": []}])"));
  CHECK(e.pointer() == "/nodes/0");
  CHECK_THAT(e.what(), contains("node 'i' (if): body 1 is empty"));
  e = error_of(file_of(R"([{"name": "w", "kind": "while", "default": 1, "cases": []}])"));
  CHECK(e.pointer() == "/nodes/0/cases");
  CHECK_THAT(e.what(), contains("unknown member 'cases'"));
}

TEST_CASE("Condition arguments name their conditional node, in this body or one holding it", "[conditional][json]") {
  // The WHILE's own kernel sets it from inside; "stats" sets "fix", declared after it; "inner"
  // (a WHILE in an IF's body) is set from its body, "fix" also from inside "inner".
  const flowdsl::Graph g = bound(file_of(R"([
    {"name": "stats", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32,
     "args": {"residual": "x", "tolerance": 0.5, "loop": "fix"}},
    {"name": "fix", "kind": "if", "after": ["stats"], "then": [
      {"name": "inner", "kind": "while", "default": 1, "body": [
        {"name": "step", "kind": "kernel", "kernel": "step", "grid": 1, "block": 32, "args": {"x": "x", "a": 0.5, "n": 8}},
        {"name": "again", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32, "after": ["step"],
         "args": {"residual": "x", "tolerance": 0.125, "loop": "inner"}},
        {"name": "refix", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32, "after": ["again"],
         "args": {"residual": "x", "tolerance": 0.25, "loop": "fix"}}]}]},
    {"name": "solve", "kind": "while", "default": 1, "after": ["fix"], "body": [
      {"name": "decide", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32,
       "args": {"residual": "x", "tolerance": 0.125, "loop": "solve"}}]}])"));
  const flowdsl::Description& d = g.description();
  REQUIRE(d.nodes.size() == 8);
  // Each argument holds the condition of the node it names.
  const auto condition_of = [&](flowdsl::NodeId kernel) {
    const std::uint64_t word = std::get<flowdsl::KernelOp>(d.nodes[kernel].op).args.word(2);
    REQUIRE(flowdsl::symbol::is_symbol(word));
    return flowdsl::node_path(d, d.symbols.at(flowdsl::symbol::index_of(word)));
  };
  CHECK(condition_of(0) == "fix");
  CHECK(condition_of(4) == "fix/inner");
  CHECK(condition_of(5) == "fix");
  CHECK(condition_of(7) == "solve");
  CHECK(std::holds_alternative<flowdsl::WhileOp>(d.nodes[6].op));
}

TEST_CASE("A condition argument that names no conditional node is reported at the argument", "[conditional][json]") {
  const auto with_decide = [](const std::string& loop, const std::string& more = "") {
    return file_of(R"([{"name": "s", "kind": "while", "default": 1, "body": [
        {"name": "d", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32,
         "args": {"residual": "x", "tolerance": 1, "loop": )" + loop + "}}" + more + "]}]");
  };
  auto e = error_of(with_decide(R"("ghost")"));
  CHECK(e.pointer() == "/nodes/0/body/0/args/loop");
  CHECK_THAT(e.what(), contains("no node named 'ghost' in this kernel's body or a body holding it"));
  e = error_of(with_decide(R"("c")", R"(, {"name": "c", "kind": "memset", "dst": "x", "value": 0, "count": 4})"));
  CHECK(e.pointer() == "/nodes/0/body/0/args/loop");
  CHECK_THAT(e.what(), contains("node 'c' (memset) is not a conditional node (if, while or switch): it has no condition to set"));
  e = error_of(with_decide("3"));
  CHECK(e.pointer() == "/nodes/0/body/0/args/loop");
  CHECK_THAT(e.what(), contains("parameter 'loop' takes a condition, the name of a conditional node, found an integer"));
  // A conditional node of another body (here, one inside the WHILE's) is not found from outside it.
  e = error_of(file_of(R"([
    {"name": "set", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32,
     "args": {"residual": "x", "tolerance": 1, "loop": "inside"}},
    {"name": "s", "kind": "if", "default": 1, "after": ["set"], "then": [
      {"name": "inside", "kind": "if", "default": 1, "then": [{"name": "e", "kind": "empty"}]}]}])"));
  CHECK(e.pointer() == "/nodes/0/args/loop");
  CHECK_THAT(e.what(), contains("no node named 'inside'"));
  // The innermost node of the name is the one named, even when it is no conditional node.
  e = error_of(with_decide(R"("s")", R"(, {"name": "s", "kind": "empty"})"));
  CHECK(e.pointer() == "/nodes/0/body/0/args/loop");
  CHECK_THAT(e.what(), contains("node 's' (empty) is not a conditional node"));
}

TEST_CASE("A WHILE that no kernel of its body sets is reported at its node", "[conditional][json]") {
  const auto e = error_of(file_of(R"([
    {"name": "w", "kind": "while", "default": 1, "body": [{"name": "e", "kind": "empty"}]},
    {"name": "set", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32, "after": ["w"],
     "args": {"residual": "x", "tolerance": 1, "loop": "w"}}])"));
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "/nodes/0");
  CHECK_THAT(e.what(), contains("node 'w' (while): no kernel in its body sets its condition"));
}

TEST_CASE("A C++ graph of every conditional kind, nested, is described, read, bound and described again unchanged",
          "[conditional][json]") {
  flowdsl::Graph g;
  auto stats = g.kernel("stats", decide).launch(1, 32).args(x, 0.5f, flowdsl::Condition{});
  auto choose = g.if_else("choose").after(stats);  // no default: "stats" sets it
  stats.arg<2>(choose.condition());
  auto loop = choose.body(0).while_loop("solve", flowdsl::ConditionDefault{1});
  auto stepped = loop.body().kernel("step", step).launch(2, 32).args(x, 0.5f, 64);
  loop.body().kernel("decide", decide).launch(1, 32).args(x, 0.25f, loop.condition()).after(stepped);
  choose.body(1).memset("clear", x, 0, 64, 4);
  auto bucket = g.switch_cases("bucket", 3, flowdsl::ConditionDefault{2}).after(choose);
  bucket.body(0).empty("none");
  bucket.body(1).kernel("pick", decide).launch(1, 32).args(x, 1.0f, bucket.condition());
  bucket.body(2).if_then("maybe", flowdsl::ConditionDefault{0}).body().empty("deep");

  const std::string text = flowdsl::to_json_text(flowdsl::describe_graph(g, "t", buffers, addresses, registry()));
  CHECK_THAT(text, contains(R"("loop": "solve")"));
  CHECK_THAT(text, contains(R"("loop": "choose")"));
  CHECK_THAT(text, contains(R"("loop": "bucket")"));
  const flowdsl::Graph back = bound(text);
  CHECK(back.topology_hash() == g.topology_hash());
  CHECK(back.size() == g.size());
}

TEST_CASE("A C++ graph's condition arguments are written as names, or reported when no name finds them",
          "[conditional][json]") {
  flowdsl::Graph g;
  auto loop = g.while_loop("x", flowdsl::ConditionDefault{1});
  auto out = loop.body().kernel("out", decide).launch(1, 32).args(x, 0.5f, loop.condition());
  auto y = loop.body().if_then("y", flowdsl::ConditionDefault{1}).after(out);
  y.body().kernel("in", decide).launch(1, 32).args(x, 0.25f, loop.condition());
  const flowdsl::GraphSpec spec = flowdsl::describe_graph(g, "t", buffers, addresses, registry());
  CHECK(spec.nodes.at(0).bodies.at(0).nodes.at(1).bodies.at(0).nodes.at(0).fields.to_json()["args"]["loop"] == "x");
  CHECK(flowdsl::bind_graph(spec, addresses, registry()).topology_hash() == g.topology_hash());

  y.body().empty("x");  // from "in", the name 'x' now finds this node
  try {
    (void)flowdsl::describe_graph(g, "t", buffers, addresses, registry());
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/0/body/1/then/0/args/loop");
    CHECK_THAT(e.what(), contains("the argument sets the condition of node 'x', but from this kernel 'x' names node "
                                  "'x/y/x' (rename one of them)"));
  }
}

TEST_CASE("Condition names in a named body are resolved at each of its uses", "[conditional][json][bodies]") {
  // One loop body, used by two WHILE nodes of one name in two bodies: each copy sets its own loop.
  const std::string text = R"({"version": 1, "name": "t", "buffers": [{"name": "x", "type": "f32", "count": 64}],
    "bodies": {"iterate": [
      {"name": "step", "kind": "kernel", "kernel": "step", "grid": 1, "block": 32, "args": {"x": "x", "a": 0.5, "n": 8}},
      {"name": "again", "kind": "kernel", "kernel": "decide", "grid": 1, "block": 32, "after": ["step"],
       "args": {"residual": "x", "tolerance": 0.125, "loop": "solve"}}]},
    "nodes": [{"name": "choose", "kind": "if", "default": 1,
      "then": [{"name": "solve", "kind": "while", "default": 1, "body": {"use": "iterate"}}],
      "else": [{"name": "solve", "kind": "while", "default": 1, "body": {"use": "iterate"}}]}]})";
  const flowdsl::Graph g = flowdsl::bind_graph(flowdsl::parse_graph(text), addresses, registry());
  const flowdsl::Description& d = g.description();
  REQUIRE(d.nodes.size() == 7);
  const auto set_by = [&](flowdsl::NodeId kernel) {
    const std::uint64_t word = std::get<flowdsl::KernelOp>(d.nodes[kernel].op).args.word(2);
    return d.symbols.at(flowdsl::symbol::index_of(word));
  };
  CHECK(flowdsl::node_path(d, set_by(3)) == "choose/solve");
  CHECK(d.nodes[set_by(3)].body == 0);
  CHECK(flowdsl::node_path(d, set_by(6)) == "choose/solve");
  CHECK(d.nodes[set_by(6)].body == 1);

  // Used where no loop of that name holds it, the name is reported at the named body.
  std::string lost = text;
  lost.replace(lost.find(R"("name": "solve")"), 15, R"("name": "other")");
  const auto e = error_of(lost);
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "/bodies/iterate/1/args/loop");
  CHECK_THAT(e.what(), contains("no node named 'solve'"));
}
