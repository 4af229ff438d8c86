// SPDX-License-Identifier: Apache-2.0
// The kernel registry: parameter types from signatures, names, and misuse.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>
#include <vector>

#include "catch.hpp"
#include "flowdsl/registry.hpp"

using flowdsl_test::contains;

namespace {

void axpy(int, float, const float*, float*) {}
void mixed(__nv_bfloat16*, const __half*, double, std::uint64_t, long long) {}

}  // namespace

TEST_CASE("Registered kernels take their parameter types from the signature", "[registry]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("axpy", axpy, {"n", "alpha", "x", "y"}, "y = alpha * x + y");
  REQUIRE(info.params.size() == 4);
  CHECK(flowdsl::to_string(info.params[0].type) == "i32");
  CHECK(flowdsl::to_string(info.params[1].type) == "f32");
  CHECK(flowdsl::to_string(info.params[2].type) == "const f32*");
  CHECK(flowdsl::to_string(info.params[3].type) == "f32*");
  CHECK(info.index_of("x") == 2);
  CHECK(info.index_of("nope") == 4);
  CHECK(registry.find("axpy") == &info);
  CHECK(registry.find("other") == nullptr);

  const auto& m = registry.add("mixed", mixed, {"out", "in", "scale", "seed", "count"});
  CHECK(flowdsl::to_string(m.params[0].type) == "bf16*");
  CHECK(flowdsl::to_string(m.params[1].type) == "const f16*");
  CHECK(flowdsl::to_string(m.params[2].type) == "f64");
  CHECK(flowdsl::to_string(m.params[3].type) == "u64");
  CHECK(flowdsl::to_string(m.params[4].type) == "i64");
  CHECK(m.params[2].type.size() == 8);
  REQUIRE(registry.list().size() == 2);
  CHECK(registry.list()[0]->name == "axpy");
}

TEST_CASE("An integer parameter may name its values", "[registry][enum]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("axpy", axpy, {"n: {none, one, two}", "alpha", "x", "y"});
  const flowdsl::KernelParam& n = info.params[0];
  CHECK(n.name == "n");
  CHECK(n.extent.empty());
  CHECK(n.enumerators == std::vector<std::string>{"none", "one", "two"});
  CHECK(n.enumerator(2) == "two");
  CHECK(n.enumerator(3).empty());
  const std::int32_t one = 1;
  CHECK(n.enumerator_at(&one) == "one");
  CHECK_FALSE(info.launch);  // registered without a launch rule: its nodes state their shapes

  flowdsl::KernelRegistry other;
  CHECK_THROWS_WITH(other.add("axpy", axpy, {"n", "alpha: {a, b}", "x", "y"}),
                    contains("parameter 'alpha' has named values but is not an integer scalar (f32)"));
  CHECK_THROWS_WITH(other.add("axpy", axpy, {"n: {a, a}", "alpha", "x", "y"}), contains("an empty or repeated value name"));
}

TEST_CASE("Scalar type names round-trip", "[registry]") {
  for (auto t : {flowdsl::ScalarType::i8, flowdsl::ScalarType::u64, flowdsl::ScalarType::f16, flowdsl::ScalarType::bf16,
                 flowdsl::ScalarType::f64}) {
    flowdsl::ScalarType parsed{};
    REQUIRE(flowdsl::parse_scalar_type(flowdsl::to_string(t), parsed));
    CHECK(parsed == t);
  }
  flowdsl::ScalarType unused{};
  CHECK_FALSE(flowdsl::parse_scalar_type("float", unused));
}

TEST_CASE("Registry misuse is reported by name", "[registry][errors]") {
  flowdsl::KernelRegistry registry;
  registry.add("axpy", axpy, {"n", "alpha", "x", "y"});
  CHECK_THROWS_WITH(registry.add("axpy", axpy, {"n", "alpha", "x", "y"}), contains("'axpy' is already registered"));
  CHECK_THROWS_WITH(registry.add("short", axpy, {"n", "alpha"}), contains("takes 4 parameters but 2 names"));
  CHECK_THROWS_WITH(registry.add("dup", axpy, {"n", "n", "x", "y"}), contains("repeated parameter name 'n'"));
  CHECK_THROWS_AS(registry.add(flowdsl::KernelInfo{"null", nullptr, {}, {}, {}, false, {}, nullptr, {}, {}, nullptr}), flowdsl::UsageError);
  CHECK(registry.list().size() == 1);
}

namespace {
struct Window {
  int n;
  float twice_alpha;
};
void windowed(int, float, const float*, float*, Window) {}
void derive_window(const void* const* arguments, void* out) {
  Window w{};
  std::memcpy(&w.n, arguments[0], sizeof w.n);
  float alpha = 0;
  std::memcpy(&alpha, arguments[1], sizeof alpha);
  w.twice_alpha = 2 * alpha;
  std::memcpy(out, &w, sizeof w);
}
constexpr flowdsl::DerivedParameters window_params{derive_window, sizeof(Window), alignof(Window)};
}  // namespace

TEST_CASE("A kernel with derived parameters registers the arguments before them", "[registry]") {
  flowdsl::KernelRegistry registry;
  const auto& info = registry.add("windowed", windowed, {"n", "alpha", "x", "y"}, "", false, window_params);
  REQUIRE(info.params.size() == 4);
  CHECK(flowdsl::to_string(info.params[3].type) == "f32*");
  CHECK(info.derived == window_params);

  CHECK_THROWS_WITH(registry.add("names", windowed, {"n", "alpha", "x", "y", "w"}, "", false, window_params),
                    contains("takes 4 arguments before its derived parameters but 5 names"));
  CHECK_THROWS_WITH(registry.add("size", windowed, {"n", "alpha", "x", "y"}, "", false,
                                 flowdsl::DerivedParameters{derive_window, 4, 4}),
                    contains("be 8 bytes, the size of its last parameter"));
  CHECK_THROWS_WITH(registry.add("none", windowed, {"n", "alpha", "x", "y"}, "", false, flowdsl::DerivedParameters{}),
                    contains("must be computed"));
  flowdsl::KernelInfo odd{"odd", reinterpret_cast<const void*>(windowed), {}, {}, {}, false, {}, nullptr, {}, {}, nullptr};
  odd.derived = flowdsl::DerivedParameters{derive_window, 8, 3};
  CHECK_THROWS_WITH(registry.add(odd), contains("aligned to 3"));
  CHECK(registry.list().size() == 1);
}
