// SPDX-License-Identifier: Apache-2.0
// Pipeline: one graph relaunched 1000 times with changing parameters. Each relaunch is a
// parameter-only update of the cached executable; the cache statistics show it.
#include <chrono>
#include <cmath>

#include "common.cuh"
#include "flowdsl/flowdsl.hpp"

__global__ void axpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void clamp(int n, float lo, float hi, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fminf(fmaxf(y[i], lo), hi);
}

int main() {
  if (!sample::have_device()) return sample::skipped;
  constexpr int n = 1 << 16;
  constexpr int iterations = 1000;
  constexpr std::size_t bytes = n * sizeof(float);
  const std::uint32_t blocks = (n + 255) / 256;

  // Two input batches, alternated: the x pointer is rebound every iteration.
  const std::vector<float> batch0 = sample::random_floats(n, 1);
  const std::vector<float> batch1 = sample::random_floats(n, 2);
  const sample::DeviceArray<float> x0 = sample::device_copy(batch0), x1 = sample::device_copy(batch1), y(n);
  const sample::PinnedArray<float> host_y(n);

  flowdsl::Graph g;
  auto zero = g.memset("zero", y.get(), 0, bytes);
  auto scale = g.kernel("axpy", axpy, "axpy").launch(blocks, 256).args(n, 1.0f, x0.get(), y.get()).after(zero);
  auto limit = g.kernel("clamp", clamp, "clamp").launch(blocks, 256).args(n, -0.5f, 0.5f, y.get()).after(scale);
  g.memcpy("download", host_y.get(), y.get(), bytes).after(limit);

  std::size_t wrong = 0;
  double seconds = 0;
  try {
    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    for (int it = 0; it < iterations; ++it) {
      const float a = 0.5f + 0.001f * static_cast<float>(it);
      const float bound = 0.25f + 0.0005f * static_cast<float>(it);
      scale.arg<1>(a).arg<2>((it % 2 ? x1 : x0).get());
      limit.arg<1>(-bound).arg<2>(bound);
      const auto start = std::chrono::steady_clock::now();
      runtime.launch(g, stream.get());
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      if (it % 100 == 99) {  // check a sample of iterations against the host reference
        const std::vector<float>& x = it % 2 ? batch1 : batch0;
        for (int i = 0; i < n; ++i) {
          const float want = std::fmin(std::fmax(a * x[i], -bound), bound);
          if (!(std::fabs(host_y.get()[i] - want) <= 1e-6f)) ++wrong;
        }
      }
    }
    const flowdsl::RuntimeStatistics s = runtime.statistics();
    std::printf("pipeline: %d launches, %.2f us host time per launch (update + cudaGraphLaunch)\n", iterations,
                1e6 * seconds / iterations);
    std::printf("cache: launches=%llu hits=%llu misses=%llu node_updates=%llu reinstantiations=%llu evictions=%llu\n",
                static_cast<unsigned long long>(s.launches), static_cast<unsigned long long>(s.hits),
                static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.node_updates),
                static_cast<unsigned long long>(s.reinstantiations), static_cast<unsigned long long>(s.evictions));
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (wrong != 0) {
    std::printf("pipeline: %zu checked elements differ from the reference\n", wrong);
    return 1;
  }
  std::printf("pipeline: matches reference\n");
  return 0;
}
