// SPDX-License-Identifier: Apache-2.0
// Validation: every bad input is reported, all at once, naming the node concerned.
#include <algorithm>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

using flowdsl_test::contains;

namespace {

void touch(int*) {}

/// The diagnostics lowering `g` throws (fails the test if it does not throw).
std::vector<flowdsl::Diagnostic> problems(const flowdsl::Graph& g) {
  try {
    (void)g.plan();
  } catch (const flowdsl::ValidationError& e) {
    return e.diagnostics();
  }
  FAIL("lowering did not throw ValidationError");
  return {};
}

/// The single diagnostic of `g`.
flowdsl::Diagnostic only_problem(const flowdsl::Graph& g) {
  const auto all = problems(g);
  REQUIRE(all.size() == 1);
  return all.front();
}

bool names(const flowdsl::Diagnostic& d, const std::string& node) {
  return std::find(d.nodes.begin(), d.nodes.end(), node) != d.nodes.end();
}

}  // namespace

TEST_CASE("An empty graph is invalid", "[validation]") {
  flowdsl::Graph g;
  CHECK_THAT(only_problem(g).message, contains("graph is empty"));
}

TEST_CASE("Duplicate names are reported with every node that carries them", "[validation]") {
  flowdsl::Graph g;
  g.empty("join");
  g.empty("other");
  g.empty("join");
  const auto d = only_problem(g);
  CHECK(names(d, "join"));
  CHECK_THAT(d.message, contains("node 'join' is declared 2 times (nodes #0, #2)"));
}

TEST_CASE("An empty name is reported by position", "[validation]") {
  flowdsl::Graph g;
  g.empty("");
  CHECK_THAT(only_problem(g).message, contains("node #0 (empty) has an empty name"));
}

TEST_CASE("A name holding '/', a control character or NUL, or too long, is refused by position",
          "[validation][names]") {
  flowdsl::Graph g;
  g.empty(std::string("cut\0short", 9));
  g.empty("x\nerror: forged");
  g.empty("a/bad");
  g.empty(std::string(flowdsl::max_node_name_bytes + 1, 'n'));
  g.empty("caf\xc3\xa9");
  g.empty("spaces and 'quotes' are fine");
  const auto all = problems(g);
  REQUIRE(all.size() == 5);
  CHECK(all[0].message ==
        "node #0 (empty) has the name 'cut\\x00short', which is not valid: it holds a control character (at byte 3): "
        "a name holds printable ASCII characters only");
  CHECK_THAT(all[1].message, contains("node #1 (empty) has the name 'x\\nerror: forged', which is not valid"));
  CHECK_THAT(all[2].message,
             contains("node #2 (empty) has the name 'a/bad', which is not valid: it holds '/' (at byte 1)"));
  CHECK_THAT(all[3].message, contains("it is 257 bytes long, over the limit of 256"));
  CHECK_THAT(all[4].message, contains("it holds a byte outside printable ASCII (at byte 3)"));
  for (const auto& d : all) CHECK(d.nodes.empty());
  CHECK(flowdsl::node_name_problem("spaces and 'quotes' are fine").empty());
}

TEST_CASE("Names are quoted escaped in messages, so that none forges a line or cuts one short", "[validation][names]") {
  flowdsl::Graph g;
  g.empty("it's").after("ghost\nnode 'x' (empty): forged");
  try {
    (void)g.plan();
    FAIL("no ValidationError");
  } catch (const flowdsl::ValidationError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].message ==
          "node 'it\\'s' (empty): depends on unknown node 'ghost\\nnode \\'x\\' (empty): forged'");
    const std::string what = e.what();
    CHECK(std::count(what.begin(), what.end(), '\n') == 1);  // the header, then one line
  }
  CHECK(flowdsl::quoted_name(std::string("a\0\t\\", 4)) == "'a\\x00\\t\\\\'");
}

TEST_CASE("A name declared 100000 times is one short message with the true count", "[validation][names]") {
  flowdsl::Graph g;
  for (int i = 0; i < 100000; ++i) g.empty("d");
  const auto d = only_problem(g);
  CHECK(
      d.message ==
      "node 'd' is declared 100000 times (nodes #0, #1, #2, #3, #4, #5, #6, #7, #8, #9 and 99990 more): names must be "
      "unique within their body");
}

TEST_CASE("Edges to unknown nodes name both ends", "[validation]") {
  flowdsl::Graph g;
  g.empty("a").after("ghost");
  g.empty("b").before("phantom");
  const auto all = problems(g);
  REQUIRE(all.size() == 2);
  CHECK(all[0].message == "node 'a' (empty): depends on unknown node 'ghost'");
  CHECK(all[1].message == "node 'b' (empty): must run before unknown node 'phantom'");
}

