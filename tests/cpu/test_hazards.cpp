// SPDX-License-Identifier: Apache-2.0
// Kernels confined to their buffers and races found: extents (parse, evaluate), pointers
// checked against named buffers, the hazard check, and edges inferred from accesses.
#include <cstdint>
#include <string>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

using flowdsl_test::contains;

namespace {

// Host stand-ins with kernel signatures: nothing is launched.
void scale_f32(std::int64_t, float, const float*, float*) {}
void fill_f32(std::int64_t, float, float*) {}
void rows_f32(std::int32_t, std::int32_t, const float*, float*) {}
void pad_f32(std::int32_t, std::int32_t, const float*, const std::int32_t*, float*) {}
void partial_f32(std::int64_t, const float*, double*) {}
void unchecked_f32(std::int64_t, float*) {}

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("scale_f32", scale_f32, {"n", "a", "x: n", "y: n"});
    r.add("fill_f32", fill_f32, {"n", "value", "out: n"});
    r.add("rows_f32", rows_f32, {"rows", "cols", "x: rows * cols", "out: rows"});
    r.add("pad_f32", pad_f32, {"batch", "width", "values: offsets[batch]", "offsets: batch + 1", "out: batch * width"});
    r.add("partial_f32", partial_f32, {"n", "x: n", "partials: grid.x"});
    r.add("unchecked_f32", unchecked_f32, {"n", "out"});
    return true;
  }();
  (void)once;
  return r;
}

const flowdsl::KernelInfo& kernel(const char* name) { return *registry().find(name); }

// Addresses that look like device memory; nothing is dereferenced.
float* at(std::uintptr_t address) { return reinterpret_cast<float*>(address); }
constexpr std::uintptr_t x_at = 0x100000, y_at = 0x200000;

// A graph with buffers x and y of 1024 floats named.
flowdsl::Graph named_graph() {
  flowdsl::Graph g;
  g.buffer("x", at(x_at), 1024 * sizeof(float)).buffer("y", at(y_at), 1024 * sizeof(float));
  return g;
}

flowdsl::RegisteredKernelNode scale(flowdsl::Graph& g, const std::string& name, std::int64_t n, float* x, float* y) {
  auto k = g.kernel(name, kernel("scale_f32")).grid(4).block(256);
  k.set("n", n).set("a", 2.0f).set("x", static_cast<const float*>(x)).set("y", y);
  return k;
}

flowdsl::RegisteredKernelNode fill(flowdsl::Graph& g, const std::string& name, std::int64_t n, float* out) {
  auto k = g.kernel(name, kernel("fill_f32")).grid(4).block(256);
  k.set("n", n).set("value", 1.0f).set("out", out);
  return k;
}

std::vector<flowdsl::Diagnostic> problems(const flowdsl::Graph& g) { return flowdsl::validate(g.description()); }

std::string all(const std::vector<flowdsl::Diagnostic>& found) {
  std::string text;
  for (const auto& d : found) text += d.message + "\n";
  return text;
}

}  // namespace

