// SPDX-License-Identifier: Apache-2.0
// The small-batch linear layers of a decoder against the host reference: linear, linear_gated,
// linear_norm and the residual forms (flowdsl's small-batch kernel, weights [out, in]), cuBLASLt's
// linear call on the same layout, and advance_positions.
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

/// silu(gate) * up of each row of gate_up ([m, 2k]) as the kernels round it: silu to T, then the
/// product to T (silu in float on the device and in double here may round to different T values).
template <class T>
std::vector<float> gated_rows(const std::vector<float>& gate_up, int m, int k) {
  std::vector<float> act(std::size_t(m) * k);
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < k; ++c) {
      const double g = gate_up[std::size_t(r) * 2 * k + c], u = gate_up[std::size_t(r) * 2 * k + k + c];
      const float silu = to_float(from_float<T>(float(g / (1.0 + std::exp(-g)))));
      act[std::size_t(r) * k + c] = to_float(from_float<T>(float(silu * u)));
    }
  }
  return act;
}

/// The buffers of one linear node: x and w uploaded, y poisoned.
template <class T>
struct LinearBuffers {
  DeviceBuffer<T> x, w, y;
  LinearBuffers(const std::vector<float>& host_x, const std::vector<float>& host_w, std::size_t outputs)
      : x(host_x.size()), w(host_w.size()), y(outputs) {
    upload(x, host_x);
    upload(w, host_w);
    y.poison();
  }
  const T* input() const { return static_cast<const T*>(x.get()); }
  const T* weights() const { return static_cast<const T*>(w.get()); }
};

/// Runs `graph` and checks y against input w^T (linear_mismatches).
template <class T>
void check_product(flowdsl::Graph& graph, const LinearBuffers<T>& buffers, int m, int n, int k,
                   const std::vector<float>& input, const std::vector<float>& w, double rel) {
  Runner runner;
  runner.run(graph);
  std::int64_t first = -1;
  const std::size_t bad = linear_mismatches(download(buffers.y), m, n, k, input, w, rel, &first);
  INFO("first mismatch at " << first);
  CHECK(bad == 0);
}

struct Shape {
  int m, n, k;
};
// Aligned rows (16-byte loads), rows past one pass of 8, k not a multiple of the vector (the
// scalar path), features fewer than the warps of a block, one row of one element; for the
// tensor-core path (16-bit types, k a multiple of 32): rows past one pass of 16 (20, 33), k of
// one step (fewer steps than warps), a long k, features not a multiple of 16. On the warp-a-feature
// path the normed and gated forms stage their rows in shared memory where they fit (one row of
// 2048, 8192 or 16384 16-bit inputs; 4 rows of 2048 floats, 8 of 1024) and recompute them at each
// weight where they do not (8 rows of 2048 floats, one of 16384).
const Shape shapes[] = {{1, 2048, 2048}, {4, 3072, 2048}, {8, 1000, 1024}, {16, 777, 2048}, {3, 129, 517},
                        {13, 64, 8},     {1, 1, 1},       {2, 5, 3},       {20, 100, 32},   {9, 40, 8192},
                        {33, 17, 96},    {1, 300, 8192},  {1, 20, 16384},  {12, 70, 512}};

}  // namespace

