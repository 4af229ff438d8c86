// SPDX-License-Identifier: Apache-2.0
// Memory nodes (alloc, free): symbolic addresses, the order of every use between alloc and free,
// bounds and hazards on graph memory, the hash, executables per Graph, JSON and DOT.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "graphviz.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;

using flowdsl_test::require_dot_accepts;

namespace {

// Host stand-ins with kernel signatures: nothing is launched.
void square(const float*, float*, int) {}
void square_f32(std::int64_t, const float*, float*) {}
void fill_f32(std::int64_t, float, float*) {}

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("square_f32", square_f32, {"n", "x: n", "y: n"});
    r.add("fill_f32", fill_f32, {"n", "value", "out: n"});
    return true;
  }();
  (void)once;
  return r;
}

float x[64], y[64];

std::vector<std::string> messages(const flowdsl::Graph& g) {
  std::vector<std::string> out;
  for (const auto& d : flowdsl::validate(g.description())) out.push_back(d.message);
  return out;
}

bool has(const std::vector<std::string>& all, const std::string& message) {
  return std::find(all.begin(), all.end(), message) != all.end();
}

/// tmp -> produce (writes tmp) -> consume (reads tmp) -> free_tmp.
struct Scratch {
  Scratch() {
    tmp = g.alloc("tmp", 64 * sizeof(float));
    produce = g.kernel("produce", square).launch(1, 64).args(x, tmp.ptr<float>(), 64).after(tmp);
    consume = g.kernel("consume", square).launch(1, 64).args(tmp.ptr<float>(), y, 64).after(produce);
    free_tmp = g.free("free_tmp", tmp).after(consume);
  }
  flowdsl::Graph g;
  flowdsl::AllocNode tmp{nullptr, 0};
  flowdsl::KernelNode<const float*, float*, int> produce{nullptr, 0}, consume{nullptr, 0};
  flowdsl::NodeHandle free_tmp{nullptr, 0};
};


flowdsl::JsonError json_error(const std::string& text) {
  try {
    flowdsl::check_graph(flowdsl::parse_graph(text, "test.json"), registry(), {}, "test.json");
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;
}

bool has_problem(const flowdsl::JsonError& e, const std::string& pointer, const std::string& message) {
  return std::any_of(e.problems().begin(), e.problems().end(), [&](const flowdsl::JsonProblem& p) {
    return p.pointer == pointer && p.message.find(message) != std::string::npos;
  });
}

// Buffers x and y of 64 f32, then `nodes`.
std::string file_with(const std::string& nodes) {
  return R"({"version": 1, "name": "t", "buffers": [
      {"name": "x", "type": "f32", "count": 64}, {"name": "y", "type": "f32", "count": 64}],
    "nodes": [)" + nodes + "]}";
}

const std::string tmp_node = R"({"name": "tmp", "kind": "alloc", "bytes": 256})";
const std::string produce_node =
    R"({"name": "produce", "kind": "kernel", "kernel": "square_f32", "grid": 1, "block": 64,
        "args": {"n": 64, "x": "x", "y": "tmp"}, "after": ["tmp"]})";
const std::string consume_node =
    R"({"name": "consume", "kind": "kernel", "kernel": "square_f32", "grid": 1, "block": 64,
        "args": {"n": 64, "x": "tmp", "y": "y"}, "after": ["produce"]})";
const std::string free_node = R"({"name": "free_tmp", "kind": "free", "alloc": "tmp", "after": ["consume"]})";

}  // namespace

TEST_CASE("An alloc hands out a symbolic address, which arithmetic keeps within the symbol", "[memory][builder]") {
  Scratch s;
  const flowdsl::Description& d = s.g.description();
  const auto address = reinterpret_cast<std::uintptr_t>(s.tmp.ptr<float>());
  CHECK(flowdsl::symbol::is_symbol(address));
  CHECK(flowdsl::symbol::offset_of(address) == 0);
  REQUIRE(flowdsl::symbol::index_of(address) < d.symbols.size());
  CHECK(d.symbols[flowdsl::symbol::index_of(address)] == s.tmp.id());
  const auto inside = reinterpret_cast<std::uintptr_t>(s.tmp.ptr<float>() + 16);
  CHECK(flowdsl::symbol::index_of(inside) == flowdsl::symbol::index_of(address));
  CHECK(flowdsl::symbol::offset_of(inside) == 64);
  CHECK(std::get<flowdsl::FreeOp>(d.nodes[s.free_tmp.id()].op).memory == address);

  CHECK(messages(s.g).empty());
  CHECK(s.g.plan().graph_memory);
  flowdsl::Graph plain;
  plain.kernel("k", square).launch(1, 64).args(x, y, 64);
  CHECK_FALSE(plain.plan().graph_memory);
}

