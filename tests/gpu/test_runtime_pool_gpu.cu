// SPDX-License-Identifier: Apache-2.0
// Rebuilt graphs and concurrent streams on a real GPU: a Graph rebuilt with other arguments
// updates exactly the nodes that differ and computes the new results (conditional nodes' handles
// included); threads launching Graphs of one topology on their own streams get executables of
// their own, never one still running a launch on another stream, and compute correct results.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl::LaunchKind;
using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::PinnedBuffer;
using flowdsl_test::random_floats;

namespace {

__global__ void affine_kernel(int n, float a, float b, const float* x, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + b;
}

__global__ void increment_kernel(int* counter) {
  if (threadIdx.x == 0) *counter += 1;
}

/// 1 while *counter < limit.
__global__ void keep_below_kernel(const int* counter, int limit, flowdsl::Condition cond) {
  if (threadIdx.x == 0) cond.set(*counter < limit ? 1u : 0u);
}

/// Spins about `cycles` SM cycles, then adds `value` to each of 32 floats.
__global__ void slow_add_kernel(unsigned long long cycles, float* p, float value) {
  const unsigned long long start = clock64();
  while (clock64() - start < cycles) {
  }
  p[threadIdx.x] += value;
}

__global__ void add_kernel(float* p, float value) { p[threadIdx.x] += value; }

constexpr int block = 256;
constexpr int n = 5003;    // elements a kernel writes: not a multiple of the block
constexpr int width = 20;  // affine kernels in the fan

/// The buffers of the fan: x uploaded from pinned memory, `width` slices of `out` downloaded.
struct FanBuffers {
  FanBuffers() : h_x(n), x(n), out(n * width), h_out(n * width) {}
  PinnedBuffer<float> h_x;
  DeviceBuffer<float> x, out;
  PinnedBuffer<float> h_out;
};

/// upload → `width` affine kernels (kernel i: slice i = a[i] x + b[i]) → join → download: a new
/// Graph on every call, as a request handler would build it.
flowdsl::Graph fan(const FanBuffers& buf, const std::vector<float>& a, const std::vector<float>& b) {
  flowdsl::Graph g;
  auto up = g.memcpy("upload", buf.x.get(), buf.h_x.get(), buf.x.bytes());
  auto join = g.empty("join");
  for (int i = 0; i < width; ++i) {
    const auto u = static_cast<std::size_t>(i);
    auto k = g.kernel("affine" + std::to_string(i), affine_kernel)
                 .grid((n + block - 1) / block)
                 .block(block)
                 .args(n, a[u], b[u], static_cast<const float*>(buf.x.get()), buf.out.get() + i * n)
                 .after(up);
    join.after(k);
  }
  g.memcpy("download", buf.h_out.get(), buf.out.get(), buf.out.bytes()).after(join);
  return g;
}

std::vector<float> fan_reference(const std::vector<float>& x, const std::vector<float>& a,
                                 const std::vector<float>& b) {
  std::vector<float> out(x.size() * width);
  for (std::size_t i = 0; i < static_cast<std::size_t>(width); ++i) {
    for (std::size_t j = 0; j < x.size(); ++j) out[i * x.size() + j] = a[i] * x[j] + b[i];
  }
  return out;
}

/// counter = 0, then a WHILE whose body increments it and decides whether to go on: counts to
/// `limit`. A new Graph on every call.
flowdsl::Graph counter_loop(int* counter, int limit) {
  flowdsl::Graph g;
  auto zero = g.memset("zero", counter, 0, 1, 4);
  auto loop = g.while_loop("count", flowdsl::ConditionDefault{1}).after(zero);
  auto inc = loop.body().kernel("increment", increment_kernel).launch(1, 32).args(counter);
  loop.body()
      .kernel("decide", keep_below_kernel)
      .launch(1, 32)
      .args(static_cast<const int*>(counter), limit, loop.condition())
      .after(inc);
  return g;
}

/// The CUDA backend, watched: counts launches of an executable on another stream than its
/// previous launch while that launch might still run (its end not marked, or marked and not
/// reached), i.e. an executable shared while busy.
struct Watch {
  std::atomic<int> shared_while_busy{0};
  std::atomic<int> executables{0};
};

class WatchedExecutable final : public flowdsl::Executable {
 public:
  WatchedExecutable(std::unique_ptr<flowdsl::Executable> inner, Watch& watch)
      : inner_(std::move(inner)), watch_(watch) {
    ++watch_.executables;
  }
  std::optional<std::string> update(const flowdsl::Description& d, const flowdsl::Plan& plan,
                                    flowdsl::NodeId id) override {
    return inner_->update(d, plan, id);
  }
  void launch(cudaStream_t stream) override {
    if (launched_ && stream != last_stream_ && !(marked_ && inner_->ended())) ++watch_.shared_while_busy;
    inner_->launch(stream);
    launched_ = true;
    last_stream_ = stream;
    marked_ = false;
  }
  void mark_end(cudaStream_t stream) override {
    inner_->mark_end(stream);
    marked_ = true;
  }
  bool ended() const override { return inner_->ended(); }