TEST_CASE("extents parse and evaluate with the arguments and the launch shape", "[extent]") {
  const flowdsl::KernelInfo& rows = kernel("rows_f32");
  REQUIRE(rows.extents.size() == 4);
  CHECK(rows.extents[0].empty());
  CHECK(rows.extents[2].text() == "rows * cols");
  CHECK(rows.checked());
  CHECK_FALSE(kernel("unchecked_f32").checked());

  flowdsl::Graph g;
  auto k = g.kernel("r", rows).grid(2).block(32);
  const auto& op = [&]() -> const flowdsl::KernelOp& {
    return std::get<flowdsl::KernelOp>(g.description().nodes[0].op);
  };
  // Unbound arguments: unknown until set.
  CHECK(rows.extents[2].evaluate(op().args, op().launch).kind == flowdsl::Extent::Value::Kind::unbound);
  k.set("rows", std::int32_t{3}).set("cols", std::int32_t{5});
  auto v = rows.extents[2].evaluate(op().args, op().launch);
  CHECK(v.kind == flowdsl::Extent::Value::Kind::known);
  CHECK(v.elements == 15);
  // A negative count touches nothing.
  k.set("rows", std::int32_t{-3});
  v = rows.extents[2].evaluate(op().args, op().launch);
  CHECK(v.kind == flowdsl::Extent::Value::Kind::known);
  CHECK(v.elements == 0);

  const flowdsl::KernelInfo& partial = kernel("partial_f32");
  flowdsl::Graph h;
  auto p = h.kernel("p", partial).grid(flowdsl::Dim3(7, 2)).block(256);
  p.set("n", std::int64_t{1} << 62);
  const auto& pop = std::get<flowdsl::KernelOp>(h.description().nodes[0].op);
  v = partial.extents[2].evaluate(pop.args, pop.launch);
  CHECK(v.kind == flowdsl::Extent::Value::Kind::known);
  CHECK(v.elements == 7);

  const auto& pad = kernel("pad_f32");
  CHECK(pad.extents[2].data_dependent());
  CHECK_FALSE(pad.extents[3].data_dependent());
  // What each extent reads, by parameter index: values through a load, integers by value.
  CHECK(pad.extents[2].reads(3));   // offsets[batch]
  CHECK(pad.extents[2].reads(0));
  CHECK_FALSE(pad.extents[2].reads(1));
  CHECK(rows.extents[2].reads(0));
  CHECK(rows.extents[2].reads(1));
  CHECK_FALSE(rows.extents[3].reads(1));
  CHECK_FALSE(rows.extents[0].reads(0));  // none declared

  // Products beyond 2^63 overflow rather than wrap.
  flowdsl::KernelRegistry local;
  const auto& big = local.add("big", scale_f32, {"n", "a", "x: n * n * n", "y: n"});
  flowdsl::Graph b;
  auto bk = b.kernel("b", big).grid(1).block(1);
  bk.set("n", std::int64_t{1} << 30);
  const auto& bop = std::get<flowdsl::KernelOp>(b.description().nodes[0].op);
  CHECK(big.extents[2].evaluate(bop.args, bop.launch).kind == flowdsl::Extent::Value::Kind::overflow);
}

TEST_CASE("bad extents are refused when the kernel is registered, naming kernel and parameter", "[extent]") {
  flowdsl::KernelRegistry local;
  const auto refused = [&](std::vector<std::string> names, const std::string& expected) {
    try {
      local.add("k", scale_f32, std::move(names));
      FAIL("registered");
    } catch (const flowdsl::UsageError& e) {
      CHECK_THAT(e.what(), contains("kernel 'k'"));
      CHECK_THAT(e.what(), contains(expected));
    }
  };
  refused({"n", "a", "x: m", "y"}, "'m' is not a parameter of the kernel");
  refused({"n", "a", "x: a", "y"}, "'a' is not an integer scalar parameter (it is f32)");
  refused({"n: 4", "a", "x", "y"}, "parameter 'n' is a scalar (i64), so it has no extent");
  refused({"n", "a", "x: n *", "y"}, "ends where a value is expected");
  refused({"n", "a", "x: (n", "y"}, "expected ')'");
  refused({"n", "a", "x: n[0]", "y"}, "indexes a parameter that is not a pointer to integers");
  refused({"n", "a", "x: grid.w", "y"}, "expected grid.x, .y or .z");
  refused({"n", "a", "x: n n", "y"}, "unexpected 'n' at column 3");
  CHECK(local.find("k") == nullptr);  // nothing half-registered
}

TEST_CASE("a registered kernel's pointer is checked against the named buffer it points into", "[extent]") {
  flowdsl::Graph g = named_graph();
  scale(g, "ok", 1024, at(x_at), at(y_at));
  CHECK(problems(g).empty());

  flowdsl::Graph bad = named_graph();
  scale(bad, "scale", 16777216, at(x_at), at(y_at));
  const auto found = problems(bad);
  REQUIRE(found.size() == 2);
  CHECK(found[0].member == "args/x");
  CHECK_THAT(found[0].message, contains("node 'scale' (kernel): argument 'x' reads 16777216 elements (n) of buffer 'x' (1024)"));
  CHECK(found[1].member == "args/y");
  CHECK_THAT(found[1].message, contains("argument 'y' writes 16777216 elements (n) of buffer 'y' (1024)"));

  // After an offset, what remains of the buffer counts.
  flowdsl::Graph offset = named_graph();
  scale(offset, "tail", 1000, at(x_at + 100 * sizeof(float)), at(y_at));
  CHECK_THAT(all(problems(offset)), contains("reads 1000 elements (n) of buffer 'x' (924 after offset 400)"));

  // A parameter update is checked too: the next launch would refuse it.
  flowdsl::Graph later = named_graph();
  auto k = scale(later, "k", 1024, at(x_at), at(y_at));
  REQUIRE(problems(later).empty());
  k.set("n", std::int64_t{2048});
  CHECK_THAT(all(flowdsl::validate_parameters(later.description())), contains("reads 2048 elements"));

  // Pointers outside named buffers, and kernels without extents, are not checked.
  flowdsl::Graph unnamed;
  scale(unnamed, "k", 16777216, at(x_at), at(y_at));
  CHECK(problems(unnamed).empty());
  flowdsl::Graph unchecked = named_graph();
  unchecked.kernel("u", kernel("unchecked_f32")).grid(1).block(1).set("n", std::int64_t{1} << 40).set("out", at(x_at));
  CHECK(problems(unchecked).empty());
}