TEST_CASE("Every use of graph memory runs after its alloc and before its free", "[memory][validation]") {
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 256);
  auto early = g.kernel("early", square).launch(1, 64).args(x, tmp.ptr<float>(), 64);       // no edge from tmp
  g.kernel("late", square).launch(1, 64).args(tmp.ptr<float>(), y, 64).after(tmp);
  auto free_tmp = g.free("free_tmp", tmp).after(tmp, early);
  auto copy = g.memcpy("copy", y, tmp.ptr<char>() + 16, 16).after(free_tmp);                 // after the free
  g.empty("reader").after(tmp).reads(tmp.ptr<char>() + 8, 8).before(free_tmp);                // fine
  const auto all = messages(g);
  CHECK(has(all, "node 'early' (kernel): uses the memory of alloc 'tmp' but does not run after it (no path leads "
                 "from 'tmp' to 'early')"));
  CHECK(has(all, "node 'late' (kernel): uses the memory of alloc 'tmp' but does not run before its free 'free_tmp' "
                 "(no path leads from 'late' to 'free_tmp')"));
  CHECK(has(all, "node 'copy' (memcpy): uses the memory of alloc 'tmp' but does not run before its free 'free_tmp' "
                 "(no path leads from 'copy' to 'free_tmp')"));
  CHECK(all.size() == 3);
  (void)copy;

  // Both names are in the diagnostic's nodes, the user first.
  const auto diagnostics = flowdsl::validate(g.description());
  REQUIRE_FALSE(diagnostics.empty());
  CHECK(diagnostics[0].nodes == std::vector<std::string>{"early", "tmp"});
  CHECK_THROWS_AS(g.plan(), flowdsl::ValidationError);
}

TEST_CASE("A use inside a body is ordered through the node that holds it", "[memory][validation][nesting]") {
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 256);
  auto stage = g.child("stage").after(tmp);
  stage.body().kernel("inner", square).launch(1, 64).args(x, tmp.ptr<float>(), 64);
  auto free_tmp = g.free("free_tmp", tmp).after(tmp);
  CHECK(messages(g) == std::vector<std::string>{
                           "node 'stage/inner' (kernel): uses the memory of alloc 'tmp' but does not run before its "
                           "free 'free_tmp' (no path leads from 'stage' to 'free_tmp')"});
  free_tmp.after(stage);
  CHECK(messages(g).empty());

  // Memory allocated in a body is used after it by way of the child node; the free sits beside it.
  flowdsl::Graph inner;
  auto c = inner.child("c");
  auto scratch = c.body().alloc("scratch", 256);
  auto use = c.body().kernel("use", square).launch(1, 64).args(scratch.ptr<float>(), y, 64).after(scratch);
  c.body().free("release", scratch).after(use);
  CHECK(messages(inner).empty());
  inner.kernel("outside", square).launch(1, 64).args(scratch.ptr<float>(), y, 64).after(c);
  CHECK(messages(inner) == std::vector<std::string>{
                               "node 'outside' (kernel): uses the memory of alloc 'c/scratch' but does not run before "
                               "its free 'c/release' (no path leads from 'outside' to 'c')"});
}

TEST_CASE("Frees are checked: once each, in the body of their alloc, after it, of an alloc", "[memory][validation]") {
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 256);
  g.free("f1", tmp).after(tmp);
  g.free("f2", tmp).after(tmp);
  auto other = g.alloc("other", 64);
  g.free("early_free", other);
  auto c = g.child("c").after(tmp);
  auto lost = g.alloc("lost", 64);
  c.body().free("inner_free", lost);
  auto all = messages(g);
  CHECK(has(all, "node 'f2' (free): frees alloc 'tmp', which 'f1' frees already: an allocation is freed once"));
  CHECK(has(all, "node 'early_free' (free): frees alloc 'other' but does not run after it (no path leads from "
                 "'other' to 'early_free')"));
  CHECK(has(all, "node 'c/inner_free' (free): frees alloc 'lost' of another body: a free sits in the body of its "
                 "alloc"));
  CHECK(all.size() == 3);

  flowdsl::Graph elsewhere;
  auto foreign = elsewhere.alloc("foreign", 64);
  CHECK_THROWS_WITH(g.free("wrong", foreign), contains("free 'wrong' is given an alloc node of another graph"));

  // A hand-made free of something no alloc gave.
  flowdsl::Graph made;
  flowdsl::FreeOp op;
  op.memory = reinterpret_cast<std::uintptr_t>(x);
  made.add<flowdsl::NodeHandle>("bogus", std::move(op));
  CHECK(messages(made) == std::vector<std::string>{
                              "node 'bogus' (free): frees memory that no alloc node of this graph allocated (a free "
                              "takes an alloc node)"});
}