 private:
  std::unique_ptr<flowdsl::Executable> inner_;
  Watch& watch_;
  bool launched_ = false;
  bool marked_ = false;
  cudaStream_t last_stream_ = nullptr;
};

class WatchedBackend final : public flowdsl::Backend {
 public:
  explicit WatchedBackend(Watch& watch) : inner_(flowdsl::make_cuda_backend()), watch_(watch) {}
  std::unique_ptr<flowdsl::Executable> instantiate(const flowdsl::Description& d, const flowdsl::Plan& plan,
                                                   cudaStream_t stream) override {
    return std::make_unique<WatchedExecutable>(inner_->instantiate(d, plan, stream), watch_);
  }

 private:
  std::unique_ptr<flowdsl::Backend> inner_;
  Watch& watch_;
};

}  // namespace

TEST_CASE("A rebuilt graph updates exactly the nodes whose arguments differ, with correct results",
          "[gpu][value-diff]") {
  FanBuffers buf;
  std::vector<float> a(width), b(width);
  for (int i = 0; i < width; ++i) {
    a[static_cast<std::size_t>(i)] = 1.0f + 0.5f * static_cast<float>(i);
    b[static_cast<std::size_t>(i)] = static_cast<float>(i) - 7.0f;
  }
  std::vector<float> a2 = a, b2 = b;  // five nodes differ: three scales, two offsets
  a2[1] = -2.0f;
  a2[8] = 0.25f;
  a2[19] = 3.0f;
  b2[4] = 100.0f;
  b2[11] = -0.5f;

  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  auto run = [&](const std::vector<float>& sa, const std::vector<float>& sb, unsigned seed) {
    const auto input = random_floats(n, seed);
    buf.h_x.assign(input);
    buf.h_out.poison();
    const flowdsl::Graph g = fan(buf, sa, sb);
    const flowdsl::LaunchReport report = rt.launch(g, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CHECK(mismatches(buf.h_out.to_vector(), fan_reference(input, sa, sb)) == 0);
    return report;
  };

  CHECK(run(a, b, 1).kind == LaunchKind::instantiated);
  const auto rebuilt = run(a2, b2, 2);
  CHECK(rebuilt.kind == LaunchKind::updated);
  CHECK(rebuilt.nodes_updated == 5);
  const auto again = run(a2, b2, 3);  // rebuilt once more with the same values
  CHECK(again.kind == LaunchKind::hit);
  CHECK(again.nodes_updated == 0);
  const auto back = run(a, b, 4);
  CHECK(back.kind == LaunchKind::updated);
  CHECK(back.nodes_updated == 5);
  const auto s = rt.statistics();
  CHECK(s.misses == 1);
  CHECK(s.value_diffs == 3);
  CHECK(s.node_updates == 10);
  CHECK(s.reinstantiations == 0);
}

// A new thread has no CUDA context current until its first runtime call, and the driver's update
// call acts on the current context: here the update is the thread's first CUDA call (it crashed
// inside the driver before updates checked the context, driver_calls.hpp).
TEST_CASE("A thread whose first CUDA call is a launch that updates an executable computes correct results",
          "[gpu][value-diff]") {
  FanBuffers buf;
  std::vector<float> a(width), b(width);
  for (int i = 0; i < width; ++i) {
    a[static_cast<std::size_t>(i)] = 0.5f + static_cast<float>(i);
    b[static_cast<std::size_t>(i)] = 3.0f - static_cast<float>(i);
  }
  std::vector<float> a2 = a, b2 = b;
  a2[2] = -1.5f;
  a2[17] = 4.0f;
  b2[9] = 42.0f;

  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  {
    const auto input = random_floats(n, 11);
    buf.h_x.assign(input);
    buf.h_out.poison();
    const flowdsl::Graph g = fan(buf, a, b);
    CHECK(rt.launch(g, stream.get()).kind == LaunchKind::instantiated);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CHECK(mismatches(buf.h_out.to_vector(), fan_reference(input, a, b)) == 0);
  }

  const auto input = random_floats(n, 12);
  flowdsl::LaunchReport report;
  cudaError_t synced = cudaSuccess;
  std::string error;
  std::thread worker([&] {  // no CUDA call before the launch: the update is the first
    try {
      buf.h_x.assign(input);
      buf.h_out.poison();
      const flowdsl::Graph g = fan(buf, a2, b2);
      report = rt.launch(g, stream.get());
      synced = cudaStreamSynchronize(stream.get());
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  worker.join();
  CHECK(error.empty());
  CUDA_REQUIRE(synced);
  CHECK(report.kind == LaunchKind::updated);
  CHECK(report.nodes_updated == 3);
  CHECK(mismatches(buf.h_out.to_vector(), fan_reference(input, a2, b2)) == 0);
}

TEST_CASE("A rebuilt graph with a WHILE runs on the executable's own condition handle", "[gpu][value-diff]") {
  DeviceBuffer<int> counter(1);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime rt;
  auto count_to = [&](int limit) {
    const flowdsl::Graph g = counter_loop(counter.get(), limit);
    const flowdsl::LaunchReport report = rt.launch(g, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CUDA_REQUIRE(cudaGetLastError());
    CHECK(counter.download()[0] == limit);
    return report;
  };
  CHECK(count_to(5).kind == LaunchKind::instantiated);
  const auto seven = count_to(7);  // the condition's symbol names the same node: only the limit differs
  CHECK(seven.kind == LaunchKind::updated);
  CHECK(seven.nodes_updated == 1);
  CHECK(count_to(7).kind == LaunchKind::hit);
  CHECK(rt.statistics().misses == 1);
}

TEST_CASE("Threads on their own streams run Graphs of one topology on executables of their own",
          "[gpu][pool][threads]") {
  const std::size_t per_topology = GENERATE(std::size_t{8}, std::size_t{2});
  constexpr int threads = 8;
  constexpr int launches = 50;
  constexpr int chain = 10;  // a slow kernel, then 9 that add: launches overlap on the GPU
  Watch watch;
  flowdsl::RuntimeOptions options;
  options.executables_per_topology = per_topology;
  flowdsl::Runtime rt(options, std::make_unique<WatchedBackend>(watch));

  // Catch2's assertions are not thread-safe: workers record what they saw, checked after the join.
  struct Lane {
    Lane() : data(32), host(32) {}
    DeviceBuffer<float> data;
    PinnedBuffer<float> host;
    float expected = 0.0f;
    cudaError_t status = cudaSuccess;
    cudaError_t left_behind = cudaSuccess;
    std::string error;
  };
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int t = 0; t < threads; ++t) {
    lanes.push_back(std::make_unique<Lane>());
    CUDA_REQUIRE(cudaMemset(lanes.back()->data.get(), 0, lanes.back()->data.bytes()));
  }
  CUDA_REQUIRE(cudaDeviceSynchronize());

  auto worker = [&rt](Lane& lane) {
    try {
      auto stream = flowdsl::make_stream();
      flowdsl::Graph g;  // the same topology in every thread, its own buffer
      auto slow = g.kernel("slow", slow_add_kernel).launch(1, 32).args(20000ull, lane.data.get(), 0.0f);
      std::vector<flowdsl::KernelNode<float*, float>> adds;
      for (int i = 1; i < chain; ++i) {
        adds.push_back(g.kernel("add" + std::to_string(i), add_kernel).launch(1, 32).args(lane.data.get(), 1.0f));
        adds.back().after(i == 1 ? flowdsl::NodeHandle(slow) : flowdsl::NodeHandle(adds[adds.size() - 2]));
      }
      for (int i = 0; i < launches; ++i) {
        const float value = static_cast<float>(i % 4);  // an update now and then
        slow.arg<2>(value);
        rt.launch(g, stream.get());
        lane.expected += value + static_cast<float>(chain - 1);
      }
      lane.left_behind = cudaPeekAtLastError();  // asking whether a launch has ended leaves no error
      lane.status = cudaStreamSynchronize(stream.get());
      if (lane.status == cudaSuccess) {
        lane.status = cudaMemcpy(lane.host.get(), lane.data.get(), lane.data.bytes(), cudaMemcpyDeviceToHost);
      }
    } catch (const std::exception& e) {
      lane.error = e.what();
    }
  };
  std::vector<std::thread> pool;
  for (auto& lane : lanes) pool.emplace_back(worker, std::ref(*lane));
  for (auto& th : pool) th.join();

  for (const auto& lane : lanes) {
    CHECK(lane->error.empty());
    CHECK(lane->status == cudaSuccess);
    CHECK(lane->left_behind == cudaSuccess);
    CHECK(mismatches(lane->host.to_vector(), std::vector<float>(32, lane->expected)) == 0);
  }
  const auto s = rt.statistics();
  CHECK(s.launches == threads * launches);
  CHECK(s.hits + s.misses == threads * launches);
  CHECK(s.misses <= per_topology);
  CHECK(rt.size() == static_cast<std::size_t>(watch.executables.load()));
  if (per_topology == threads) {
    CHECK(watch.shared_while_busy == 0);  // room for one each: never queued behind another stream
    CHECK(s.busy_launches == 0);
  }
}