TEST_CASE("copies and fills are checked against named buffers", "[extent]") {
  flowdsl::Graph g = named_graph();
  g.memcpy("copy", at(y_at), at(x_at + 64), 4096);
  const auto found = problems(g);
  REQUIRE(found.size() == 1);
  CHECK(found[0].member == "src");
  CHECK_THAT(found[0].message, contains("reads 4096 bytes at offset 64 of buffer 'x' (4096 bytes)"));
}

TEST_CASE("named buffers are refused when they overlap or repeat", "[extent]") {
  flowdsl::Graph g = named_graph();
  CHECK_THROWS_AS(g.buffer("x", at(0x900000), 16), flowdsl::UsageError);
  CHECK_THROWS_AS(g.buffer("z", at(x_at + 8), 16), flowdsl::UsageError);
  CHECK_THROWS_AS(g.buffer("z", nullptr, 16), flowdsl::UsageError);
  CHECK(g.description().buffers.size() == 2);
}

TEST_CASE("two writers of the same bytes with no path between them are a hazard", "[hazard]") {
  flowdsl::Graph g = named_graph();
  fill(g, "a", 1024, at(x_at));
  fill(g, "b", 1024, at(x_at));
  const auto found = problems(g);
  REQUIRE(found.size() == 1);
  CHECK(found[0].nodes == std::vector<std::string>{"a", "b"});
  CHECK_THAT(found[0].message,
             contains("hazard: nodes 'a' and 'b' touch bytes [0, 4096) of buffer 'x' (both write) with no path between them"));

  g.node("b").after("a");
  CHECK(problems(g).empty());
}

TEST_CASE("a reader unordered with a writer is a hazard; readers among themselves are not", "[hazard]") {
  flowdsl::Graph g = named_graph();
  auto w = fill(g, "w", 1024, at(x_at));
  scale(g, "r1", 1024, at(x_at), at(y_at)).after(w);
  auto r2 = g.kernel("r2", kernel("rows_f32")).grid(1).block(32);
  r2.set("rows", std::int32_t{1}).set("cols", std::int32_t{512}).set("x", static_cast<const float*>(at(x_at + 1024)));
  r2.set("out", at(y_at + 2048));
  const std::string text = all(problems(g));
  // r2 reads x[256, 768) and writes y[512]: unordered with w (x) and with r1 (y).
  CHECK_THAT(text, contains("nodes 'w' and 'r2' touch bytes [1024, 3072) of buffer 'x' ('w' writes, 'r2' reads)"));
  CHECK_THAT(text, contains("nodes 'r1' and 'r2' touch bytes [2048, 2052) of buffer 'y' (both write)"));
  r2.after(w).after("r1");
  CHECK(problems(g).empty());
}

TEST_CASE("disjoint slices of one buffer may be written in parallel", "[hazard]") {
  flowdsl::Graph g = named_graph();
  auto a = fill(g, "lo", 512, at(x_at));
  auto b = fill(g, "hi", 512, at(x_at + 512 * sizeof(float)));
  scale(g, "all", 1024, at(x_at), at(y_at)).after(a).after(b);
  CHECK(problems(g).empty());
  flowdsl::Graph overlapping = named_graph();
  fill(overlapping, "lo", 513, at(x_at));
  fill(overlapping, "hi", 512, at(x_at + 512 * sizeof(float)));
  CHECK_THAT(all(problems(overlapping)), contains("bytes [2048, 2052) of buffer 'x'"));
}