TEST_CASE("An alloc of zero bytes or past 1 TiB is reported; memory nodes stay out of conditional bodies",
          "[memory][validation]") {
  flowdsl::Graph g;
  g.alloc("none", 0);
  g.alloc("huge", (std::size_t{1} << 40) + 1);
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1});
  auto inside = loop.body().alloc("inside", 64);
  loop.body().free("inside_free", inside).after(inside);
  const auto all = messages(g);
  CHECK(has(all, "node 'none' (alloc): allocates zero bytes"));
  CHECK(has(all, "node 'huge' (alloc): allocates 1099511627777 bytes, over the 1 TiB a graph allocation may have "
                 "(its symbolic address holds a 40-bit offset)"));
  CHECK(has(all, "node 'loop/inside' (alloc): cannot run inside conditional node 'loop' (CUDA allows kernel, "
                 "memcpy, memset, empty, child, library and conditional nodes there)"));
  CHECK(has(all, "node 'loop/inside_free' (free): cannot run inside conditional node 'loop' (CUDA allows kernel, "
                 "memcpy, memset, empty, child, library and conditional nodes there)"));
}

TEST_CASE("Pointers into graph memory stay inside it: bounds, extents and hazards", "[memory][validation][hazards]") {
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 128);
  auto past = g.memcpy("past", tmp.ptr<char>() + 128, x, 4).after(tmp);
  auto over = g.memcpy("over", tmp.ptr<char>() + 64, x, 128).after(past);
  auto fill = g.kernel("fill", *registry().find("fill_f32")).launch(1, 64);
  fill.set("n", std::int64_t{64}).set("value", 1.0f).set("out", tmp.ptr<float>());
  fill.after(over);
  const auto all = messages(g);
  CHECK(has(all, "node 'past' (memcpy): destination pointer points 128 bytes into the memory of alloc 'tmp', which "
                 "has 128 bytes"));
  CHECK(has(all, "node 'over' (memcpy): writes 128 bytes at offset 64 of buffer 'tmp' (128 bytes)"));
  CHECK(has(all, "node 'fill' (kernel): argument 'out' writes 64 elements (n) of buffer 'tmp' (32)"));

  // Two writers of one allocation with no path between them race, like on any buffer.
  flowdsl::Graph race;
  auto scratch = race.alloc("scratch", 256);
  for (const char* name : {"one", "two"}) {
    auto k = race.kernel(name, *registry().find("fill_f32")).launch(1, 64).after(scratch);
    k.set("n", std::int64_t{64}).set("value", 1.0f).set("out", scratch.ptr<float>());
  }
  CHECK(messages(race) == std::vector<std::string>{
                              "hazard: nodes 'one' and 'two' touch bytes [0, 256) of buffer 'scratch' (both write) "
                              "with no path between them: add an edge between them"});
}

TEST_CASE("An allocation's size is structure; which memory a node uses is a parameter", "[memory][hash]") {
  Scratch a, b;
  CHECK(a.g.topology_hash() == b.g.topology_hash());
  flowdsl::Graph bigger;
  auto tmp = bigger.alloc("tmp", 128 * sizeof(float));
  auto produce = bigger.kernel("produce", square).launch(1, 64).args(x, tmp.ptr<float>(), 64).after(tmp);
  auto consume = bigger.kernel("consume", square).launch(1, 64).args(tmp.ptr<float>(), y, 64).after(produce);
  bigger.free("free_tmp", tmp).after(consume);
  CHECK(bigger.topology_hash() != a.g.topology_hash());

  // Another offset into the memory is an argument like any other.
  const std::uint64_t before = a.g.topology_hash();
  a.consume.arg<0>(a.tmp.ptr<float>() + 8);
  CHECK(a.g.topology_hash() == before);
}

