// SPDX-License-Identifier: Apache-2.0
// Derived kernel parameters on a real GPU: computed from the arguments as CUDA receives them, at
// emission, at an update, at an eager launch, with symbolic addresses resolved, and for kernels
// declared from the registry.
#include <cmath>
#include <cstring>

#include "flowdsl/eager.hpp"
#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

/// What the host derives from (n, a, x, y): the kernel checks that it sees its own arguments.
struct Derived {
  const float* x;
  float a_squared;
  int n;
};

// y = a² x, where a² comes from the derived parameters; NaN where they do not match the arguments.
__global__ void derived_scale_kernel(int n, float a, const float* x, float* y, Derived d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool consistent = d.x == x && d.n == n && d.a_squared == a * a;
  y[i] = consistent ? d.a_squared * x[i] : NAN;
}

__global__ void copy_kernel(int n, const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

void derive(const void* const* arguments, void* out) {
  Derived d{};
  float a = 0;
  std::memcpy(&d.n, arguments[0], sizeof d.n);
  std::memcpy(&a, arguments[1], sizeof a);
  std::memcpy(&d.x, arguments[2], sizeof d.x);
  d.a_squared = a * a;
  std::memcpy(out, &d, sizeof d);
}

constexpr flowdsl::DerivedParameters derived_params{derive, sizeof(Derived), alignof(Derived)};

constexpr int n = 70001;
constexpr std::uint32_t block = 256;
constexpr std::uint32_t grid = (n + block - 1) / block;

std::vector<float> reference(const std::vector<float>& x, float a) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = (a * a) * x[i];
  return y;
}

}  // namespace

TEST_CASE("Derived parameters follow the arguments through launches, updates and eager launches",
          "[derived][gpu]") {
  DeviceBuffer<float> x(n), x2(n), y(n);
  const auto in = random_floats(n, 31), in2 = random_floats(n, 32);
  x.upload(in);
  x2.upload(in2);
  flowdsl::Graph g;
  auto k = g.kernel("scale", derived_scale_kernel, derived_params).launch(grid, block).args(n, 1.5f, x.get(), y.get());
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();

  y.poison();
  CHECK(runtime.launch(g, stream).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(y.download(), reference(in, 1.5f)) == 0);

  k.arg<1>(-0.75f).arg<2>(x2.get());  // the derived parameters must follow both
  y.poison();
  const flowdsl::LaunchReport report = runtime.launch(g, stream);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(mismatches(y.download(), reference(in2, -0.75f)) == 0);

  k.arg<1>(2.0f);
  y.poison();
  flowdsl::launch_eagerly(g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(y.download(), reference(in2, 2.0f)) == 0);
}

TEST_CASE("Derived parameters see graph memory's resolved address", "[derived][gpu][memory]") {
  DeviceBuffer<float> x(n), y(n);
  const auto in = random_floats(n, 33);
  x.upload(in);
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", n * sizeof(float));
  auto copy = g.kernel("copy", copy_kernel).launch(grid, block).args(n, x.get(), tmp.ptr<float>()).after(tmp);
  g.kernel("scale", derived_scale_kernel, derived_params)
      .launch(grid, block)
      .args(n, 0.5f, tmp.ptr<float>(), y.get())
      .after(copy);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  for (int launch = 0; launch < 2; ++launch) {
    y.poison();
    runtime.launch(g, stream);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    INFO("launch " << launch);
    CHECK(mismatches(y.download(), reference(in, 0.5f)) == 0);
  }
}

TEST_CASE("A registered kernel's derived parameters reach nodes declared by name", "[derived][gpu][registry]") {
  flowdsl::KernelRegistry registry;
  const flowdsl::KernelInfo& info =
      registry.add("derived_scale", derived_scale_kernel, {"n", "a", "x: n", "y: n"}, "y = a² x", false, derived_params);
  DeviceBuffer<float> x(n), y(n);
  const auto in = random_floats(n, 34);
  x.upload(in);
  flowdsl::Graph g;
  g.kernel("scale", info).launch(grid, block).set("n", n).set("a", 3.0f).set("x", x.get()).set("y", y.get());
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  y.poison();
  runtime.launch(g, stream);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(y.download(), reference(in, 3.0f)) == 0);
}
