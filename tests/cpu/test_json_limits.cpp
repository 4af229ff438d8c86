// SPDX-License-Identifier: Apache-2.0
// Reading graph files within bounds: hostile files are refused in one linear pass, problems
// found while streaming nodes keep the order and pointers of a whole-file reader, and a file of
// many bad nodes gives a bounded list of problems. (No time is asserted: a slow reader shows as
// this test's ctest TIMEOUT.)
#include <algorithm>
#include <string>

#include "catch.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernel_files.hpp"

using flowdsl_test::contains;

namespace {

flowdsl::JsonError error_of(const std::string& text, const flowdsl::JsonLimits& limits = {}) {
  try {
    (void)flowdsl::parse_graph(text, "t.json", limits);
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError");
  throw;  // not reached: FAIL throws
}

std::string graph_of(const std::string& nodes, const std::string& before = R"("version": 1, "name": "t")") {
  return "{" + before + R"(, "nodes": [)" + nodes + "]}";
}

std::string empty_nodes(std::size_t n) {
  std::string nodes;
  nodes.reserve(4 * n);
  for (std::size_t i = 0; i < n; ++i) nodes += i == 0 ? "{}" : ", {}";
  return nodes;
}

void void_fn(void*) {}

}  // namespace

TEST_CASE("A million empty nodes are refused at the first node", "[json][limits]") {
  const flowdsl::JsonError e = error_of(graph_of(empty_nodes(1'000'000)));
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "/nodes/0/name");
  CHECK_THAT(e.what(), contains("t.json: /nodes/0/name: missing required member 'name'"));
}

