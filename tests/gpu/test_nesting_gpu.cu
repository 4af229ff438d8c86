// SPDX-License-Identifier: Apache-2.0
// Child graphs on a GPU: results against host references, nodes inside bodies updated in place
// (not re-instantiated), and the same bytes as the eager launch.
#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

__global__ void scale_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

__global__ void add_kernel(int n, const float* a, const float* b, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

constexpr int n = 1 << 16;
constexpr std::uint32_t block = 256;
constexpr std::uint32_t grid = n / block;

/// x -> [child: y1 = a x; [inner child: y2 = b x]] -> z = y1 + y2.
struct Nested {
  Nested() : x(n), y1(n), y2(n), z(n) {
    auto stage = g.child("stage");
    first = stage.body().kernel("first", scale_kernel).launch(grid, block).args(n, 2.0f, x.get(), y1.get());
    auto inner = stage.body().child("inner").after(first);
    second = inner.body().kernel("second", scale_kernel).launch(grid, block).args(n, -3.0f, x.get(), y2.get());
    g.kernel("sum", add_kernel).launch(grid, block).args(n, y1.get(), y2.get(), z.get()).after(stage);
  }

  std::vector<float> reference(const std::vector<float>& in, float a, float b) const {
    std::vector<float> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = a * in[i] + b * in[i];
    return out;
  }

  DeviceBuffer<float> x, y1, y2, z;
  flowdsl::Graph g;
  flowdsl::KernelNode<int, float, const float*, float*> first{nullptr, 0}, second{nullptr, 0};
};

}  // namespace

TEST_CASE("Child graphs compute what their bodies say", "[nesting][gpu]") {
  Nested t;
  const auto in = random_floats(n, 7);
  t.x.upload(in);
  t.z.poison();
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  CHECK(runtime.launch(t.g, stream).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(t.z.download(), t.reference(in, 2.0f, -3.0f)) == 0);
}

TEST_CASE("A node inside a body is updated in place", "[nesting][gpu][update]") {
  Nested t;
  const auto in = random_floats(n, 11);
  t.x.upload(in);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  runtime.launch(t.g, stream);
  t.second.arg<1>(5.0f);  // two levels down
  t.first.arg<1>(0.5f);   // one level down
  t.z.poison();
  const flowdsl::LaunchReport report = runtime.launch(t.g, stream);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 2);
  CHECK(runtime.statistics().reinstantiations == 0);
  CHECK(mismatches(t.z.download(), t.reference(in, 0.5f, 5.0f)) == 0);
}

TEST_CASE("Launching eagerly runs the bodies in place of their nodes", "[nesting][gpu][eager]") {
  Nested t;
  const auto in = random_floats(n, 13);
  t.x.upload(in);
  t.z.poison();
  const auto stream = flowdsl::make_stream();
  flowdsl::launch_eagerly(t.g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(t.z.download(), t.reference(in, 2.0f, -3.0f)) == 0);
}
