// SPDX-License-Identifier: Apache-2.0
// The fusion pass without a GPU: which runs it groups and why it leaves kernels out, what it keeps
// in registers, the kernel it generates, the topology hash, parameter changes that keep or break
// a group, bodies, and the JSON flag.
#include <cstdint>
#include <string>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

using flowdsl_test::contains;

namespace {

// Host stand-ins with kernel signatures: nothing is launched.
void scale_f32(std::int64_t, float, const float*, float*) {}
void add_f32(std::int64_t, const float*, const float*, float*) {}
void axpy_f32(std::int64_t, float, const float*, float*) {}
void cast_f32_bf16(std::int64_t, const float*, flowdsl::bfloat16*) {}
void rows_f32(std::int32_t, std::int32_t, const float*, float*) {}
void plain_f32(std::int64_t, const float*, float*) {}
void count_i32(std::int64_t, const std::int32_t*, std::int32_t*) {}
void bias_act_f32(std::int64_t, std::int32_t, std::int32_t, const float*, const float*, float*) {}
void host_step(void*) {}

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("scale_f32", scale_f32, {"n", "a", "x: n", "y: n"}, "", true, {}, "a * x");
    r.add("add_f32", add_f32, {"n", "a: n", "b: n", "out: n"}, "", true, {}, "a + b");
    r.add("axpy_f32", axpy_f32, {"n", "a", "x: n", "y: n"}, "", true, {}, "fmaf(a, x, y)");
    r.add("cast_f32_bf16", cast_f32_bf16, {"n", "x: n", "y: n"}, "", true, {}, "x");
    r.add("rows_f32", rows_f32, {"rows", "cols", "x: rows * cols", "out: rows"});
    r.add("plain_f32", plain_f32, {"n", "x: n", "y: n"});
    r.add("count_i32", count_i32, {"n", "x: n", "y: n"}, "", true, {}, "x");
    r.add("bias_act_f32", bias_act_f32, {"rows", "cols", "activation", "x: rows * cols", "bias: cols", "y: rows * cols"}, "",
          true, {}, "activate(activation, x + bias[i % cols])");
    return true;
  }();
  (void)once;
  return r;
}

const flowdsl::KernelInfo& kernel(const char* name) { return *registry().find(name); }

// Addresses that look like device memory, 1 MiB apart; nothing is dereferenced.
float* at(int buffer) { return reinterpret_cast<float*>(std::uintptr_t{0x1000000} * (buffer + 1)); }
constexpr int x = 0, t1 = 1, t2 = 2, y = 3, u = 4, x2 = 5;
constexpr std::int64_t n = 1024;

// `into`: a Graph or a Body.
template <class Into>
flowdsl::RegisteredKernelNode scale(Into&& into, const std::string& name, float* in, float* out, std::int64_t count = n) {
  auto k = into.kernel(name, kernel("scale_f32")).grid(4).block(256);
  k.set("n", count).set("a", 2.0f).set("x", static_cast<const float*>(in)).set("y", out);
  return k;
}
template <class Into>
flowdsl::RegisteredKernelNode add(Into&& into, const std::string& name, float* a, float* b, float* out) {
  auto k = into.kernel(name, kernel("add_f32")).grid(4).block(256);
  k.set("n", n).set("a", static_cast<const float*>(a)).set("b", static_cast<const float*>(b)).set("out", out);
  return k;
}

// x -> scale -> t1 -> scale -> t2 -> add(t2, x) -> y
flowdsl::Graph chain(bool fuse) {
  flowdsl::Graph g;
  g.fuse(fuse);
  auto a = scale(g, "a", at(x), at(t1));
  auto b = scale(g, "b", at(t1), at(t2)).after(a);
  add(g, "c", at(t2), at(x), at(y)).after(b);
  return g;
}

}  // namespace

