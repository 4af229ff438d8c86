// SPDX-License-Identifier: Apache-2.0
// The runtime on a real GPU: results against host references on random data, in-place
// updates, re-instantiation, refused updates, concurrency and device-dependent validation.
#include <atomic>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::contains;
using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::PinnedBuffer;
using flowdsl_test::random_floats;

namespace {

__global__ void scale_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void add_kernel(int n, const float* a, const float* b, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// Spins for `ns` nanoseconds before writing, so that the host can act while it runs.
__global__ void slow_fill_kernel(unsigned long long ns, float* out, float value) {
  const unsigned long long start = clock64();
  // clock64 counts SM cycles; ~2 GHz on an H200, so ns * 2 cycles is a lower bound.
  while (clock64() - start < ns * 2) {
  }
  out[threadIdx.x] = value;
}

// Reverses each block's chunk through dynamic shared memory (of any size the launch asks).
__global__ void reverse_kernel(int n, const float* in, float* out) {
  extern __shared__ float tile[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  const int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
  if (j < n) out[j] = tile[threadIdx.x];
}

void count_call(void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(1); }

constexpr int block = 256;
std::uint32_t blocks_for(int n) { return static_cast<std::uint32_t>((n + block - 1) / block); }

/// upload x → (scale into y1, scale into y2) → join → add y1 + y2 into z → download z, plus a
/// memset of an accumulator and a host callback at the end.
struct Diamond {
  explicit Diamond(int n_) : n(n_), h_x(n_), h_z(n_), x(n_), y1(n_), y2(n_), z(n_) {
    auto up = g.memcpy("upload", x.get(), h_x.get(), x.bytes());
    left = g.kernel("left", scale_kernel).grid(blocks_for(n)).block(block).args(n, 2.0f, x.get(), y1.get()).after(up);
    right = g.kernel("right", scale_kernel).grid(blocks_for(n)).block(block).args(n, -3.0f, x.get(), y2.get()).after(up);
    auto join = g.empty("join").after(left, right);
    sum = g.kernel("sum", add_kernel).grid(blocks_for(n)).block(block).args(n, y1.get(), y2.get(), z.get()).after(join);
    down = g.memcpy("download", h_z.get(), z.get(), z.bytes()).after(sum);
    g.host("done", count_call, &calls).after(down);
  }

  std::vector<float> reference(const std::vector<float>& in, float a, float b) const {
    std::vector<float> out(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = a * in[i] + b * in[i];
    return out;
  }

  int n;
  PinnedBuffer<float> h_x, h_z;
  DeviceBuffer<float> x, y1, y2, z;
  std::atomic<int> calls{0};
  flowdsl::Graph g;
  flowdsl::KernelNode<int, float, const float*, float*> left{nullptr, 0}, right{nullptr, 0};
  flowdsl::KernelNode<int, const float*, const float*, float*> sum{nullptr, 0};
  flowdsl::MemcpyNode down{nullptr, 0};
};

}  // namespace

TEST_CASE("A diamond graph matches the host reference on random input", "[gpu][runtime]") {
  const int n = 1000003;  // not a multiple of the block size
  Diamond d(n);
  const auto input = random_floats(n, 1);
  d.h_x.assign(input);
  d.h_z.poison();
  d.y1.poison();
  d.y2.poison();
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;

  CHECK(rt.launch(d.g, stream.get()).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(d.h_z.to_vector(), d.reference(input, 2.0f, -3.0f)) == 0);
  CHECK(d.calls == 1);
}

TEST_CASE("A relaunch with one changed argument updates one node and instantiates nothing", "[gpu][update]") {
  const int n = 4099;
  Diamond d(n);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  d.h_x.assign(random_floats(n, 2));
  rt.launch(d.g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));

  const auto input = random_floats(n, 3);
  d.h_x.assign(input);
  d.h_z.poison();
  d.right.arg<1>(0.25f);
  const auto report = rt.launch(d.g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));

  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  const auto s = rt.statistics();
  CHECK(s.misses == 1);
  CHECK(s.hits == 1);
  CHECK(s.node_updates == 1);
  CHECK(s.reinstantiations == 0);
  CHECK(mismatches(d.h_z.to_vector(), d.reference(input, 2.0f, 0.25f)) == 0);
}

TEST_CASE("Large graphs of device-launchable nodes run as device-launch executables, updates included",
          "[gpu][update]") {
  // 2500 nodes: a memset, then a chain of axpy kernels y += a_i x (a_i = 1 or 2, chosen at random),
  // then a copy out; past the size where the runtime instantiates for device launch.
  const int n = 1000;
  const int links = 2498;
  DeviceBuffer<float> x(n), y(n);
  PinnedBuffer<float> out(n);
  const auto input = random_floats(n, 11);
  CUDA_REQUIRE(cudaMemcpy(x.get(), input.data(), x.bytes(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());  // the launch below runs on a non-blocking stream
  std::vector<float> factors(links);
  std::mt19937 rng(5);
  for (float& a : factors) a = static_cast<float>(1 + rng() % 2);
  flowdsl::Graph g;
  flowdsl::NodeHandle last = g.memset("clear", y.get(), 0, y.bytes());
  std::vector<flowdsl::KernelNode<int, float, const float*, float*>> chain;
  chain.reserve(links);
  for (int i = 0; i < links; ++i) {
    chain.push_back(g.kernel("axpy" + std::to_string(i), axpy_kernel)
                        .grid(blocks_for(n)).block(block)
                        .args(n, factors[i], static_cast<const float*>(x.get()), y.get())
                        .after(last));
    last = chain.back();
  }
  g.memcpy("download", out.get(), y.get(), y.bytes()).after(last);
  REQUIRE(g.size() == 2500);
  auto reference = [&] {
    std::vector<float> want(n, 0.0f);
    for (int i = 0; i < links; ++i) {
      for (int j = 0; j < n; ++j) want[j] = std::fma(factors[i], input[j], want[j]);
    }
    return want;
  };
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  out.poison();
  REQUIRE(rt.launch(g, stream.get()).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(out.to_vector(), reference(), 1e-4f) == 0);
  unsigned long long flags = 0;
  REQUIRE(rt.inspect_executable(g, [&](const flowdsl::Executable& e) {
    CUDA_REQUIRE(cudaGraphExecGetFlags(e.native_executable(), &flags));
  }));
  CHECK((flags & cudaGraphInstantiateFlagDeviceLaunch) != 0);

  for (int round = 0; round < 3; ++round) {
    factors[round * 100 + 7] = 3.0f + static_cast<float>(round);
    chain[static_cast<std::size_t>(round * 100 + 7)].arg<1>(factors[round * 100 + 7]);
    out.poison();
    const auto report = rt.launch(g, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CHECK(report.kind == flowdsl::LaunchKind::updated);
    CHECK(report.nodes_updated == 1);
    CHECK(mismatches(out.to_vector(), reference(), 1e-4f) == 0);
  }
  CHECK(rt.statistics().reinstantiations == 0);

  // Below that size, or with a node CUDA does not allow there, executables are the ordinary kind.
  flowdsl::Graph small;
  small.kernel("one", axpy_kernel).grid(blocks_for(n)).block(block).args(n, 1.0f, static_cast<const float*>(x.get()), y.get());
  rt.launch(small, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  REQUIRE(rt.inspect_executable(small, [&](const flowdsl::Executable& e) {
    CUDA_REQUIRE(cudaGraphExecGetFlags(e.native_executable(), &flags));
  }));
  CHECK((flags & cudaGraphInstantiateFlagDeviceLaunch) == 0);
}

TEST_CASE("Rebinding buffers is a parameter-only update", "[gpu][update]") {
  const int n = 777;
  Diamond d(n);
  DeviceBuffer<float> other_z(n);
  PinnedBuffer<float> other_out(n);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  const auto input = random_floats(n, 4);
  d.h_x.assign(input);
  rt.launch(d.g, stream.get());

  other_out.poison();
  d.sum.arg<3>(other_z.get());
  d.down.set(other_out.get(), other_z.get(), other_z.bytes());
  CHECK(rt.launch(d.g, stream.get()).nodes_updated == 2);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(other_out.to_vector(), d.reference(input, 2.0f, -3.0f)) == 0);
  CHECK(rt.statistics().misses == 1);
}

TEST_CASE("A relaunch after a structural change instantiates", "[gpu][cache]") {
  const int n = 5000;
  Diamond d(n);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  const auto input = random_floats(n, 5);
  d.h_x.assign(input);
  rt.launch(d.g, stream.get());

  d.left.block(128).grid(blocks_for(n) * 2);  // structure: launch shape
  d.h_z.poison();
  CHECK(rt.launch(d.g, stream.get()).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(d.h_z.to_vector(), d.reference(input, 2.0f, -3.0f)) == 0);
  const auto s = rt.statistics();
  CHECK(s.misses == 2);
  CHECK(rt.size() == 2);
}

TEST_CASE("An update CUDA refuses falls back to a new instantiation with correct results", "[gpu][fallback]") {
  // A device-to-device copy whose source becomes pageable host memory. CUDA 13 accepts that
  // update and then faults at launch; flowdsl refuses it and re-instantiates.
  const int n = 2048;
  DeviceBuffer<float> src(n), dst(n);
  PinnedBuffer<float> out(n);
  const auto first = random_floats(n, 6);
  const auto second = random_floats(n, 7);
  std::vector<float> host_src = second;  // pageable
  src.upload(first);

  flowdsl::Graph g;
  auto copy = g.memcpy("copy", dst.get(), src.get(), dst.bytes());
  g.memcpy("download", out.get(), dst.get(), dst.bytes()).after(copy);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  out.poison();
  rt.launch(g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(out.to_vector(), first) == 0);

  out.poison();
  copy.set(dst.get(), host_src.data(), dst.bytes());
  const auto report = rt.launch(g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(report.kind == flowdsl::LaunchKind::reinstantiated);
  CHECK(rt.statistics().reinstantiations == 1);
  CHECK(mismatches(out.to_vector(), second) == 0);
  CHECK(rt.launch(g, stream.get()).kind == flowdsl::LaunchKind::hit);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));

  // Back to device memory: refused again (pageable -> device), never a fault.
  out.poison();
  copy.set(dst.get(), src.get(), dst.bytes());
  CHECK(rt.launch(g, stream.get()).kind == flowdsl::LaunchKind::reinstantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(out.to_vector(), first) == 0);
}

TEST_CASE("A memset moved to another kind of memory is re-instantiated, not faulted", "[gpu][fallback]") {
  const int n = 1024;
  DeviceBuffer<float> dev(n);
  PinnedBuffer<float> pinned(n);
  flowdsl::Graph g;
  auto fill = g.memset("fill", dev.get(), 0x3f800000u, n, 4);  // 1.0f
  flowdsl::Runtime rt;
  rt.launch(g);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(mismatches(dev.download(), std::vector<float>(n, 1.0f)) == 0);
  pinned.poison();
  fill.set(pinned.get(), 0x40000000u, n);  // 2.0f into pinned host memory
  const auto report = rt.launch(g);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(report.kind == flowdsl::LaunchKind::reinstantiated);
  CHECK(mismatches(pinned.to_vector(), std::vector<float>(n, 2.0f)) == 0);
}

TEST_CASE("Updating and relaunching while an earlier launch still runs keeps both results", "[gpu][concurrency]") {
  DeviceBuffer<float> a(32), b(32);
  PinnedBuffer<float> out_a(32), out_b(32);
  out_a.poison();
  out_b.poison();
  flowdsl::Graph g;
  auto slow = g.kernel("slow", slow_fill_kernel).grid(1).block(32).args(20'000'000ull, a.get(), 1.5f);  // ~20 ms
  auto down = g.memcpy("download", out_a.get(), a.get(), a.bytes()).after(slow);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;

  rt.launch(g, stream.get());  // still running when the host goes on
  slow.args(1000ull, b.get(), -2.5f);
  down.set(out_b.get(), b.get(), b.bytes());
  CHECK(rt.launch(g, stream.get()).nodes_updated == 2);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(out_a.to_vector(), std::vector<float>(32, 1.5f)) == 0);
  CHECK(mismatches(out_b.to_vector(), std::vector<float>(32, -2.5f)) == 0);
}

TEST_CASE("Two host threads launch through one runtime", "[gpu][threads]") {
  flowdsl::Runtime rt;
  constexpr int iterations = 200;
  // Catch2's assertions are not thread-safe: buffers are made here, and the workers only
  // record what they saw, checked after the join.
  struct Lane {
    Lane(int n, unsigned seed)
        : n(n), input(random_floats(static_cast<std::size_t>(n), seed)), x(input.size()), y(input.size()),
          h_x(input.size()), h_y(input.size()) {
      h_x.assign(input);
    }
    int n;
    std::vector<float> input;
    DeviceBuffer<float> x, y;
    PinnedBuffer<float> h_x, h_y;
    std::vector<std::size_t> failures;
    cudaError_t status = cudaSuccess;
    std::string error;
  };
  auto worker = [&rt](Lane& lane) {
    try {
      flowdsl::Graph g;
      auto up = g.memcpy("upload", lane.x.get(), lane.h_x.get(), lane.x.bytes());
      auto fill = g.memset("zero", lane.y.get(), 0, lane.y.bytes());
      auto k = g.kernel("axpy", axpy_kernel)
                   .grid(blocks_for(lane.n))
                   .block(block)
                   .args(lane.n, 1.0f, lane.x.get(), lane.y.get())
                   .after(up, fill);
      g.memcpy("download", lane.h_y.get(), lane.y.get(), lane.y.bytes()).after(k);
      auto stream = flowdsl::make_stream();
      for (int i = 0; i < iterations && lane.status == cudaSuccess; ++i) {
        const float a = static_cast<float>(i) * 0.5f - 7.0f;
        k.arg<1>(a);
        lane.h_y.poison();
        rt.launch(g, stream.get());
        lane.status = cudaStreamSynchronize(stream.get());
        std::vector<float> want(lane.input.size());
        for (std::size_t j = 0; j < lane.input.size(); ++j) want[j] = a * lane.input[j];
        lane.failures.push_back(mismatches(lane.h_y.to_vector(), want));
      }
    } catch (const std::exception& e) {
      lane.error = e.what();
    }
  };
  Lane a(3000, 11u), b(5001, 12u);
  std::thread t1(worker, std::ref(a));
  std::thread t2(worker, std::ref(b));
  t1.join();
  t2.join();
  for (const Lane* lane : {&a, &b}) {
    CHECK(lane->error.empty());
    CHECK(lane->status == cudaSuccess);
    CHECK(lane->failures == std::vector<std::size_t>(iterations, 0));
  }
  const auto s = rt.statistics();
  CHECK(s.launches == 2 * iterations);
  CHECK(s.misses == 2);
  CHECK(s.node_updates == 2 * (iterations - 1));
}

TEST_CASE("Dynamic shared memory above 48 KiB is opted into", "[gpu][kernel]") {
  const int threads = 1024;  // 1024 floats = 4 KiB of tile; ask for 64 KiB to exercise opt-in
  const int n = threads * 3 + 17;
  DeviceBuffer<float> in(n), out(n);
  const auto input = random_floats(n, 8);
  in.upload(input);
  out.poison();
  flowdsl::Graph g;
  const auto grid = static_cast<std::uint32_t>((n + threads - 1) / threads);
  g.kernel("reverse", reverse_kernel).launch(grid, threads, 64 * 1024).args(n, in.get(), out.get());
  flowdsl::Runtime rt;
  rt.launch(g);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<float> want(static_cast<std::size_t>(n));
  const int full = (n / threads) * threads;
  for (int i = 0; i < full; ++i) want[i] = input[(i / threads) * threads + (threads - 1 - i % threads)];
  auto got = out.download();
  // The partial last block reverses with zero padding; compare the full blocks.
  got.resize(static_cast<std::size_t>(full));
  want.resize(static_cast<std::size_t>(full));
  CHECK(mismatches(got, want) == 0);
}

TEST_CASE("Shared memory over the device's limit is a validation error naming the node", "[gpu][validation]") {
  DeviceBuffer<float> in(16), out(16);
  flowdsl::Graph g;
  g.kernel("huge", reverse_kernel).grid(1).block(16).shared_memory(4u << 20).args(16, in.get(), out.get());
  flowdsl::Runtime rt;
  CHECK_THROWS_WITH(rt.launch(g), contains("node 'huge' (kernel): dynamic shared memory of 4194304 bytes"));
  CHECK(rt.size() == 0);
  // The runtime stays usable.
  g = flowdsl::Graph();
  g.memset("clear", out.get(), 0, out.bytes());
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

TEST_CASE("A host function that is not a kernel is reported at emission", "[gpu][validation]") {
  flowdsl::Graph g;
  g.kernel("not_a_kernel", count_call).launch(1, 1).args(nullptr);
  flowdsl::Runtime rt;
  CHECK_THROWS_WITH(rt.launch(g), contains("node 'not_a_kernel' (kernel): the function is not a kernel"));
}
