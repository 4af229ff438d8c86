// SPDX-License-Identifier: Apache-2.0
// The builder: nodes, edges, arguments, accesses and change tracking, without a GPU.
#include <cstring>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

// Host stand-ins with kernel signatures: the description stores only the function's address.
void scale(float*, float, int) {}
void touch(int*) {}
void host_fn(void*) {}

template <class T>
T arg_value(const flowdsl::KernelOp& op, std::size_t i) {
  T value;
  std::memcpy(&value, op.args.data(i), sizeof(T));
  return value;
}

const flowdsl::KernelOp& kernel_op(const flowdsl::Graph& g, flowdsl::NodeId id) {
  return std::get<flowdsl::KernelOp>(g.description().nodes[id].op);
}

}  // namespace

TEST_CASE("Builder declares nodes of every kind in order", "[builder]") {
  flowdsl::Graph g;
  float buf[4];
  int value = 0;
  auto up = g.memcpy("upload", buf, buf + 2, 8);
  auto k = g.kernel("scale", scale, "scale").launch(3, 128, 64).args(buf, 2.0f, 4);
  auto fill = g.memset("clear", buf, 0, 16);
  auto join = g.empty("join");
  auto cb = g.host("callback", host_fn, &value);

  REQUIRE(g.size() == 5);
  const auto& nodes = g.description().nodes;
  CHECK(nodes[up.id()].name == "upload");
  CHECK(flowdsl::kind_name(nodes[up.id()].op) == "memcpy");
  CHECK(flowdsl::kind_name(nodes[k.id()].op) == "kernel");
  CHECK(flowdsl::kind_name(nodes[fill.id()].op) == "memset");
  CHECK(flowdsl::kind_name(nodes[join.id()].op) == "empty");
  CHECK(flowdsl::kind_name(nodes[cb.id()].op) == "host");
  CHECK(k.name() == "scale");

  const auto& op = kernel_op(g, k.id());
  CHECK(op.function == reinterpret_cast<const void*>(&scale));
  CHECK(op.kernel_name == "scale");
  CHECK(op.launch.grid == flowdsl::Dim3(3));
  CHECK(op.launch.block == flowdsl::Dim3(128));
  CHECK(op.launch.shared_bytes == 64);
  CHECK(std::get<flowdsl::HostOp>(nodes[cb.id()].op).user_data == &value);
  CHECK(std::get<flowdsl::MemsetOp>(nodes[fill.id()].op).count == 16);
}

TEST_CASE("Kernel arguments are stored by value and converted to the parameter types", "[builder][args]") {
  flowdsl::Graph g;
  float x[2];
  auto k = g.kernel("scale", scale).launch(1, 1).args(x, 3, 7u);  // int -> float, unsigned -> int
  const auto& op = kernel_op(g, k.id());
  REQUIRE(op.args.size() == 3);
  CHECK(arg_value<float*>(op, 0) == x);
  CHECK(arg_value<float>(op, 1) == 3.0f);
  CHECK(arg_value<int>(op, 2) == 7);

  k.arg<1>(0.5);
  CHECK(arg_value<float>(op, 1) == 0.5f);
  CHECK(arg_value<int>(op, 2) == 7);

  std::vector<void*> pointers;
  op.args.pointers(pointers);
  REQUIRE(pointers.size() == 3);
  CHECK(*static_cast<float*>(pointers[1]) == 0.5f);
}

TEST_CASE("Argument slots are aligned to their type", "[builder][args]") {
  flowdsl::ArgumentPack pack;
  const char c = 'x';
  const double d = 1.5;
  pack.append(&c, 1, 1);
  pack.append(&d, sizeof d, alignof(double));
  CHECK(reinterpret_cast<std::uintptr_t>(pack.data(1)) % alignof(double) == 0);
  CHECK(*static_cast<const double*>(pack.data(1)) == 1.5);
  CHECK_THROWS_AS(pack.set(2, &d, sizeof d), flowdsl::UsageError);
  CHECK_THROWS_AS(pack.set(1, &c, 1), flowdsl::UsageError);
  CHECK_THROWS_AS(pack.append(&d, 8, 3), flowdsl::UsageError);
}

