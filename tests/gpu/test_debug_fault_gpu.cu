// SPDX-License-Identifier: Apache-2.0
// Debug mode meets an out-of-bounds write: the error names the node that made it, its kernel
// and launch shape. An illegal address leaves the CUDA context unusable, so this executable
// holds this one test and nothing runs after it.
#include <cstdint>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::contains;
using flowdsl_test::DeviceBuffer;

namespace {

__global__ void fill_kernel(std::int64_t n, float value, float* y) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = value;
}

// Writes far past the end of its buffer: element n * 1024 * 1024 * 64 (256 GiB beyond y for n =
// 1024), which no allocation of this test reaches.
__global__ void far_write_kernel(std::int64_t n, float* y) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i == 0) y[n * 1024 * 1024 * 64] = 1.0f;
}

}  // namespace

TEST_CASE("An illegal address in debug mode names the node, its kernel and launch shape", "[debug][gpu][fault]") {
  constexpr std::int64_t n = 1024;
  DeviceBuffer<float> y(n);
  flowdsl::Graph g;
  auto fill = g.kernel("fill", fill_kernel, "fill_kernel").launch(4, 256).args(n, 2.0f, y.get());
  g.kernel("out_of_bounds", far_write_kernel, "far_write_kernel").launch(4, 256).args(n, y.get()).after(fill);

  flowdsl::RuntimeOptions options;
  options.debug = true;
  flowdsl::Runtime runtime(options);
  try {
    runtime.launch(g);
    FAIL("the illegal address was not reported");
  } catch (const flowdsl::DebugError& e) {
    INFO(e.what());
    CHECK(e.node() == "out_of_bounds");
    CHECK(e.kernel() == "far_write_kernel");
    CHECK(e.code() == cudaErrorIllegalAddress);
    CHECK_THAT(e.what(), contains("node 'out_of_bounds' (kernel 'far_write_kernel', grid 4x1x1, block 256x1x1"));
    CHECK_THAT(e.what(), contains("cudaErrorIllegalAddress"));
  }
}