TEST_CASE("A parameter that moves a use into graph memory is checked before the update", "[memory][runtime]") {
  flowdsl_test::Record record;
  flowdsl::Runtime rt = flowdsl_test::make_runtime(record);
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 256);
  auto k = g.kernel("k", square).launch(1, 64).args(x, y, 64);  // not ordered with tmp: fine while it uses x, y
  g.free("free_tmp", tmp).after(tmp);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::instantiated);
  k.arg<1>(tmp.ptr<float>());
  CHECK_THROWS_WITH(rt.launch(g), contains("node 'k' (kernel): uses the memory of alloc 'tmp' but does not run after it"));
  CHECK(record.updates == 0);
  k.arg<1>(y);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::updated);
}

TEST_CASE("Graphs holding memory nodes get executables of their own", "[memory][runtime]") {
  flowdsl_test::Record record;
  flowdsl::Runtime rt = flowdsl_test::make_runtime(record);
  Scratch a, b;
  REQUIRE(a.g.topology_hash() == b.g.topology_hash());
  CHECK(rt.launch(a.g).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.explain(b.g).text() ==
        "miss: no executable of this graph is cached (its executables are its own)");
  CHECK(rt.launch(b.g).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.launch(a.g).kind == flowdsl::LaunchKind::hit);  // its own, untouched by b
  CHECK(rt.launch(b.g).kind == flowdsl::LaunchKind::hit);
  a.produce.arg<2>(32);
  const flowdsl::LaunchReport report = rt.launch(a.g);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  const flowdsl::RuntimeStatistics stats = rt.statistics();
  CHECK(stats.misses == 2);
  CHECK(stats.private_executables == 2);
  CHECK(record.instantiations == 2);
  CHECK(rt.size() == 2);

  // Graphs without memory nodes still share one.
  flowdsl::Graph p, q;
  for (flowdsl::Graph* g : {&p, &q}) g->kernel("k", square).launch(1, 64).args(x, y, 64);
  rt.launch(p);
  rt.launch(q);
  CHECK(rt.statistics().private_executables == 2);
  CHECK(record.instantiations == 3);
}

TEST_CASE("A graph holding memory nodes copied into a body keeps its memory its own", "[memory][nesting]") {
  Scratch s;
  flowdsl::Graph outer;
  auto c = outer.child("c", s.g);
  const flowdsl::Description& d = outer.description();
  REQUIRE(d.nodes.size() == 5);  // c, then the copies of tmp, produce, consume, free_tmp
  CHECK(d.nodes[4].parent == c.id());
  const auto& free = std::get<flowdsl::FreeOp>(d.nodes[4].op);
  const std::uint32_t index = flowdsl::symbol::index_of(free.memory);
  REQUIRE(index < d.symbols.size());
  CHECK(flowdsl::node_path(d, d.symbols[index]) == "c/tmp");
  const auto& copy_consume = std::get<flowdsl::KernelOp>(d.nodes[3].op);
  CHECK(copy_consume.args.word(0) == free.memory);
  CHECK(messages(outer).empty());
}

TEST_CASE("Allocs travel through JSON: referenced by name where a buffer goes, freed by name", "[memory][json]") {
  const std::string text = file_with(tmp_node + "," + produce_node + "," + consume_node + "," + free_node);
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
  const flowdsl::BufferAddresses at{{"x", x}, {"y", y}};
  const flowdsl::Graph bound = flowdsl::bind_graph(spec, at, registry());
  CHECK(bound.plan().graph_memory);

  // The same graph in C++ hashes equal, and writes back to a file that binds equal again.
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 256);
  auto produce = g.kernel("produce", *registry().find("square_f32")).launch(1, 64).after(tmp);
  produce.set("n", std::int64_t{64}).set("x", static_cast<const float*>(x)).set("y", tmp.ptr<float>());
  auto consume = g.kernel("consume", *registry().find("square_f32")).launch(1, 64).after(produce);
  consume.set("n", std::int64_t{64}).set("x", static_cast<const float*>(tmp.ptr<float>())).set("y", y);
  g.free("free_tmp", tmp).after(consume);
  CHECK(g.topology_hash() == bound.topology_hash());
  const std::vector<flowdsl::BufferSpec> buffers = {{"x", flowdsl::ScalarType::f32, 64, {}, false},
                                                    {"y", flowdsl::ScalarType::f32, 64, {}, false}};
  const flowdsl::GraphSpec written = flowdsl::describe_graph(g, "t", buffers, at, registry());
  CHECK(written.nodes[1].fields.to_json().at("args").at("y") == "tmp");
  CHECK(written.nodes[3].fields.to_json() == nlohmann::json{{"alloc", "tmp"}});
  const flowdsl::GraphSpec read = flowdsl::parse_graph(flowdsl::to_json_text(written));
  CHECK(flowdsl::bind_graph(read, at, registry()).topology_hash() == g.topology_hash());

  // A node may name an alloc declared after it in the file.
  const std::string later = file_with(R"({"name": "clear", "kind": "memset", "dst": {"buffer": "tmp", "offset": 8},
                                           "value": 0, "count": 8, "after": ["tmp"]},)" + tmp_node);
  CHECK(flowdsl::bind_graph(flowdsl::parse_graph(later), at, registry()).size() == 2);
}

