// SPDX-License-Identifier: Apache-2.0
// DOT dumps: content, escaping of any name, and Graphviz `dot -Tsvg` accepting the output.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "graphviz.hpp"
#include "flowdsl/flowdsl.hpp"

using flowdsl_test::contains;

using flowdsl_test::require_dot_accepts;

namespace {

void scale_f32(int, float, const float*, float*) {}
void copy_f32(std::int64_t, const float*, float*) {}
void decide(const float*, float, flowdsl::Condition) {}
void host_fn(void*) {}

const flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("scale_f32", scale_f32, {"n", "alpha", "x", "y"});
    r.add("decide", decide, {"residual", "tolerance", "loop"});
    r.add("copy_f32", copy_f32, {"n", "x: n", "y: n"});
    return true;
  }();
  (void)once;
  return r;
}


}  // namespace

TEST_CASE("A DOT dump has one labelled, coloured node per graph node and the declared edges", "[dot]") {
  flowdsl::Graph g;
  float buf[8];
  auto up = g.memcpy("upload", buf, buf + 4, 16);
  auto k = g.kernel("scale", scale_f32, "scale_f32").launch({4, 2}, 256, 128).args(4, 2.5f, buf, buf).after(up);
  g.memset("clear", buf, 7, 4).after(k);
  g.empty("join").after("clear");
  g.host("cb", host_fn).after("join", "later");

  flowdsl::DotOptions options;
  options.show_arguments = true;
  options.registry = &registry();
  options.last_launch = flowdsl::LaunchReport{flowdsl::LaunchKind::updated, 2};
  const std::string dot = flowdsl::to_dot(g, options);
  CHECK_THAT(dot, contains(R"x(n1 [label="scale\nkernel scale_f32\ngrid 4x2x1 block 256x1x1 smem 128\nn = 4\nalpha = 2.5)x"));
  CHECK_THAT(dot, contains("fillcolor=lightblue"));
  CHECK_THAT(dot, contains("fillcolor=palegreen"));
  CHECK_THAT(dot, contains("fillcolor=khaki"));
  CHECK_THAT(dot, contains("fillcolor=lightsalmon"));
  CHECK_THAT(dot, contains("n0 -> n1;"));
  CHECK_THAT(dot, contains("n3 -> n4;"));
  CHECK_THAT(dot, contains(R"x(label="later\n(undeclared)", style=dashed)x"));
  CHECK_THAT(dot, contains(R"x(label="last launch: updated (2 nodes)")x"));
  require_dot_accepts(dot, "dot_kinds.dot");
}

TEST_CASE("Any node name yields valid DOT", "[dot][escape]") {
  const std::vector<std::string> names = {
      "say \"hi\"", "back\\slash", "trailing\\", "two\nlines", "tab\there", "ünïcødé ✓ 数据 🚀",
      "bad utf8 \xff\xfe", "truncated \xe2\x82", "{braces} [brackets] <html> ;", "\\N \\G \\L", "",
  };
  flowdsl::Graph g;
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto n = g.empty(names[i]);
    if (i) n.after(g.node(names[i - 1]));
  }
  g.empty("tail").after("undeclared \"quoted\"\nname\\");
  const std::string dot = flowdsl::to_dot(g);
  CHECK_THAT(dot, contains(R"(say \"hi\")"));
  CHECK_THAT(dot, contains(R"(two\nlines)"));
  CHECK_THAT(dot, contains("bad utf8 \xef\xbf\xbd\xef\xbf\xbd"));
  require_dot_accepts(dot, "dot_names.dot");
}

TEST_CASE("A kernel declared without a name is shown by its registered name", "[dot][kernel]") {
  static const bool registered = [] {
    flowdsl::KernelRegistry::global().add("test_dot.registered_scale", scale_f32, {"n", "alpha", "x", "y"});
    return true;
  }();
  (void)registered;
  flowdsl::Graph g;
  const auto k = g.kernel("k", scale_f32).launch(1, 1);
  CHECK(std::get<flowdsl::KernelOp>(g.description().nodes[k.id()].op).kernel_name.empty());
  CHECK_THAT(flowdsl::to_dot(g), contains("kernel test_dot.registered_scale"));
}