TEMPLATE_TEST_CASE("linear multiplies by weights in [out, in] layout", "[kernels][decoder][linear]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    INFO("type " << type_name<T>() << ", m " << s.m << ", n " << s.n << ", k " << s.k);
    const std::vector<float> x = random_values<T>(std::size_t(s.m) * s.k, 31), w = random_values<T>(std::size_t(s.n) * s.k, 32);
    LinearBuffers<T> b(x, w, std::size_t(s.m) * s.n);
    flowdsl::Graph g;
    fk::linear(g, "linear", s.m, s.n, s.k, b.input(), b.weights(), b.y.get());
    check_product(g, b, s.m, s.n, s.k, x, w, tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("linear_gated multiplies silu(gate) * up by the weights", "[kernels][decoder][linear]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    INFO("type " << type_name<T>() << ", m " << s.m << ", n " << s.n << ", k " << s.k);
    const std::vector<float> gate_up = random_values<T>(std::size_t(s.m) * 2 * s.k, 33, -3.0f, 3.0f),
                             w = random_values<T>(std::size_t(s.n) * s.k, 34);
    LinearBuffers<T> b(gate_up, w, std::size_t(s.m) * s.n);
    flowdsl::Graph g;
    fk::linear_gated(g, "down", s.m, s.n, s.k, b.input(), b.weights(), b.y.get());
    check_product(g, b, s.m, s.n, s.k, gated_rows<T>(gate_up, s.m, s.k), w, 2 * tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("linear_norm multiplies rms_norm(x) * g by the weights", "[kernels][decoder][linear]", KERNEL_TYPES) {
  using T = TestType;
  constexpr float eps = 1e-5f;
  for (const Shape s : shapes) {
    INFO("type " << type_name<T>() << ", m " << s.m << ", n " << s.n << ", k " << s.k);
    const std::vector<float> x = random_values<T>(std::size_t(s.m) * s.k, 37, -2.0f, 2.0f),
                             g = random_values<T>(std::size_t(s.k), 38, 0.5f, 1.5f),
                             w = random_values<T>(std::size_t(s.n) * s.k, 39);
    // The normalised rows as the kernel rounds them: the scale in float, x * scale to T, then
    // the product with g to T (a last-bit difference of the scale flips a rounding rarely).
    std::vector<float> h(x.size());
    for (int r = 0; r < s.m; ++r) {
      double squares = 0;
      for (int c = 0; c < s.k; ++c) squares += double(x[std::size_t(r) * s.k + c]) * x[std::size_t(r) * s.k + c];
      const float scale = float(1.0 / std::sqrt(squares / s.k + eps));
      for (int c = 0; c < s.k; ++c) {
        const float v = to_float(from_float<T>(x[std::size_t(r) * s.k + c] * scale));
        h[std::size_t(r) * s.k + c] = to_float(from_float<T>(v * g[std::size_t(c)]));
      }
    }
    LinearBuffers<T> b(x, w, std::size_t(s.m) * s.n);
    DeviceBuffer<T> dg(g.size());
    upload(dg, g);
    flowdsl::Graph graph;
    fk::linear_norm(graph, "qkv", s.m, s.n, s.k, eps, b.input(), static_cast<const T*>(dg.get()), b.weights(), b.y.get());
    // The scale in float here and in double in the reference may round a normalised value apart.
    check_product(graph, b, s.m, s.n, s.k, h, w, 2 * tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("The residual forms add the rounded product into y", "[kernels][decoder][linear]", KERNEL_TYPES) {
  using T = TestType;
  for (const bool gated_input : {false, true}) {
    for (const Shape s : shapes) {
      INFO("type " << type_name<T>() << (gated_input ? ", gated" : "") << ", m " << s.m << ", n " << s.n << ", k " << s.k);
      const std::size_t width = gated_input ? 2 * std::size_t(s.k) : std::size_t(s.k);
      const std::vector<float> x = random_values<T>(std::size_t(s.m) * width, 40, -3.0f, 3.0f),
                               w = random_values<T>(std::size_t(s.n) * s.k, 41),
                               y0 = random_values<T>(std::size_t(s.m) * s.n, 42, -4.0f, 4.0f);
      const std::vector<float> input = gated_input ? gated_rows<T>(x, s.m, s.k) : x;
      LinearBuffers<T> b(x, w, y0.size());
      upload(b.y, y0);
      flowdsl::Graph graph;
      if (gated_input) {
        fk::linear_gated_residual(graph, "down", s.m, s.n, s.k, b.input(), b.weights(), b.y.get());
      } else {
        fk::linear_residual(graph, "o", s.m, s.n, s.k, b.input(), b.weights(), b.y.get());
      }
      Runner runner;
      runner.run(graph);
      // y - y0 is the product, up to the roundings of the product and of the sum to T: within
      // the product's tolerance (as linear's) plus the sum's rounding, relative to |y0|.
      const std::vector<float> got = download(b.y);
      std::vector<float> ax(input.size()), aw(w.size());
      for (std::size_t i = 0; i < input.size(); ++i) ax[i] = std::fabs(input[i]);
      for (std::size_t i = 0; i < w.size(); ++i) aw[i] = std::fabs(w[i]);
      const std::vector<double> want = ref::matmul(s.m, s.n, s.k, input, transposed(w, s.n, s.k), {}, 0);
      const std::vector<double> scale = ref::matmul(s.m, s.n, s.k, ax, transposed(aw, s.n, s.k), {}, 0);
      const double rel = 2 * tolerance<T>();
      std::size_t bad = 0;
      std::int64_t first = -1;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double added = double(got[i]) - y0[i];
        if (!(std::fabs(added - want[i]) <= rel * (std::fabs(want[i]) + std::fabs(y0[i]) + 1e-3 * scale[i]) + 1e-6 * scale[i])) {
          if (bad == 0) first = std::int64_t(i);
          ++bad;
        }
      }
      INFO("first mismatch at " << first);
      CHECK(bad == 0);
    }
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
