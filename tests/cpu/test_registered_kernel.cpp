// SPDX-License-Identifier: Apache-2.0
// Kernel nodes of registered kernels: arguments by parameter name, checked against the types.
#include <cstring>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

using flowdsl_test::contains;

namespace {

void axpy(int, float, const float*, float*) {}

template <class T>
T arg_value(const flowdsl::Graph& g, flowdsl::NodeId id, std::size_t i) {
  T value;
  std::memcpy(&value, std::get<flowdsl::KernelOp>(g.description().nodes[id].op).args.data(i), sizeof(T));
  return value;
}

}  // namespace

TEST_CASE("A registered kernel node describes the same kernel node as the typed builder", "[builder][registered]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("axpy", axpy, {"n", "alpha", "x", "y"});
  float x[4], y[4];

  flowdsl::Graph typed;
  typed.kernel("k", axpy, "axpy").launch(2, 64, 16).args(4, 2.0f, x, y);
  flowdsl::Graph named;
  named.kernel("k", info).launch(2, 64, 16).set("n", 4).set("alpha", 2.0f).set("x", x).set("y", y);

  const auto& a = std::get<flowdsl::KernelOp>(typed.description().nodes[0].op);
  const auto& b = std::get<flowdsl::KernelOp>(named.description().nodes[0].op);
  CHECK(b.kernel_name == "axpy");
  CHECK(a.function == b.function);
  CHECK(a.args == b.args);
  CHECK(typed.topology_hash() == named.topology_hash());
}

TEST_CASE("Registered kernel arguments start unset and validation names them", "[builder][registered]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("axpy", axpy, {"n", "alpha", "x", "y"});
  flowdsl::Graph g;
  float y[4];
  g.kernel("k", info).launch(1, 1).set("y", y).set("n", 4);
  CHECK_THROWS_WITH(g.plan(), contains("node 'k' (kernel): argument 1 was never set"));
}

TEST_CASE("Setting a registered kernel's argument changes parameters, not topology", "[builder][registered][changes]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("axpy", axpy, {"n", "alpha", "x", "y"});
  float x[4], y[4];
  flowdsl::Graph g;
  auto k = g.kernel("k", info).launch(1, 32).set("n", 4).set("alpha", 1.0f).set("x", x).set("y", y);
  const flowdsl::Plan* plan = &g.plan();
  const auto version = g.parameter_version();
  k.set("alpha", 3.0f);
  CHECK(&g.plan() == plan);
  std::vector<flowdsl::NodeId> changed;
  g.changes_since(version, changed);
  CHECK(changed == std::vector<flowdsl::NodeId>{k.id()});
  CHECK(arg_value<float>(g, k.id(), 1) == 3.0f);
  const auto hash = g.topology_hash();
  k.block(64);
  CHECK(g.topology_hash() != hash);
}

TEST_CASE("Wrong names, types and sizes of registered kernel arguments are usage errors", "[builder][registered][errors]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("axpy", axpy, {"n", "alpha", "x", "y"});
  flowdsl::Graph g;
  auto k = g.kernel("k", info).launch(1, 1);
  const float* cx = nullptr;
  CHECK_THROWS_WITH(k.set("beta", 1.0f), contains("node 'k' (kernel 'axpy'): no parameter named 'beta' (parameters: n, alpha, x, y)"));
  CHECK_THROWS_WITH(k.set("alpha", 1.0), contains("parameter 'alpha' takes f32, not f64"));
  CHECK_THROWS_WITH(k.set("y", cx), contains("parameter 'y' takes f32*, not const f32*"));
  CHECK_NOTHROW(k.set("x", cx));
  const std::uint64_t wide = 1;
  CHECK_THROWS_WITH(k.set_bytes("n", &wide, sizeof wide), contains("parameter 'n' takes 4 bytes, not 8"));
  const std::int32_t n = 7;
  k.set_bytes("n", &n, sizeof n);
  CHECK(arg_value<std::int32_t>(g, k.id(), 0) == 7);
}