TEST_CASE("an access of unknown extent reaches the end of its buffer, or of memory", "[hazard]") {
  flowdsl::Graph g = named_graph();
  g.empty("reader").reads(at(x_at + 4000));
  fill(g, "tail", 8, at(x_at + 4064));  // the last 8 floats of x
  CHECK_THAT(all(problems(g)), contains("nodes 'reader' and 'tail' touch bytes [4064, 4096) of buffer 'x'"));
  // A data-dependent extent (pad's values) counts as unknown.
  flowdsl::Graph p = named_graph();
  auto pad = p.kernel("pad", kernel("pad_f32")).grid(1).block(32);
  pad.set("batch", std::int32_t{2}).set("width", std::int32_t{4}).set("values", static_cast<const float*>(at(x_at + 8)));
  pad.set("offsets", static_cast<const std::int32_t*>(reinterpret_cast<std::int32_t*>(at(y_at)))).set("out", at(y_at + 64));
  fill(p, "late", 4, at(x_at + 4000));
  CHECK_THAT(all(problems(p)), contains("nodes 'pad' and 'late' touch bytes [4000, 4016) of buffer 'x'"));
  // Outside named buffers, to the end of memory: conservative.
  flowdsl::Graph raw;
  raw.empty("reader").reads(at(0x5000));
  raw.empty("writer").writes(at(0x9000), 16);
  CHECK_THAT(all(problems(raw)), contains("nodes 'reader' and 'writer' touch bytes [0x9000, 0x9010)"));
}

TEST_CASE("hazards are checked within each body, a child standing for what its body touches", "[hazard]") {
  flowdsl::Graph g = named_graph();
  auto child = g.child("stage");
  flowdsl::Body body = child.body();
  auto in = body.kernel("inner", kernel("fill_f32")).grid(1).block(32);
  in.set("n", std::int64_t{1024}).set("value", 0.0f).set("out", at(x_at));
  fill(g, "outer", 1024, at(x_at));
  const auto found = problems(g);
  REQUIRE(found.size() == 1);
  CHECK(found[0].nodes == std::vector<std::string>{"stage/inner", "outer"});
  g.node("outer").after(child);
  CHECK(problems(g).empty());
}

TEST_CASE("the hazard check can be turned off for graphs that mean it", "[hazard]") {
  flowdsl::Graph g = named_graph();
  fill(g, "a", 1024, at(x_at));
  fill(g, "b", 1024, at(x_at));
  g.check_hazards(false);
  CHECK(problems(g).empty());
  CHECK_NOTHROW(g.plan());
}

TEST_CASE("edges are inferred in declaration order and transitively reduced", "[infer]") {
  flowdsl::Graph g = named_graph();
  fill(g, "init", 1024, at(x_at));
  scale(g, "twice", 1024, at(x_at), at(y_at));     // reads x: after init
  scale(g, "again", 1024, at(y_at), at(x_at));     // reads y, writes x: after twice (and init, implied)
  g.node("again").after("init");                    // declared, redundant
  fill(g, "unrelated", 4, at(0x700000));
  const flowdsl::EdgeInference made = flowdsl::infer_edges(g);
  CHECK(made.added == 2);
  CHECK(made.removed == 1);
  CHECK(made.reduced);
  CHECK(g.description().edges.size() == 2);
  CHECK(problems(g).empty());
  const flowdsl::Plan& plan = g.plan();
  REQUIRE(plan.steps.size() == 4);
  const auto step_of = [&](flowdsl::NodeId id) { return plan.position[id]; };
  CHECK(plan.steps[step_of(2)].deps == std::vector<std::uint32_t>{step_of(1)});  // again after twice only
  CHECK(plan.steps[step_of(1)].deps == std::vector<std::uint32_t>{step_of(0)});
  // Inferring again changes nothing.
  const flowdsl::EdgeInference again = flowdsl::infer_edges(g);
  CHECK(again.added == 0);
  CHECK(again.removed == 0);
}

TEST_CASE("readers after a writer all follow it; the next writer follows every reader", "[infer]") {
  flowdsl::Graph g = named_graph();
  fill(g, "w1", 1024, at(x_at));
  scale(g, "r1", 512, at(x_at), at(y_at));
  scale(g, "r2", 512, at(x_at + 2048), at(y_at + 2048));
  fill(g, "w2", 1024, at(x_at));
  const flowdsl::EdgeInference made = flowdsl::infer_edges(g);
  CHECK(made.added == 4);  // w1 -> r1, w1 -> r2, r1 -> w2, r2 -> w2 (w1 -> w2 is implied)
  CHECK(made.removed == 0);
  CHECK(problems(g).empty());
}

