// SPDX-License-Identifier: Apache-2.0
// Debug mode on a real GPU: a correct graph gives the graph launch's results; a NaN written into
// a declared output names the node that wrote it, its kernel, launch shape and arguments.
// (An illegal address ruins the CUDA context: that case has its own executable,
// test_debug_fault_gpu.)
#include <cmath>
#include <cstdint>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::contains;
using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

__global__ void scale_kernel(std::int64_t n, float a, const float* x, float* y) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

__global__ void axpy_kernel(std::int64_t n, float a, const float* x, float* y) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// y[i] = sqrt(x[i]): NaN wherever x is negative.
__global__ void sqrt_kernel(std::int64_t n, const float* x, float* y) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = sqrtf(x[i]);
}

flowdsl::KernelRegistry& test_kernels() {
  static flowdsl::KernelRegistry registry;
  static const bool added = [] {
    registry.add("debug_test.scale", scale_kernel, {"n", "a", "x", "y"});
    registry.add("debug_test.axpy", axpy_kernel, {"n", "a", "x", "y"});
    registry.add("debug_test.sqrt", sqrt_kernel, {"n", "x", "y"});
    return true;
  }();
  (void)added;
  return registry;
}

flowdsl::Runtime debug_runtime() {
  flowdsl::RuntimeOptions options;
  options.debug = true;
  options.registry = &test_kernels();
  return flowdsl::Runtime(options);
}

}  // namespace

TEST_CASE("A correct graph gives the same results in debug mode as launched as a CUDA graph", "[debug][gpu]") {
  constexpr std::int64_t n = 100000;
  const unsigned grid = (n + 255) / 256;
  const auto x_host = random_floats(n, 7);
  DeviceBuffer<float> x(n), y(n), t(n);
  x.upload(x_host);

  flowdsl::Graph g;
  auto init = g.memcpy("init", y.get(), x.get(), n * sizeof(float));  // y = x
  auto scale = g.kernel("scale", scale_kernel).launch(grid, 256).args(n, 3.0f, x.get(), t.get()).writes(t.get(), t.bytes());
  auto axpy = g.kernel("axpy", axpy_kernel).launch(grid, 256).args(n, -0.5f, t.get(), y.get()).after(scale).after(init);
  axpy.writes(y.get(), y.bytes());
  std::vector<float> want(n);
  for (std::int64_t i = 0; i < n; ++i) want[i] = -0.5f * (3.0f * x_host[i]) + x_host[i];

  flowdsl::StreamHandle stream = flowdsl::make_stream();
  auto debug = debug_runtime();
  y.poison();
  t.poison();
  const auto report = debug.launch(g, stream);
  CHECK(report.kind == flowdsl::LaunchKind::debug);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  const auto in_debug = y.download();
  CHECK(mismatches(in_debug, want) == 0);
  CHECK(debug.statistics().debug_launches == 1);
  CHECK(debug.statistics().launches == 1);
  CHECK(debug.size() == 0);

  flowdsl::Runtime normal;
  y.poison();
  t.poison();
  CHECK(normal.launch(g, stream).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(y.download() == in_debug);
}

TEST_CASE("A NaN written into a declared output names the node, its kernel, launch shape and arguments",
          "[debug][gpu]") {
  constexpr std::int64_t n = 4096;
  auto x_host = random_floats(n, 11);
  for (float& v : x_host) v = std::fabs(v);
  x_host[1234] = -1.0f;  // sqrt of it is NaN
  DeviceBuffer<float> x(n), y(n), z(n);
  x.upload(x_host);
  y.poison();
  z.poison();

  flowdsl::Graph g;
  auto first = g.kernel("root", *test_kernels().find("debug_test.scale"))
                   .launch(n / 256, 256)
                   .set("n", n)
                   .set("a", 1.0f)
                   .set("x", static_cast<const float*>(x.get()))
                   .set("y", z.get());
  first.writes(z.get(), z.bytes());
  auto culprit = g.kernel("sqrt", *test_kernels().find("debug_test.sqrt"))
                     .launch(n / 256, 256)
                     .set("n", n)
                     .set("x", static_cast<const float*>(z.get()))
                     .set("y", y.get());
  culprit.after(first).reads(z.get(), z.bytes()).writes(y.get(), y.bytes());

  auto debug = debug_runtime();
  try {
    debug.launch(g);
    FAIL("the NaN was not reported");
  } catch (const flowdsl::DebugError& e) {
    CHECK(e.node() == "sqrt");
    CHECK(e.kernel() == "debug_test.sqrt");
    CHECK(e.code() == cudaSuccess);
    CHECK_THAT(e.what(), contains("node 'sqrt' (kernel 'debug_test.sqrt', grid 16x1x1, block 256x1x1"));
    CHECK_THAT(e.what(), contains("n=4096"));
    CHECK_THAT(e.what(), contains("wrote NaN into 1 of 4096 f32 elements of 'y' (first at element 1234)"));
  }
  // The context is still usable: the NaN is data, not a fault.
  CUDA_REQUIRE(cudaDeviceSynchronize());
  const auto y_host = y.download();
  CHECK(std::isnan(y_host[1234]));
  CHECK(y_host[0] == std::sqrt(x_host[0]));
}