TEST_CASE("A self-edge is reported", "[validation]") {
  flowdsl::Graph g;
  auto a = g.empty("a");
  a.after(a);
  CHECK(only_problem(g).message == "node 'a' (empty): depends on itself");
}

TEST_CASE("A cycle is reported as a path of node names", "[validation][cycle]") {
  flowdsl::Graph g;
  auto a = g.empty("a");
  auto b = g.empty("b").after(a);
  auto c = g.empty("c").after(b);
  a.after(c);
  g.empty("downstream").after(c);  // blocked by the cycle, not part of it
  const auto d = only_problem(g);
  CHECK(d.message == "cycle: 'a' -> 'b' -> 'c' -> 'a'");
  CHECK(d.nodes == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("Two disjoint cycles are both reported", "[validation][cycle]") {
  flowdsl::Graph g;
  g.empty("a").after("b");
  g.empty("b").after("a");
  g.empty("x").after("y");
  g.empty("y").after("x");
  const auto all = problems(g);
  REQUIRE(all.size() == 2);
  CHECK_THAT(all[0].message, contains("'a'"));
  CHECK_THAT(all[1].message, contains("'x'"));
}

TEST_CASE("Launch shapes are checked: zero dimensions, thread and axis limits", "[validation][kernel]") {
  int* p = nullptr;
  SECTION("zero grid") {
    flowdsl::Graph g;
    g.kernel("k", touch).grid({4, 0, 1}).block(1).args(p);
    CHECK(only_problem(g).message == "node 'k' (kernel): grid 4x0x1 has a zero dimension");
  }
  SECTION("zero block") {
    flowdsl::Graph g;
    g.kernel("k", touch).grid(1).block(0).args(p);
    CHECK(only_problem(g).message == "node 'k' (kernel): block 0x1x1 has a zero dimension");
  }
  SECTION("more than 1024 threads") {
    flowdsl::Graph g;
    g.kernel("saxpy", touch).grid(1).block(2048).args(p);
    CHECK(only_problem(g).message == "node 'saxpy' (kernel): block of 2048 threads (2048x1x1) exceeds 1024");
  }
  SECTION("per-axis limit") {
    flowdsl::Graph g;
    g.kernel("k", touch).grid(1).block({1, 1, 128}).args(p);
    CHECK_THAT(only_problem(g).message, contains("exceeds the per-axis limits"));
  }
}

TEST_CASE("Kernel arguments never set are reported", "[validation][kernel]") {
  flowdsl::Graph g;
  g.kernel("k", touch).launch(1, 1);
  CHECK(only_problem(g).message == "node 'k' (kernel): argument 0 was never set (call args(...))");
}

TEST_CASE("Null pointers where one is required are reported", "[validation]") {
  flowdsl::Graph g;
  int buf[4];
  g.memcpy("copy", nullptr, nullptr, 8);
  g.memset("clear", nullptr, 0, 4);
  g.host("cb", nullptr);
  g.kernel("k", static_cast<void (*)(int*)>(nullptr)).launch(1, 1).args(buf);
  const auto all = problems(g);
  REQUIRE(all.size() == 5);
  CHECK(all[0].message == "node 'copy' (memcpy): destination pointer is null");
  CHECK(all[1].message == "node 'copy' (memcpy): source pointer is null");
  CHECK(all[2].message == "node 'clear' (memset): destination pointer is null");
  CHECK(all[3].message == "node 'cb' (host): host function is null");
  CHECK(all[4].message == "node 'k' (kernel): kernel function is null");
}

TEST_CASE("Zero-byte copies and memsets, and odd element sizes, are reported", "[validation]") {
  flowdsl::Graph g;
  int buf[4];
  g.memcpy("copy", buf, buf + 1, 0);
  g.memset("clear", buf, 0, 0);
  g.memset("wide", buf, 0, 1, 8);
  const auto all = problems(g);
  REQUIRE(all.size() == 3);
  CHECK(all[0].message == "node 'copy' (memcpy): copies zero bytes");
  CHECK(all[1].message == "node 'clear' (memset): sets zero elements");
  CHECK(all[2].message == "node 'wide' (memset): element size 8 is not 1, 2 or 4 bytes");
}

TEST_CASE("Every problem is reported in one error, one line each", "[validation]") {
  flowdsl::Graph g;
  int* p = nullptr;
  g.kernel("big", touch).grid(1).block(4096).args(p);
  g.memcpy("copy", nullptr, p, 0);
  g.empty("join").after("nowhere");
  try {
    (void)g.plan();
    FAIL("no error");
  } catch (const flowdsl::ValidationError& e) {
    CHECK(e.diagnostics().size() == 5);
    const std::string what = e.what();
    CHECK_THAT(what, contains("invalid graph (5 problems)"));
    CHECK_THAT(what, contains("\n  node 'big' (kernel)"));
    CHECK_THAT(what, contains("\n  node 'copy' (memcpy): destination pointer is null"));
    CHECK_THAT(what, contains("\n  node 'copy' (memcpy): source pointer is null"));
    CHECK_THAT(what, contains("\n  node 'copy' (memcpy): copies zero bytes"));
    CHECK_THAT(what, contains("\n  node 'join' (empty): depends on unknown node 'nowhere'"));
  }
}

TEST_CASE("Problems come in order: names, then edges, then each node's own by id", "[validation]") {
  flowdsl::Graph g;
  g.kernel("k", touch).args(nullptr);  // no launch shape
  g.empty("");
  g.empty("j").after("nowhere");
  g.empty("j");
  const auto all = problems(g);
  REQUIRE(all.size() == 4);
  CHECK_THAT(all[0].message, contains("node #1 (empty) has an empty name"));
  CHECK_THAT(all[1].message, contains("node 'j' is declared 2 times"));
  CHECK_THAT(all[2].message, contains("node 'j' (empty): depends on unknown node 'nowhere'"));
  CHECK_THAT(all[3].message, contains("node 'k' (kernel): launch shape was never set"));
}

TEST_CASE("A graph stays usable after a validation error", "[validation]") {
  flowdsl::Graph g;
  int buf[4];
  auto copy = g.memcpy("copy", buf, buf + 2, 0);
  CHECK_THROWS_AS(g.plan(), flowdsl::ValidationError);
  copy.set(buf, buf + 2, 8);
  CHECK_NOTHROW(g.plan());
  g.empty("join").after(copy);
  CHECK(g.plan().steps.size() == 2);
}

TEST_CASE("validate_parameters checks only the nodes given", "[validation]") {
  flowdsl::Graph g;
  int buf[4];
  g.memcpy("bad", buf, nullptr, 8);
  g.memcpy("good", buf, buf + 1, 4);
  CHECK(flowdsl::validate_parameters(g.description(), {1}).empty());
  const auto found = flowdsl::validate_parameters(g.description(), {0, 1});
  REQUIRE(found.size() == 1);
  CHECK(found[0].message == "node 'bad' (memcpy): source pointer is null");
}

namespace {
void derive_nothing(const void* const*, void*) {}
}  // namespace

TEST_CASE("Derived parameters of no size or a bad alignment are reported on their node", "[validation]") {
  static int data = 0;
  flowdsl::Graph g;
  g.kernel("k", touch).launch(1, 1).args(&data).derived(flowdsl::DerivedParameters{derive_nothing, 0, 4});
  const auto p = only_problem(g);
  CHECK(names(p, "k"));
  CHECK_THAT(p.message, contains("derived parameters of 0 bytes aligned to 4"));
}

TEST_CASE("Thread-block clusters must tile the grid and hold at most 8 blocks", "[validation][cluster]") {
  int x = 0;
  SECTION("a grid that is not a multiple of its cluster") {
    flowdsl::Graph g;
    g.kernel("k", touch).launch(flowdsl::Dim3(4, 1, 3), 32).cluster(flowdsl::Dim3(1, 1, 2)).args(&x);
    const flowdsl::Diagnostic d = only_problem(g);
    CHECK(names(d, "k"));
    CHECK_THAT(d.message, contains("node 'k' (kernel): grid 4x1x3 is not a multiple of its cluster 1x1x2"));
  }
  SECTION("a cluster of more than 8 blocks, and one with a zero dimension") {
    flowdsl::Graph g;
    g.kernel("big", touch).launch(16, 32).cluster(16).args(&x);
    g.kernel("zero", touch).launch(16, 32).cluster(flowdsl::Dim3(0, 1, 1)).args(&x);
    const auto all = problems(g);
    REQUIRE(all.size() == 2);
    CHECK_THAT(all[0].message, contains("node 'big' (kernel): cluster 16x1x1 holds 16 blocks, over the 8 a cluster may hold"));
    CHECK_THAT(all[1].message, contains("node 'zero' (kernel): cluster 0x1x1 has a zero dimension"));
  }
  SECTION("a valid cluster is structure: it changes the topology hash") {
    flowdsl::Graph a, b;
    a.kernel("k", touch).launch(flowdsl::Dim3(4, 1, 2), 32).args(&x);
    b.kernel("k", touch).launch(flowdsl::Dim3(4, 1, 2), 32).cluster(flowdsl::Dim3(1, 1, 2)).args(&x);
    CHECK_NOTHROW(b.plan());
    CHECK(a.topology_hash() != b.topology_hash());
  }
}