TEST_CASE("A run of element-wise kernels becomes one group; intermediates only it reads stay in registers", "[fusion]") {
  flowdsl::Graph g = chain(true);
  const flowdsl::Plan& plan = g.plan();
  REQUIRE(plan.fusion != nullptr);
  REQUIRE(plan.fusion->groups.size() == 1);
  const flowdsl::FusedGroup& group = plan.fusion->groups[0];
  CHECK(group.members == std::vector<flowdsl::NodeId>{0, 1, 2});
  CHECK(group.stored == std::vector<bool>{false, false, true});
  CHECK(group.elided.size() == 2);
  // n, a of "a", a of "b", x (loaded once though two members read it), y.
  CHECK(group.arguments.size() == 5);
  CHECK(group.vector_width == 4);
  CHECK_THAT(group.source, contains("flowdsl_fused"));
  CHECK_THAT(group.source, contains("fd_round_f32(fd_s0_1 * fd_x0)"));
  CHECK_THAT(group.source, contains("fd_round_f32(fd_s1_1 * fd_r0)"));
  CHECK_THAT(group.source, contains("fd_round_f32(fd_r1 + fd_x0)"));
  CHECK(group.launch.block.x == 256);
  const std::string text = flowdsl::describe_fusion(g.description(), *plan.fusion);
  CHECK_THAT(text, contains("group 1: 'a' > 'b' > 'c'"));
  CHECK_THAT(text, contains("kept in registers, not stored: 'a', 'b'"));
}

TEST_CASE("Fusing is another topology; without it no plan holds groups", "[fusion][hash]") {
  flowdsl::Graph fused = chain(true);
  flowdsl::Graph plain = chain(false);
  CHECK(plain.plan().fusion == nullptr);
  CHECK(fused.topology_hash() != plain.topology_hash());
  CHECK(fused.topology_hash() == chain(true).topology_hash());
  CHECK(flowdsl::topology_hash(fused.description(), fused.plan()) == fused.topology_hash());
  // The pass still says what it would do for a graph that does not fuse.
  const flowdsl::FusionPlan would = flowdsl::plan_fusion(plain.description(), plain.plan());
  CHECK(would.groups.size() == 1);
}

TEST_CASE("The pass leaves out kernels that cannot join a run, and says why", "[fusion]") {
  flowdsl::Graph g;
  g.fuse(true);
  auto a = scale(g, "a", at(x), at(t1));
  auto b = scale(g, "b", at(t1), at(t2), n / 2).after(a);  // another count
  auto c = scale(g, "c", reinterpret_cast<float*>(reinterpret_cast<char*>(at(t2)) + 4), at(y), n / 2).after(b);  // t2 + 1
  auto d = g.kernel("d", kernel("plain_f32")).grid(4).block(256);
  d.set("n", n).set("x", static_cast<const float*>(at(y))).set("y", at(u));
  d.after(c);
  auto e = g.kernel("e", kernel("count_i32")).grid(4).block(256);
  e.set("n", n).set("x", reinterpret_cast<const std::int32_t*>(at(x2))).set("y", reinterpret_cast<std::int32_t*>(at(u)) + n);
  e.after(d);
  const flowdsl::FusionPlan fusion = flowdsl::plan_fusion(g.description(), g.plan());
  CHECK(fusion.groups.empty());
  CHECK(g.plan().fusion == nullptr);
  const std::string text = flowdsl::describe_fusion(g.description(), fusion);
  CHECK_THAT(text, contains("'b': its element count 512 differs from the 1024 of 'a'"));
  CHECK_THAT(text, contains("'c': its argument 'x' overlaps an operand at another offset or of another type in 'b'"));
  CHECK_THAT(text, contains("'d': kernel 'plain_f32' has no element function"));
  CHECK_THAT(text, contains("'e': pointer 'x' is to i32"));
}

