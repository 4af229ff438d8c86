// SPDX-License-Identifier: Apache-2.0
// Memory nodes on a GPU: scratch memory carrying data between kernels across launches and
// updates, memory no free releases freed by the next launch, executables per Graph, graph memory
// reported and given back, eager and debug launches, allocs inside a child body.
#include <algorithm>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

__global__ void square_kernel(int n, const float* x, float* scratch) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = x[i] * x[i];
}

__global__ void add_scaled_kernel(int n, float a, const float* scratch, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * scratch[i] + x[i];
}

constexpr int n = 100003;  // not a multiple of the block size
constexpr std::uint32_t block = 256;
constexpr std::uint32_t grid = (n + block - 1) / block;
constexpr std::size_t scratch_bytes = n * sizeof(float);

std::vector<float> reference(const std::vector<float>& x, float a) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = a * (x[i] * x[i]) + x[i];
  return y;
}

/// tmp -> square (x² into tmp) -> combine (y = a tmp + x) [-> release].
struct Scratch {
  explicit Scratch(bool with_free) : x(n), y(n) {
    tmp = g.alloc("tmp", scratch_bytes);
    auto square = g.kernel("square", square_kernel).launch(grid, block).args(n, x.get(), tmp.ptr<float>()).after(tmp);
    combine = g.kernel("combine", add_scaled_kernel)
                  .launch(grid, block)
                  .args(n, 3.0f, tmp.ptr<float>(), x.get(), y.get())
                  .after(square);
    if (with_free) g.free("release", tmp).after(combine);
  }

  DeviceBuffer<float> x, y;
  flowdsl::Graph g;
  flowdsl::AllocNode tmp{nullptr, 0};
  flowdsl::KernelNode<int, float, const float*, const float*, float*> combine{nullptr, 0};
};

int current_device() {
  int device = 0;
  CUDA_REQUIRE(cudaGetDevice(&device));
  return device;
}

}  // namespace

TEST_CASE("Scratch memory carries data between kernels over launches and an update", "[memory][gpu]") {
  Scratch s(true);
  const auto in = random_floats(n, 21);
  s.x.upload(in);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  for (int launch = 0; launch < 3; ++launch) {
    s.y.poison();
    const flowdsl::LaunchReport report = runtime.launch(s.g, stream);
    CHECK(report.kind == (launch == 0 ? flowdsl::LaunchKind::instantiated : flowdsl::LaunchKind::hit));
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    INFO("launch " << launch);
    CHECK(mismatches(s.y.download(), reference(in, 3.0f)) == 0);
  }
  s.combine.arg<1>(-0.5f);
  s.y.poison();
  const flowdsl::LaunchReport report = runtime.launch(s.g, stream);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(mismatches(s.y.download(), reference(in, -0.5f)) == 0);
  const flowdsl::RuntimeStatistics stats = runtime.statistics();
  CHECK(stats.private_executables == 1);
  CHECK(stats.reinstantiations == 0);
}

TEST_CASE("Memory no free node releases is freed by the next launch", "[memory][gpu][auto-free]") {
  Scratch s(false);
  const auto in = random_floats(n, 22);
  s.x.upload(in);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  for (int launch = 0; launch < 3; ++launch) {  // without auto-free the second launch fails
    s.y.poison();
    CHECK_NOTHROW(runtime.launch(s.g, stream));
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    INFO("launch " << launch);
    CHECK(mismatches(s.y.download(), reference(in, 3.0f)) == 0);
  }
  // The last launch's memory lives on with the executable: graph memory says so.
  const flowdsl::GraphMemory held = flowdsl::graph_memory(current_device());
  CHECK(held.used >= scratch_bytes);
  CHECK(held.reserved >= scratch_bytes);
  CHECK(held.used_high >= scratch_bytes);
  CHECK(held.reserved_high >= held.reserved);
}