TEST_CASE("Bodies are clusters labelled with what they are to their node", "[dot][conditional]") {
  float buf[8];
  flowdsl::Graph g;
  auto choose = g.if_else("choose", flowdsl::ConditionDefault{1});
  choose.body(0).kernel("scale", scale_f32, "scale_f32").launch(1, 32).args(8, 2.0f, buf, buf);
  choose.body(1).empty("skip");
  auto loop = g.while_loop("solve", flowdsl::ConditionDefault{1}).after(choose);
  loop.body().kernel("decide", decide).launch(1, 32).args(buf, 0.5f, loop.condition());
  auto bucket = g.switch_cases("bucket", 3, flowdsl::ConditionDefault{0}).after(loop);
  for (std::uint32_t c = 0; c < 3; ++c) bucket.body(c).empty("case_node");
  g.child("stage").after(bucket).body().empty("inside");

  flowdsl::DotOptions options;
  options.show_arguments = true;
  options.registry = &registry();
  const std::string dot = flowdsl::to_dot(g, options);
  CHECK_THAT(dot, contains(R"x(n0 [label="choose\nif / else · default 1", fillcolor=wheat];)x"));
  CHECK_THAT(dot, contains(R"x(label="solve\nwhile · default 1")x"));
  CHECK_THAT(dot, contains(R"x(label="bucket\nswitch · 3 cases · default 0")x"));
  CHECK_THAT(dot, contains("subgraph cluster_n0_0 {\n    label=\"then\";"));
  CHECK_THAT(dot, contains("subgraph cluster_n0_1 {\n    label=\"else\";"));
  CHECK_THAT(dot, contains("label=\"body (while)\";"));
  CHECK_THAT(dot, contains("label=\"case 0\";"));
  CHECK_THAT(dot, contains("label=\"case 2\";"));
  CHECK_THAT(dot, contains("label=\"stage\";"));
  CHECK_THAT(dot, contains(R"x(\nloop = condition of 'solve'")x"));
  require_dot_accepts(dot, "dot_conditional.dot");

  // Without show_arguments, no argument is shown; a condition of another graph is said to be one.
  CHECK_THAT(flowdsl::to_dot(g), !contains("condition of"));
  flowdsl::Graph other;
  other.kernel("decide", decide).launch(1, 32).args(buf, 0.5f, loop.condition());
  CHECK_THAT(flowdsl::to_dot(other, options), contains("loop = condition (of no node of this graph)"));
}

TEST_CASE("Arguments and operands name the buffer they point into, with the offset", "[dot][buffers]") {
  float input[16], output[16], unnamed[4];
  flowdsl::Graph g;
  g.buffer("input", input, sizeof input).buffer("output", output, sizeof output);
  auto k = g.kernel("scale", scale_f32, "scale_f32").launch(1, 32).args(8, 2.0f, input + 2, unnamed);
  g.memcpy("copy", output + 4, input, 16).after(k);
  g.memset("clear", output, 0, 16).after("copy");

  flowdsl::DotOptions options;
  options.show_arguments = true;
  options.registry = &registry();
  const std::string dot = flowdsl::to_dot(g, options);
  CHECK_THAT(dot, contains(R"x(\nx = input+8\ny = 0x)x"));  // an address in no named buffer stays an address
  CHECK_THAT(dot, contains(R"x(\ninput -> output+16")x"));
  CHECK_THAT(dot, contains(R"x(\noutput = 0")x"));
  require_dot_accepts(dot, "dot_buffer_names.dot");
}

TEST_CASE("The data-flow view draws buffers, with an edge for each read and each write", "[dot][data-flow]") {
  float input[16], output[16], unnamed[4];
  flowdsl::Graph g;
  g.buffer("input", input, sizeof input).buffer("output", output, sizeof output);
  auto copy = g.kernel("copy", *registry().find("copy_f32")).launch(1, 32);  // n0
  copy.set("n", std::int64_t{4}).set("x", static_cast<const float*>(input + 4)).set("y", output);
  g.memcpy("back", input, output, sizeof output).after(copy);         // n1
  g.memset("fill", unnamed, 0, sizeof unnamed).after("back");         // n2
  g.empty("touch").reads(output, 8).writes(output, 8).after("fill");  // n3
  auto tmp = g.alloc("tmp", 64).after("touch");                       // n4
  g.memcpy("stash", tmp.ptr<char>() + 16, input, 16).after(tmp);      // n5

  flowdsl::DotOptions options;
  options.data_flow = true;
  const std::string dot = flowdsl::to_dot(g, options);
  // Named buffers first, then other memory as nodes first touch it.
  CHECK_THAT(dot, contains(R"x(b0 [label="input\n64 bytes", shape=parallelogram, style=filled, fillcolor=gray92];)x"));
  CHECK_THAT(dot, contains(R"x(b1 [label="output\n64 bytes", shape=parallelogram)x"));
  CHECK_THAT(dot, contains(R"x(b2 [label="0x)x"));
  CHECK_THAT(dot, contains(R"x(shape=parallelogram, style="filled,dashed", fillcolor=gray92];)x"));
  CHECK_THAT(dot, contains(R"x(b3 [label="tmp (graph memory)\n64 bytes", shape=parallelogram)x"));
  // Reads: buffer -> node; writes: node -> buffer; byte ranges unless the whole buffer.
  CHECK_THAT(dot, contains(R"x(b0 -> n0 [color=steelblue, fontcolor=steelblue, fontsize=10, label="[16, 32)"];)x"));
  CHECK_THAT(dot, contains(R"x(n0 -> b1 [color=darkorange, fontcolor=darkorange, fontsize=10, label="[0, 16)"];)x"));
  CHECK_THAT(dot, contains(R"x(b1 -> n1 [color=steelblue, fontcolor=steelblue, fontsize=10];)x"));
  CHECK_THAT(dot, contains(R"x(n1 -> b0 [color=darkorange, fontcolor=darkorange, fontsize=10];)x"));
  CHECK_THAT(dot, contains(R"x(n2 -> b2 [color=darkorange, fontcolor=darkorange, fontsize=10, label="16 bytes"];)x"));
  CHECK_THAT(dot, contains(R"x(n3 -> b1 [dir=both, color=purple, fontcolor=purple, fontsize=10, label="[0, 8)"];)x"));
  CHECK_THAT(dot, contains(R"x(b0 -> n5 [color=steelblue, fontcolor=steelblue, fontsize=10, label="[0, 16)"];)x"));
  CHECK_THAT(dot, contains(R"x(n5 -> b3 [color=darkorange, fontcolor=darkorange, fontsize=10, label="[16, 32)"];)x"));
  CHECK_THAT(dot, contains("n0 -> n1;"));  // the declared edges stay
  require_dot_accepts(dot, "dot_data_flow.dot");

  CHECK_THAT(flowdsl::to_dot(g), !contains("parallelogram"));
}

TEST_CASE("Timings turn the dump into a heat map with the critical path drawn", "[dot][timings]") {
  flowdsl::Graph g;
  float buf[8];
  auto a = g.kernel("a", scale_f32, "scale_f32").grid(1).block(32).args(4, 1.0f, buf, buf);
  auto b = g.kernel("b", scale_f32, "scale_f32").grid(1).block(32).args(4, 1.0f, buf, buf).after(a);
  auto c = g.kernel("c", scale_f32, "scale_f32").grid(1).block(32).args(4, 1.0f, buf, buf).after(a);
  c.before("join");  // an edge to a name declared later: on the path all the same
  g.empty("join").after(b);

  flowdsl::NodeTimings timings;
  timings.nodes.resize(g.size());
  timings.nodes[a.id()] = {true, 5.0, 6.0, 0.125, true, flowdsl::no_node};
  timings.nodes[b.id()] = {true, 10.0, 11.0, 0.25, false, flowdsl::no_node};
  timings.nodes[c.id()] = {true, 25.0, 30.0, 0.625, true, a.id()};
  timings.nodes[g.node("join").id()] = {false, 0, 0, 0, true, c.id()};
  flowdsl::DotOptions options;
  options.timings = &timings;
  options.last_launch = flowdsl::LaunchReport{flowdsl::LaunchKind::hit, 0};
  const std::string dot = flowdsl::to_dot(g, options);
  CHECK_THAT(dot, contains("label=\"last launch: hit\\nGPU time per launch: red = largest share; bold blue = critical path\""));
  CHECK_THAT(dot, contains("median 25.0 \xc2\xb5s (62%)\", fillcolor=\"0.000 1.000 1.000\", color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("median 10.0 \xc2\xb5s (25%)\", fillcolor=\"0.000 0.400 1.000\"];"));
  CHECK_THAT(dot, contains("median 5.0 \xc2\xb5s (12%)\", fillcolor=\"0.000 0.200 1.000\", color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("join\\nempty\\nnot measured\", fillcolor=white, color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("n0 -> n2 [color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("n0 -> n1;"));
  CHECK_THAT(dot, contains("n2 -> n3 [color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("n1 -> n3;"));
  require_dot_accepts(dot, "dot_heat_map.dot");

  timings.nodes.pop_back();
  CHECK_THROWS_AS(flowdsl::to_dot(g, options), flowdsl::UsageError);
}