TEST_CASE("An output another node reads is stored; a node that may read anything keeps every output", "[fusion]") {
  SECTION("a reader after the group") {
    flowdsl::Graph g = chain(true);
    auto r = g.kernel("rows", kernel("rows_f32")).grid(1).block(32);
    r.set("rows", std::int32_t{32}).set("cols", std::int32_t{32}).set("x", static_cast<const float*>(at(t1))).set("out", at(u));
    r.after("c");
    const flowdsl::FusedGroup& group = g.plan().fusion->groups.at(0);
    CHECK(group.stored == std::vector<bool>{true, false, true});
  }
  SECTION("a reader before the group, of the previous launch's value") {
    flowdsl::Graph g;
    g.fuse(true);
    auto r = g.kernel("rows", kernel("rows_f32")).grid(1).block(32);
    r.set("rows", std::int32_t{32}).set("cols", std::int32_t{32}).set("x", static_cast<const float*>(at(t2))).set("out", at(u));
    auto a = scale(g, "a", at(x), at(t1)).after(r);
    auto b = scale(g, "b", at(t1), at(t2)).after(a);
    add(g, "c", at(t2), at(x), at(y)).after(b);
    CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{false, true, true});
  }
  SECTION("a host node") {
    flowdsl::Graph g = chain(true);
    g.host("log", host_step).after("c");
    const flowdsl::FusionPlan& fusion = *g.plan().fusion;
    CHECK(fusion.groups.at(0).stored == std::vector<bool>{true, true, true});
    CHECK_THAT(fusion.stores_all, contains("node 'log' may read any memory"));
  }
  SECTION("an in-place chain stores the last write only") {
    flowdsl::Graph g;
    g.fuse(true);
    auto a = scale(g, "a", at(x), at(y));
    auto b = scale(g, "b", at(y), at(y)).after(a);
    auto k = g.kernel("c", kernel("axpy_f32")).grid(4).block(256);
    k.set("n", n).set("a", 0.5f).set("x", static_cast<const float*>(at(x))).set("y", at(y));
    k.after(b);
    const flowdsl::FusedGroup& group = g.plan().fusion->groups.at(0);
    CHECK(group.stored == std::vector<bool>{false, false, true});
    CHECK(group.elided.empty());  // overwritten, not kept apart
    CHECK_THAT(group.source, contains("fmaf(fd_s2_1, fd_x0, fd_r1)"));
  }
  SECTION("an output an earlier member loads is stored") {
    flowdsl::Graph g;
    g.fuse(true);
    auto a = scale(g, "a", at(t1), at(y));  // reads t1 as the previous launch left it
    auto b = scale(g, "b", at(x), at(t1)).after(a);
    add(g, "c", at(t1), at(y), at(u)).after(b);
    CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{false, true, true});
  }
}

TEST_CASE("Scalar and pointer changes that keep the wiring keep the plan; rewiring lowers again", "[fusion][update]") {
  flowdsl::Graph g;
  g.fuse(true);
  auto a = scale(g, "a", at(x), at(t1));
  auto b = scale(g, "b", at(t1), at(y)).after(a);
  const flowdsl::Plan* first = &g.plan();
  const std::uint64_t hash = g.topology_hash();
  a.set("a", 3.0f);
  CHECK(&g.plan() == first);
  a.set("x", static_cast<const float*>(at(x2)));  // another input: a parameter
  CHECK(&g.plan() == first);
  CHECK(g.topology_hash() == hash);
  b.set("x", static_cast<const float*>(at(u)));  // b no longer reads what a writes
  CHECK(g.topology_hash() != hash);
  CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{true, true});
  b.set("x", static_cast<const float*>(at(t1)));
  CHECK(g.topology_hash() == hash);
  b.set("n", n / 2);  // counts differ: no group
  CHECK(g.plan().fusion == nullptr);
}

TEST_CASE("A node outside the group that comes to read a kept output makes it stored", "[fusion][update]") {
  flowdsl::Graph g = chain(true);
  auto r = g.kernel("rows", kernel("rows_f32")).grid(1).block(32);
  r.set("rows", std::int32_t{32}).set("cols", std::int32_t{32}).set("x", static_cast<const float*>(at(u))).set("out", at(x2));
  r.after("c");
  CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{false, false, true});
  r.set("x", static_cast<const float*>(at(t1)));
  CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{true, false, true});
}

TEST_CASE("Groups form inside bodies of child and conditional nodes", "[fusion][nesting]") {
  flowdsl::Graph g;
  g.fuse(true);
  auto child = g.child("stage");
  auto a = scale(child.body(), "a", at(x), at(t1));
  scale(child.body(), "b", at(t1), at(y)).after(a);
  auto maybe = g.if_then("maybe", flowdsl::ConditionDefault{1}).after(child);
  auto c = scale(maybe.body(), "c", at(y), at(t2));
  add(maybe.body(), "d", at(t2), at(y), at(u)).after(c);
  const flowdsl::FusionPlan& fusion = *g.plan().fusion;
  REQUIRE(fusion.groups.size() == 2);
  const std::string text = flowdsl::describe_fusion(g.description(), fusion);
  CHECK_THAT(text, contains("'stage/a' > 'stage/b'"));
  CHECK_THAT(text, contains("'maybe/c' > 'maybe/d'"));
}