TEST_CASE("Dependencies are declared from either side, by handle or by name", "[builder][edges]") {
  flowdsl::Graph g;
  int* p = nullptr;
  auto a = g.kernel("a", touch).launch(1, 1).args(p);
  auto b = g.kernel("b", touch).launch(1, 1).args(p).after(a);
  auto c = g.kernel("c", touch).launch(1, 1).args(p).after("a", b);
  a.before(g.empty("d"));
  g.empty("e").after("later");  // resolved at validation

  const auto& edges = g.description().edges;
  REQUIRE(edges.size() == 5);
  CHECK(edges[0].from.id == a.id());
  CHECK(edges[0].to.id == b.id());
  CHECK(edges[1].from.id == a.id());  // a name already declared resolves at once
  CHECK(edges[2].from.id == b.id());
  CHECK(edges[2].to.id == c.id());
  CHECK(edges[3].from.id == a.id());
  CHECK(edges[3].to.id == g.node("d").id());
  CHECK(edges[4].from.id == flowdsl::no_node);
  CHECK(flowdsl::edge_name(g.description(), edges[4].from) == "later");
  CHECK(g.description().edge_names.size() == 1);  // only the end without an id keeps a name
}

TEST_CASE("An edge to a node declared later resolves in a copy of its graph too", "[builder][edges]") {
  flowdsl::Graph body;
  body.empty("first").after("second");  // "second" is declared after the edge
  body.empty("second");
  flowdsl::Graph g;
  g.empty("before");
  g.child("stage", body).after("before");
  g.child("again", body);
  const auto& d = g.description();
  REQUIRE(d.edge_names.size() == 2);  // one name a copy, kept by the graph that holds it
  CHECK(d.edge_names[0] == "second");
  CHECK(d.edge_names[1] == "second");
  (void)g.plan();  // each named end resolves within its own copy: no unknown node, no cycle
  const std::string dot = flowdsl::to_dot(g);
  CHECK(dot.find("undeclared") == std::string::npos);
}

TEST_CASE("Declared accesses are kept in the description", "[builder][access]") {
  flowdsl::Graph g;
  int buf[8];
  auto k = g.kernel("k", touch).launch(1, 1).args(buf).reads(buf, 16).writes(buf + 4, 16);
  const auto& acc = g.description().nodes[k.id()].accesses;
  REQUIRE(acc.size() == 2);
  CHECK(acc[0].ptr == buf);
  CHECK(acc[0].bytes == 16);
  CHECK(acc[0].mode == flowdsl::AccessMode::read);
  CHECK(acc[1].ptr == buf + 4);
  CHECK(acc[1].mode == flowdsl::AccessMode::write);
}

TEST_CASE("Lookups and handles of another graph are usage errors", "[builder][errors]") {
  flowdsl::Graph g;
  flowdsl::Graph other;
  auto foreign = other.empty("x");
  auto mine = g.empty("y");
  CHECK_THROWS_AS(g.node("missing"), flowdsl::UsageError);
  CHECK_THROWS_WITH(mine.after(foreign), flowdsl_test::contains("another graph"));
  CHECK(g.description().edges.empty());
}

TEST_CASE("Parameter changes are tracked per node, each reported once", "[builder][changes]") {
  flowdsl::Graph g;
  float x[4];
  auto k1 = g.kernel("k1", scale).launch(1, 1).args(x, 1.0f, 4);
  auto k2 = g.kernel("k2", scale).launch(1, 1).args(x, 1.0f, 4).after(k1);
  auto copy = g.memcpy("copy", x, x + 2, 8).after(k2);
  const std::uint64_t v0 = g.parameter_version();

  std::vector<flowdsl::NodeId> changed;
  g.changes_since(v0, changed);
  CHECK(changed.empty());

  k2.arg<1>(2.0f);
  k2.arg<1>(3.0f);
  copy.set(x + 1, x, 4);
  g.changes_since(v0, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{k2.id(), copy.id()});

  const std::uint64_t v1 = g.parameter_version();
  k2.arg<2>(2);
  changed.clear();
  g.changes_since(v1, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{k2.id()});
}

TEST_CASE("The change log stays bounded and exact over many changes", "[builder][changes]") {
  flowdsl::Graph g;
  float x[1];
  auto a = g.kernel("a", scale).launch(1, 1).args(x, 1.0f, 1);
  auto b = g.kernel("b", scale).launch(1, 1).args(x, 1.0f, 1);
  const std::uint64_t start = g.parameter_version();
  for (int i = 0; i < 10000; ++i) a.arg<1>(static_cast<float>(i));
  const std::uint64_t middle = g.parameter_version();
  b.arg<1>(1.0f);
  for (int i = 0; i < 10000; ++i) a.arg<1>(static_cast<float>(i));

  std::vector<flowdsl::NodeId> changed;
  g.changes_since(start, changed);
  std::sort(changed.begin(), changed.end());
  CHECK(changed == std::vector<flowdsl::NodeId>{a.id(), b.id()});
  changed.clear();
  g.changes_since(middle, changed);
  std::sort(changed.begin(), changed.end());
  CHECK(changed == std::vector<flowdsl::NodeId>{a.id(), b.id()});
  changed.clear();
  g.changes_since(g.parameter_version(), changed);
  CHECK(changed.empty());
}

