// SPDX-License-Identifier: Apache-2.0
// The small-batch linear layers of a decoder against the host reference: linear and
// linear_gated (flowdsl's matrix-vector kernel, weights [out, in]), cuBLASLt's linear call on the
// same layout, and advance_positions.
#include "flowdsl/cublaslt.hpp"
#include "kernel_test_support.cuh"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {

/// w [n, k] as [k, n], for reference::matmul.
std::vector<float> transposed(const std::vector<float>& w, int n, int k) {
  std::vector<float> t(w.size());
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < k; ++c) t[std::size_t(c) * n + r] = w[std::size_t(r) * k + c];
  }
  return t;
}

/// Mismatches of y against x w^T, each within `rel` of the sum of |x_i w_i| (the scale of the
/// accumulation's rounding) and of the value (its rounding to T).
std::size_t linear_mismatches(const std::vector<float>& got, int m, int n, int k, const std::vector<float>& x,
                              const std::vector<float>& w, double rel, std::int64_t* first) {
  std::vector<float> ax(x.size()), aw(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) aw[i] = std::fabs(w[i]);
  const std::vector<double> want = ref::matmul(m, n, k, x, transposed(w, n, k), {}, 0);
  const std::vector<double> scale = ref::matmul(m, n, k, ax, transposed(aw, n, k), {}, 0);
  std::size_t bad = got.size() == want.size() ? 0 : got.size() + 1;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= rel * (std::fabs(want[i]) + 1e-3 * scale[i]) + 1e-6 * scale[i])) {
      if (bad == 0 && first != nullptr) *first = std::int64_t(i);
      ++bad;
    }
  }
  return bad;
}

struct Shape {
  int m, n, k;
};
// Aligned rows (16-byte loads), rows past one pass of 8, k not a multiple of the vector (the
// scalar path), features fewer than the warps of a block, one row of one element.
const Shape shapes[] = {{1, 2048, 2048}, {4, 3072, 2048}, {8, 1000, 1024}, {16, 777, 2048}, {3, 129, 517},
                        {13, 64, 8},     {1, 1, 1},       {2, 5, 3}};

}  // namespace

TEMPLATE_TEST_CASE("linear multiplies by weights in [out, in] layout", "[kernels][decoder][linear]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    INFO("type " << type_name<T>() << ", m " << s.m << ", n " << s.n << ", k " << s.k);
    const std::vector<float> x = random_values<T>(std::size_t(s.m) * s.k, 31), w = random_values<T>(std::size_t(s.n) * s.k, 32);
    DeviceBuffer<T> dx(x.size()), dw(w.size()), dy(std::size_t(s.m) * s.n);
    upload(dx, x);
    upload(dw, w);
    dy.poison();
    flowdsl::Graph g;
    fk::linear(g, "linear", s.m, s.n, s.k, static_cast<const T*>(dx.get()), static_cast<const T*>(dw.get()), dy.get());
    Runner runner;
    runner.run(g);
    std::int64_t first = -1;
    const std::size_t bad = linear_mismatches(download(dy), s.m, s.n, s.k, x, w, tolerance<T>(), &first);
    INFO("first mismatch at " << first);
    CHECK(bad == 0);
  }
}

TEMPLATE_TEST_CASE("linear_gated multiplies silu(gate) * up by the weights", "[kernels][decoder][linear]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    INFO("type " << type_name<T>() << ", m " << s.m << ", n " << s.n << ", k " << s.k);
    const std::vector<float> gate_up = random_values<T>(std::size_t(s.m) * 2 * s.k, 33, -3.0f, 3.0f),
                             w = random_values<T>(std::size_t(s.n) * s.k, 34);
    // The activation as the kernel rounds it: silu to T, then the product to T.
    std::vector<float> act(std::size_t(s.m) * s.k);
    for (int r = 0; r < s.m; ++r) {
      for (int c = 0; c < s.k; ++c) {
        const double g = gate_up[std::size_t(r) * 2 * s.k + c], u = gate_up[std::size_t(r) * 2 * s.k + s.k + c];
        const float silu = to_float(from_float<T>(float(g / (1.0 + std::exp(-g)))));
        act[std::size_t(r) * s.k + c] = to_float(from_float<T>(float(silu * u)));
      }
    }
    DeviceBuffer<T> dgu(gate_up.size()), dw(w.size()), dy(std::size_t(s.m) * s.n);
    upload(dgu, gate_up);
    upload(dw, w);
    dy.poison();
    flowdsl::Graph g;
    fk::linear_gated(g, "down", s.m, s.n, s.k, static_cast<const T*>(dgu.get()), static_cast<const T*>(dw.get()), dy.get());
    Runner runner;
    runner.run(g);
    std::int64_t first = -1;
    // silu in float on the device and in double here may round to different T values.
    const std::size_t bad = linear_mismatches(download(dy), s.m, s.n, s.k, act, w, 2 * tolerance<T>(), &first);
    INFO("first mismatch at " << first);
    CHECK(bad == 0);
  }
}

TEST_CASE("cuBLASLt's linear call takes weights in [out, in] layout", "[kernels][decoder][linear][cublaslt]") {
  using T = __nv_bfloat16;
  for (const Shape s : {Shape{32, 3072, 2048}, Shape{64, 2048, 8192}, Shape{1, 512, 64}, Shape{7, 100, 24}}) {
    INFO("m " << s.m << ", n " << s.n << ", k " << s.k);
    const std::vector<float> x = random_values<T>(std::size_t(s.m) * s.k, 35), w = random_values<T>(std::size_t(s.n) * s.k, 36);
    DeviceBuffer<T> dx(x.size()), dw(w.size()), dy(std::size_t(s.m) * s.n);
    upload(dx, x);
    upload(dw, w);
    dy.poison();
    flowdsl::Graph g;
    fk::cublaslt_linear<T, T>(g, "linear", s.m, s.n, s.k, static_cast<const T*>(dx.get()), static_cast<const T*>(dw.get()),
                              nullptr, fk::Epilogue::none, dy.get());
    Runner runner;
    runner.run(g);
    std::int64_t first = -1;
    const std::size_t bad = linear_mismatches(download(dy), s.m, s.n, s.k, x, w, tolerance<T>(), &first);
    INFO("first mismatch at " << first);
    CHECK(bad == 0);
  }
}

TEST_CASE("advance_positions adds one to each token's position", "[kernels][decoder]") {
  for (const int tokens : {1, 7, 300}) {
    std::vector<std::int32_t> positions(std::size_t(tokens) + 1);
    for (int t = 0; t <= tokens; ++t) positions[std::size_t(t)] = 3 * t;
    DeviceBuffer<std::int32_t> d(positions.size());
    CUDA_REQUIRE(cudaMemcpy(d.get(), positions.data(), positions.size() * 4, cudaMemcpyHostToDevice));
    flowdsl::Graph g;
    fk::advance_positions(g, "advance", tokens, d.get());
    Runner runner;
    runner.run(g);
    runner.run(g);
    std::vector<std::int32_t> got(positions.size());
    CUDA_REQUIRE(cudaMemcpy(got.data(), d.get(), got.size() * 4, cudaMemcpyDeviceToHost));
    for (int t = 0; t < tokens; ++t) CHECK(got[std::size_t(t)] == 3 * t + 2);
    CHECK(got[std::size_t(tokens)] == 3 * tokens);  // past the tokens: untouched
  }
}