TEST_CASE("Graph files report memory-node problems at their JSON pointers", "[memory][json]") {
  CHECK(has_problem(json_error(file_with(R"({"name": "f", "kind": "free", "alloc": "x"})")), "/nodes/0/alloc",
                    "'x' is a buffer, not an alloc: a free releases an alloc node's memory"));
  CHECK(has_problem(json_error(file_with(R"({"name": "f", "kind": "free", "alloc": "nope"})")), "/nodes/0/alloc",
                    "unknown alloc 'nope'"));
  CHECK(has_problem(json_error(file_with(R"({"name": "x", "kind": "alloc", "bytes": 8})")), "/nodes/0/name",
                    "alloc 'x' has the name of a buffer"));
  CHECK(has_problem(json_error(file_with(tmp_node + "," + R"({"name": "c", "kind": "child", "nodes": [)" + tmp_node +
                                         "]}")),
                    "/nodes/1/nodes/0/name", "alloc 'tmp' is declared twice (also at /nodes/0)"));
  CHECK(has_problem(json_error(file_with(R"({"name": "tmp", "kind": "alloc", "bytes": "many"})")), "/nodes/0/bytes",
                    "expected a non-negative integer"));

  std::string beyond = produce_node;
  beyond.replace(beyond.find("\"y\": \"tmp\""), 10, R"("y": {"buffer": "tmp", "offset": 300})");
  CHECK(has_problem(json_error(file_with(tmp_node + "," + beyond)), "/nodes/1/args/y",
                    "out of range: 0 bytes at offset 300 overrun alloc 'tmp' of 256 bytes"));
  std::string near_end = produce_node;
  near_end.replace(near_end.find("\"y\": \"tmp\""), 10, R"("y": {"buffer": "tmp", "offset": 200})");
  CHECK(has_problem(json_error(file_with(tmp_node + "," + near_end)), "/nodes/1/args/y",
                    "argument 'y' writes 64 elements (n) of buffer 'tmp' (14 after offset 200)"));
  std::string unordered = produce_node;
  const std::string after_tmp = R"(, "after": ["tmp"])";
  unordered.erase(unordered.find(after_tmp), after_tmp.size());
  CHECK(has_problem(json_error(file_with(tmp_node + "," + unordered)), "/nodes/1",
                    "node 'produce' (kernel): uses the memory of alloc 'tmp' but does not run after it"));
}

TEST_CASE("DOT draws allocs and frees as cylinders, with each allocation's lifetime", "[memory][dot]") {
  Scratch s;
  const std::string dot = flowdsl::to_dot(s.g);
  CHECK_THAT(dot, contains(R"(n0 [label="tmp\nalloc 256 bytes", fillcolor=lightpink, shape=cylinder];)"));
  CHECK_THAT(dot, contains(R"(n3 [label="free_tmp\nfree 'tmp'", fillcolor=lightpink, shape=cylinder];)"));
  CHECK_THAT(dot, contains(R"(n0 -> n3 [style=dashed, color=firebrick, fontcolor=firebrick, fontname="Helvetica", label="256 bytes"];)"));
  require_dot_accepts(dot, "dot_memory.dot");

  // With arguments shown, a symbolic address reads as the memory it stands for.
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 64);
  g.memcpy("copy", y, tmp.ptr<char>() + 16, 16).after(tmp);
  flowdsl::DotOptions options;
  options.show_arguments = true;
  CHECK_THAT(flowdsl::to_dot(g, options), contains("tmp+16 -> 0x"));
}