TEST_CASE("Too many nodes are counted to the end, not read", "[json][limits]") {
  flowdsl::JsonLimits limits;
  limits.max_nodes = 1000;
  const flowdsl::JsonError e = error_of(graph_of(empty_nodes(200'000)), limits);
  CHECK(e.pointer() == "/nodes");
  CHECK_THAT(e.what(), contains("200000 nodes exceed the limit of 1000"));
}

TEST_CASE("Deep nesting and huge strings inside a node hit the limits", "[json][limits]") {
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  CHECK_THAT(error_of(graph_of(R"({"name": "a", "kind": "empty", "x": )" + deep + "}")).what(),
             contains("input exceeds the reader's limits: nesting deeper than 32 levels"));
  const std::string huge(1 << 20, 'n');
  CHECK_THAT(error_of(graph_of(R"({"name": ")" + huge + R"(", "kind": "empty"})")).what(),
             contains("a string of 1048576 bytes, over the limit of 4096"));
  // A member name too long is reported at the object holding it, its text not echoed.
  const auto named = error_of(graph_of(R"({")" + huge + R"(": 1})"));
  CHECK(named.pointer() == "/nodes/0");
  CHECK_THAT(named.what(), contains("a member name of 1048576 bytes"));
  flowdsl::JsonLimits limits;
  limits.max_values = 100;
  std::string numbers = "0";
  for (int i = 0; i < 1000; ++i) numbers += ", 0";
  CHECK_THAT(error_of(graph_of(numbers), limits).what(), contains("more than 100 values"));
}

TEST_CASE("Malformed text after a bad node is reported as malformed, with its place", "[json][limits]") {
  const flowdsl::JsonError e = error_of("{\"version\": 1, \"name\": \"t\", \"nodes\": [{}, {},\n  {]}");
  CHECK_THAT(e.what(), contains("t.json: /: malformed JSON at line 2, column 4"));
}

TEST_CASE("Members around the nodes are checked before the nodes", "[json][limits]") {
  // "nodes" first in the file: the version, the unknown member and the buffers still come first.
  CHECK_THAT(error_of(R"({"nodes": [{}], "version": 2, "name": "t"})").what(), contains("/version: unsupported version 2"));
  CHECK_THAT(error_of(R"({"nodes": [{}], "version": 1, "name": "t", "extra": 1})").what(),
             contains("/extra: unknown member 'extra'"));
  CHECK_THAT(error_of(R"({"nodes": [{}], "version": 1, "name": "t", "buffers": 3})").what(),
             contains("/buffers: expected an array, found an integer"));
  CHECK(error_of(R"({"nodes": [{"name": "a", "kind": "empty"}, {"name": "b"}], "version": 1, "name": "t"})").pointer() ==
        "/nodes/1/kind");
  CHECK_THAT(error_of(R"({"version": 1, "name": "t", "nodes": 5})").what(),
             contains("/nodes: expected an array, found an integer"));
}

TEST_CASE("Nodes read one at a time are the nodes of the file", "[json][limits]") {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(
      R"({"version": 1, "name": "t", "nodes": [{"name": "old", "kind": "empty"}],
          "nodes": [{"name": "a", "kind": "empty"},
                    {"name": "c", "kind": "child", "nodes": [{"name": "in", "kind": "empty"}]},
                    {"name": "b", "kind": "empty", "after": ["a", "c"]}]})");
  REQUIRE(spec.nodes.size() == 3);  // a repeated member replaces the earlier one, as in a DOM
  CHECK(spec.nodes[0].name == "a");
  REQUIRE(spec.nodes[1].bodies.size() == 1);
  CHECK(spec.nodes[1].bodies[0].nodes.at(0).name == "in");
  CHECK(spec.nodes[2].after == std::vector<std::string>{"a", "c"});
  CHECK(flowdsl::parse_graph(flowdsl::to_json_text(spec)).nodes.size() == 3);
}

TEST_CASE("A member repeated inside a node keeps its last value, as in a DOM", "[json][limits]") {
  // Each key is kept once, even when a hostile file repeats one many times in one object.
  std::string args = R"("n": 1, "a": 1.0, "x": "in", "y": "out")";
  for (int i = 0; i < 50000; ++i) args += R"(, "n": )" + std::to_string(i);
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(graph_of(
      R"({"name": "k", "kind": "kernel", "kernel": "scale.f32", "grid": 1, "block": 64, "grid": 2,
          "args": {)" + args + R"(}, "args": {"n": 16, "a": 2.0, "x": "in", "y": "out", "a": {"expr": "3"}}})"));
  REQUIRE(spec.nodes.size() == 1);
  const flowdsl::CompactJson::Ref fields = spec.nodes[0].fields.root();
  CHECK(fields.find("grid")->get_unsigned() == 2);
  const flowdsl::CompactJson::Ref read_args = *fields.find("args");
  CHECK(read_args.size() == 4);
  CHECK(read_args.find("n")->get_unsigned() == 16);
  CHECK(read_args.find("a")->get_unsigned() == 3);
  const std::string written = flowdsl::to_json_text(spec);
  CHECK(written.find("\"grid\"") == written.rfind("\"grid\""));  // written once
}

TEST_CASE("A file of many bad nodes gives the first problems and a count", "[json][limits]") {
  std::string nodes;
  for (int i = 0; i < 1000; ++i) {
    nodes += std::string(i ? ", " : "") + R"({"name": "h)" + std::to_string(i) + R"(", "kind": "host", "function": "nope"})";
  }
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(graph_of(nodes));
  const flowdsl::HostFunctions hosts{{"known", {void_fn, nullptr}}};
  try {
    flowdsl::check_graph(spec, flowdsl::KernelRegistry(), hosts, "bad.json");
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    REQUIRE(e.problems().size() == flowdsl::JsonError::max_problems + 1);
    CHECK(e.problems().front().pointer == "/nodes/0/function");
    CHECK(e.problems().back().message == "... and 900 more problems");
    CHECK_THAT(e.what(), contains("bad.json: 1000 problems:"));  // all of them, though 100 are listed
    CHECK_THAT(e.what(), contains("\n  /: ... and 900 more problems"));
  }
}

TEST_CASE("A node name holding '/', a newline or NUL is refused at its member, quoted escaped",
          "[json][limits][names]") {
  // Bound, 'a/bad' would stand at the path of a's child 'bad'.
  flowdsl::JsonError e =
      error_of(graph_of(R"({"name": "a", "kind": "child", "nodes": [{"name": "bad", "kind": "empty"}]},)"
                        R"({"name": "a/bad", "kind": "empty"})"));
  CHECK(e.pointer() == "/nodes/1/name");
  CHECK(e.problems()[0].message ==
        "the node name 'a/bad' is not valid: it holds '/' (at byte 1), which separates the names of a node's path");
  e = error_of(graph_of(R"({"name": "x\nt.json: /nodes/0: forged", "kind": "empty"})"));
  CHECK(e.pointer() == "/nodes/0/name");
  CHECK_THAT(e.what(),
             contains("the node name 'x\\nt.json: /nodes/0: forged' is not valid: it holds a control character"));
  CHECK(std::string(e.what()).find('\n') == std::string::npos);
  e = error_of(graph_of(R"({"name": "cut\u0000short", "kind": "empty"})"));
  CHECK(e.pointer() == "/nodes/0/name");
  CHECK_THAT(e.what(), contains("the node name 'cut\\x00short' is not valid"));
}

TEST_CASE("100000 duplicate names in one body make one short line", "[json][limits][names]") {
  std::string nodes;
  for (int i = 0; i < 100000; ++i) nodes += std::string(i ? ", " : "") + R"({"name": "d", "kind": "empty"})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(graph_of(nodes));
  try {
    flowdsl::check_graph(spec, flowdsl::KernelRegistry(), flowdsl::HostFunctions{}, "dup.json");
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    REQUIRE(e.problems().size() == 1);
    CHECK(e.problems()[0].pointer == "/nodes/0");
    CHECK_THAT(e.what(),
               contains("declared 100000 times (nodes #0, #1, #2, #3, #4, #5, #6, #7, #8, #9 and 99990 more)"));
    CHECK(std::string(e.what()).size() < 300);
  }
}

TEST_CASE("Kernel files must be regular files of bounded size, reported at their entry",
          "[json][limits][kernel_files]") {
  flowdsl::GraphSpec spec;
  for (const char* file : {"/dev/zero", "/proc/self/mem", "/dev/null", ".", "no_such.cubin"}) {
    spec.kernel_files.push_back(flowdsl::KernelFileSpec{"k", file, "k", {}});
  }
  const std::vector<flowdsl::JsonProblem> problems = flowdsl::check_kernel_files(spec, "");
  REQUIRE(problems.size() == 5);
  CHECK(problems[0].pointer == "/kernel_files/0/file");
  CHECK(problems[0].message == "the kernel file '/dev/zero' is not a regular file (a device, a pipe or a socket)");
  CHECK(problems[1].message ==
        "the kernel file '/proc/self/mem' is empty (or a file that claims no size, as in /proc)");
  CHECK(problems[2].pointer == "/kernel_files/2/file");
  CHECK(problems[3].message == "the kernel file '.' is a directory, not a regular file");
  CHECK_THAT(problems[4].message, contains("cannot open the kernel file 'no_such.cubin'"));
  CHECK(flowdsl::check_kernel_files(spec, "", true).size() == 4);  // a missing file may pass, no other
  flowdsl::KernelRegistry registry;
  CHECK_THROWS_AS(flowdsl::load_kernel_files(spec, "", registry), flowdsl::JsonError);
}