TEST_CASE("graph files: extents, hazards and inferred edges at their JSON pointers", "[json]") {
  const auto error_of = [](const std::string& text) {
    try {
      flowdsl::check_graph(flowdsl::parse_graph(text, "t.json"), registry(), {}, "t.json");
    } catch (const flowdsl::JsonError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string buffers = R"("buffers": [{"name": "x", "type": "f32", "count": 1024}, {"name": "y", "type": "f32", "count": 1024}])";
  const std::string out_of_bounds = R"({"version": 1, "name": "t", )" + buffers + R"(, "nodes": [
      {"name": "s", "kind": "kernel", "kernel": "scale_f32", "grid": 1, "block": 1,
       "args": {"n": 16777216, "a": 1, "x": "x", "y": {"buffer": "y", "offset": 64}}}]})";
  const std::string oob = error_of(out_of_bounds);
  CHECK_THAT(oob, contains("/nodes/0/args/x: node 's' (kernel): argument 'x' reads 16777216 elements (n) of buffer 'x' (1024)"));
  CHECK_THAT(oob, contains("/nodes/0/args/y: node 's' (kernel): argument 'y' writes 16777216 elements (n) of buffer 'y' (1008 after offset 64)"));

  const std::string race = R"({"version": 1, "name": "t", )" + buffers + R"(, "nodes": [
      {"name": "a", "kind": "kernel", "kernel": "fill_f32", "grid": 1, "block": 1, "args": {"n": 1024, "value": 1, "out": "x"}, "writes": ["x"]},
      {"name": "b", "kind": "kernel", "kernel": "fill_f32", "grid": 1, "block": 1, "args": {"n": 1024, "value": 2, "out": "x"}, "writes": ["x"]}]})";
  CHECK_THAT(error_of(race), contains("/nodes/0: hazard: nodes 'a' and 'b' touch bytes [0, 4096) of buffer 'x' (both write)"));
  // Turned off, or ordered by inferred edges, the same file is valid.
  std::string off = race;
  off.insert(1, R"("check_hazards": false, )");
  CHECK(error_of(off).empty());
  std::string inferred = race;
  inferred.insert(1, R"("infer_edges": true, )");
  CHECK(error_of(inferred).empty());
  // Hand-written accesses are checked against their buffers too.
  const std::string declared = R"({"version": 1, "name": "t", )" + buffers + R"(, "nodes": [
      {"name": "a", "kind": "empty", "reads": [{"buffer": "x", "offset": 4000, "bytes": 200}]}]})";
  CHECK_THAT(error_of(declared), contains("/nodes/0/reads/0: out of range"));
  // Round trip keeps the options.
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(inferred, "t.json");
  CHECK(spec.infer_edges);
  CHECK(flowdsl::parse_graph(flowdsl::to_json_text(spec), "again").infer_edges);
}

TEST_CASE("kernel files declare extents in the file", "[json]") {
  const std::string text = R"({"version": 1, "name": "t", "kernel_files": [{"name": "ext", "file": "k.ptx", "symbol": "k",
      "params": [{"name": "n", "type": "i64"}, {"name": "out", "type": "f32*", "extent": "n"}]}],
      "buffers": [{"name": "x", "type": "f32", "count": 16}],
      "nodes": [{"name": "k", "kind": "kernel", "kernel": "ext", "grid": 1, "block": 1, "args": {"n": 17, "out": "x"}}]})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "t.json");
  REQUIRE(spec.kernel_files.size() == 1);
  CHECK(spec.kernel_files[0].params[1].extent == "n");
  try {
    flowdsl::check_graph(spec, registry(), {}, "t.json");
    FAIL("accepted");
  } catch (const flowdsl::JsonError& e) {
    CHECK_THAT(e.what(), contains("/nodes/0/args/out: node 'k' (kernel): argument 'out' writes 17 elements (n) of buffer 'x' (16)"));
  }
  std::string bad = text;
  bad.replace(bad.find("\"extent\": \"n\""), 13, "\"extent\": \"q\"");
  try {
    flowdsl::check_graph(flowdsl::parse_graph(bad, "t.json"), registry(), {}, "t.json");
    FAIL("accepted");
  } catch (const flowdsl::JsonError& e) {
    CHECK_THAT(e.what(), contains("/kernel_files/0: flowdsl: kernel 'ext': the extent 'q' of parameter 'out' is not valid"));
  }
}