TEST_CASE("Destroying an executable gives back the memory its last launch left", "[memory][gpu][auto-free]") {
  Scratch s(false);
  s.x.upload(random_floats(n, 23));
  const auto stream = flowdsl::make_stream();
  const int device = current_device();
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CUDA_REQUIRE(cudaDeviceGraphMemTrim(device));
  // Graph memory is mapped in chunks (32 MiB on an H200), and what earlier tests left is counted
  // until trimmed: the figures are compared with what is in use here, not summed.
  const std::uint64_t before = flowdsl::graph_memory(device).used;
  INFO("graph memory in use before: " << before << " bytes");
  {
    flowdsl::Runtime runtime;
    runtime.launch(s.g, stream);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CHECK(flowdsl::graph_memory(device).used >= scratch_bytes);
  }  // the executable goes: its memory is freed once the launch is done
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CUDA_REQUIRE(cudaDeviceGraphMemTrim(device));  // what is unused goes back; a leak would stay in use
  CHECK(flowdsl::graph_memory(device).used <= before);
}

TEST_CASE("Two Graph objects of one topology holding allocs each get their own executable", "[memory][gpu][runtime]") {
  Scratch a(true), b(true);
  REQUIRE(a.g.topology_hash() == b.g.topology_hash());
  const auto in_a = random_floats(n, 24), in_b = random_floats(n, 25);
  a.x.upload(in_a);
  b.x.upload(in_b);
  b.combine.arg<1>(0.25f);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  for (int round = 0; round < 2; ++round) {
    a.y.poison();
    b.y.poison();
    const auto kind = round == 0 ? flowdsl::LaunchKind::instantiated : flowdsl::LaunchKind::hit;
    CHECK(runtime.launch(a.g, stream).kind == kind);
    CHECK(runtime.launch(b.g, stream).kind == kind);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    INFO("round " << round);
    CHECK(mismatches(a.y.download(), reference(in_a, 3.0f)) == 0);
    CHECK(mismatches(b.y.download(), reference(in_b, 0.25f)) == 0);
  }
  const flowdsl::RuntimeStatistics stats = runtime.statistics();
  CHECK(stats.private_executables == 2);
  CHECK(stats.misses == 2);
  CHECK(stats.hits == 2);
  CHECK(stats.node_updates == 0);  // neither ever had to be brought in line with the other
  CHECK(runtime.size() == 2);
  CHECK(flowdsl::graph_memory(current_device()).reserved >= scratch_bytes);
}

TEST_CASE("Eager and debug launches allocate and free on the stream", "[memory][gpu][eager]") {
  for (bool with_free : {true, false}) {
    INFO("with a free node: " << with_free);
    Scratch s(with_free);
    const auto in = random_floats(n, 26);
    s.x.upload(in);
    const auto stream = flowdsl::make_stream();
    s.y.poison();
    flowdsl::launch_eagerly(s.g, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CHECK(mismatches(s.y.download(), reference(in, 3.0f)) == 0);

    flowdsl::RuntimeOptions options;
    options.debug = true;
    flowdsl::Runtime debug(options);
    s.y.poison();
    CHECK(debug.launch(s.g, stream).kind == flowdsl::LaunchKind::debug);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CHECK(mismatches(s.y.download(), reference(in, 3.0f)) == 0);
  }
}

TEST_CASE("An alloc inside a child body serves that body", "[memory][gpu][nesting]") {
  DeviceBuffer<float> x(n), y(n);
  const auto in = random_floats(n, 27);
  x.upload(in);
  y.poison();
  flowdsl::Graph g;
  auto stage = g.child("stage");
  auto tmp = stage.body().alloc("tmp", scratch_bytes);
  auto square = stage.body().kernel("square", square_kernel).launch(grid, block).args(n, x.get(), tmp.ptr<float>()).after(tmp);
  auto combine = stage.body()
                     .kernel("combine", add_scaled_kernel)
                     .launch(grid, block)
                     .args(n, 2.0f, tmp.ptr<float>(), x.get(), y.get())
                     .after(square);
  stage.body().free("release", tmp).after(combine);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  runtime.launch(g, stream);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(y.download(), reference(in, 2.0f)) == 0);
  combine.arg<1>(-1.0f);  // a node inside the body, updated in place
  y.poison();
  CHECK(runtime.launch(g, stream).kind == flowdsl::LaunchKind::updated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(y.download(), reference(in, -1.0f)) == 0);
}