TEST_CASE("Changes made while declaring are reported to any earlier version, in order", "[builder][changes]") {
  flowdsl::Graph g;
  float x[1];
  const std::uint64_t v0 = g.parameter_version();
  auto a = g.kernel("a", scale).launch(1, 1).args(x, 1.0f, 1);
  auto b = g.kernel("b", scale).launch(1, 1).args(x, 1.0f, 1);
  const std::uint64_t v1 = g.parameter_version();
  a.arg<1>(2.0f);
  auto c = g.kernel("c", scale).launch(1, 1).args(x, 1.0f, 1);
  const flowdsl::Graph copy = g;

  std::vector<flowdsl::NodeId> changed;
  g.changes_since(v1, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{a.id(), c.id()});
  changed.clear();
  g.changes_since(v0, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{b.id(), a.id(), c.id()});
  changed.clear();
  copy.changes_since(v0, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{b.id(), a.id(), c.id()});

  b.arg<1>(3.0f);
  auto d = g.kernel("d", scale).launch(1, 1).args(x, 1.0f, 1);
  a.arg<1>(4.0f);
  changed.clear();
  g.changes_since(v0, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{c.id(), b.id(), d.id(), a.id()});
  changed.clear();
  g.changes_since(g.parameter_version(), changed);
  CHECK(changed.empty());
}

TEST_CASE("Parameter changes keep the plan; topology changes replace it", "[builder][plan]") {
  flowdsl::Graph g;
  float x[1];
  auto k = g.kernel("k", scale).launch(1, 1).args(x, 1.0f, 1);
  const flowdsl::Plan* plan = &g.plan();
  const std::uint64_t hash = g.topology_hash();

  k.arg<1>(5.0f);
  CHECK(&g.plan() == plan);
  CHECK(g.topology_hash() == hash);

  k.grid(2);
  CHECK(g.topology_hash() != hash);
}

TEST_CASE("Moving a graph keeps its handles; copying makes an independent graph", "[builder]") {
  flowdsl::Graph g;
  float x[1];
  auto k = g.kernel("k", scale).launch(1, 1).args(x, 1.0f, 1);
  flowdsl::Graph moved = std::move(g);
  k.arg<1>(4.0f);
  CHECK(arg_value<float>(kernel_op(moved, k.id()), 1) == 4.0f);

  flowdsl::Graph copy = moved;
  CHECK(copy.uid() != moved.uid());
  CHECK(copy.topology_hash() == moved.topology_hash());
  k.arg<1>(9.0f);
  CHECK(arg_value<float>(kernel_op(copy, k.id()), 1) == 4.0f);
}

TEST_CASE("Argument packs beyond 8 slots or 64 bytes keep every value", "[builder][args]") {
  flowdsl::ArgumentPack pack;
  std::vector<double> values;
  for (int i = 0; i < 20; ++i) {  // 20 doubles: 160 bytes, 20 slots
    values.push_back(0.5 * i);
    pack.append(&values.back(), sizeof(double), alignof(double), i % 2 == 0);
  }
  const double changed = -1.0;
  pack.set(13, &changed, sizeof changed);
  REQUIRE(pack.size() == 20);
  for (std::size_t i = 0; i < 20; ++i) {
    const double want = i == 13 ? -1.0 : 0.5 * static_cast<double>(i);
    CHECK(*static_cast<const double*>(pack.data(i)) == want);
    CHECK(pack.bound(i) == (i % 2 == 0 || i == 13));
  }
  std::vector<void*> pointers;
  pack.pointers(pointers);
  CHECK(*static_cast<double*>(pointers[19]) == 9.5);
  const flowdsl::ArgumentPack copy = pack;
  CHECK(copy == pack);
  CHECK(copy.data(0) != pack.data(0));  // the copy owns its bytes

  std::vector<unsigned char> huge(flowdsl::ArgumentPack::max_bytes + 1);
  CHECK_THROWS_WITH(pack.append(huge.data(), huge.size(), 1), flowdsl_test::contains("exceed CUDA's limit"));
}