TEST_CASE("Graph files say \"fuse\", and describing a fused graph keeps it", "[fusion][json]") {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(R"({"version": 1, "name": "f", "fuse": true,
    "buffers": [{"name": "x", "type": "f32", "count": 1024}, {"name": "y", "type": "f32", "count": 1024}],
    "nodes": [{"name": "a", "kind": "kernel", "kernel": "scale_f32", "grid": 4, "block": 256,
               "args": {"n": 1024, "a": 2.0, "x": "x", "y": "y"}}]})");
  CHECK(spec.fuse);
  const flowdsl::Graph g = flowdsl::inspect_graph(spec, registry());
  CHECK(g.description().fuse);
  CHECK_THAT(flowdsl::to_json_text(spec), contains("\"fuse\": true"));
  const flowdsl::GraphSpec plain = flowdsl::parse_graph(R"({"version": 1, "name": "f", "buffers": [], "nodes": []})");
  CHECK_FALSE(plain.fuse);
  CHECK_THROWS_AS(flowdsl::parse_graph(R"({"version": 1, "name": "f", "fuse": 1, "buffers": [], "nodes": []})"),
                  flowdsl::JsonError);
}

TEST_CASE("An element function may index an operand that no member writes (a bias by column)", "[fusion]") {
  auto bias_act = [](flowdsl::Graph& g, const std::string& name, float* in, float* bias, float* out) {
    auto k = g.kernel(name, kernel("bias_act_f32")).grid(4).block(256);
    k.set("rows", std::int64_t{8}).set("cols", std::int32_t{128}).set("activation", std::int32_t{2});
    k.set("x", static_cast<const float*>(in)).set("bias", static_cast<const float*>(bias)).set("y", out);
    return k;
  };
  SECTION("after a scale, before a cast") {
    flowdsl::Graph g;
    g.fuse(true);
    auto a = scale(g, "a", at(x), at(t1));
    auto b = bias_act(g, "b", at(t1), at(u), at(t2)).after(a);
    auto c = bias_act(g, "c", at(t2), at(u), at(y)).after(b);  // the same bias: one accessor
    (void)c;
    const flowdsl::FusedGroup& group = g.plan().fusion->groups.at(0);
    CHECK(group.members.size() == 3);
    CHECK_THAT(group.source, contains("const long long fd_n = ((long long)fd_c0);"));
    CHECK_THAT(group.source, contains("fd_round_f32(fd_activate_f32(fd_s1_2, fd_r0 + fd_g0[fd_i % fd_s1_1]))"));
    CHECK_THAT(group.source, contains("fd_round_f32(fd_activate_f32(fd_s2_2, fd_r1 + fd_g0[fd_i % fd_s2_1]))"));
    CHECK_THAT(group.source, contains("const fd_gather_f32 fd_g0{fd_gp0};"));
  }
  SECTION("first in its group: the count is its rows times its columns") {
    flowdsl::Graph g;
    g.fuse(true);
    auto b = bias_act(g, "b", at(x), at(u), at(t1));
    scale(g, "a", at(t1), at(y)).after(b);
    const flowdsl::FusedGroup& group = g.plan().fusion->groups.at(0);
    CHECK_THAT(group.source, contains("const long long fd_n = ((long long)fd_c0) * ((long long)fd_c1);"));
  }
  SECTION("an indexed operand an earlier member writes splits the run") {
    flowdsl::Graph g;
    g.fuse(true);
    auto a = scale(g, "a", at(x), at(u));
    bias_act(g, "b", at(x), at(u), at(y)).after(a);
    const flowdsl::FusionPlan fusion = flowdsl::plan_fusion(g.description(), g.plan());
    CHECK(fusion.groups.empty());
    CHECK_THAT(flowdsl::describe_fusion(g.description(), fusion), contains("'b': its argument 'bias' overlaps memory indexed or written by 'a'"));
  }
}

TEST_CASE("DOT draws a fused group as a cluster of its members", "[fusion][dot]") {
  const std::string fused = flowdsl::to_dot(chain(true));
  CHECK_THAT(fused, contains("subgraph cluster_fused_n0 {"));
  CHECK_THAT(fused, contains("fused kernel: 3 nodes, 2 outputs not stored"));
  CHECK_THAT(flowdsl::to_dot(chain(false)), !contains("cluster_fused"));
}

TEST_CASE("What a group writes into a buffer read after launches is stored", "[fusion]") {
  flowdsl::Graph g = chain(true);
  CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{false, false, true});
  g.output("t2", at(t2), n * sizeof(float));
  CHECK(g.plan().fusion->groups.at(0).stored == std::vector<bool>{false, true, true});
  CHECK(g.description().buffers.at(0).output);
}
