// SPDX-License-Identifier: Apache-2.0
// Diamond: upload → two kernels side by side → join → combine → download, checked against a
// host reference.
#include <cmath>

#include "common.cuh"
#include "flowdsl/flowdsl.hpp"

__global__ void scale(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

__global__ void multiply_add(int n, const float* a, const float* b, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i] + a[i];
}

int main() {
  if (!sample::have_device()) return sample::skipped;
  constexpr int n = 1 << 20;
  constexpr std::size_t bytes = n * sizeof(float);
  const std::vector<float> input = sample::random_floats(n, 42);
  std::vector<float> output(n, NAN);  // poisoned: an unwritten element fails the check

  const sample::DeviceArray<float> x(n), left(n), right(n), z(n);

  const std::uint32_t blocks = (n + 255) / 256;
  flowdsl::Graph g;
  auto up = g.memcpy("upload", x.get(), input.data(), bytes);
  auto l = g.kernel("left", scale, "scale").launch(blocks, 256).args(n, 2.0f, x.get(), left.get()).after(up);
  auto r = g.kernel("right", scale, "scale").launch(blocks, 256).args(n, 0.5f, x.get(), right.get()).after(up);
  auto join = g.empty("join").after(l, r);
  auto combine = g.kernel("combine", multiply_add, "multiply_add")
                     .launch(blocks, 256)
                     .args(n, left.get(), right.get(), z.get())
                     .after(join);
  g.memcpy("download", output.data(), z.get(), bytes).after(combine);

  try {
    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    runtime.launch(g, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  std::size_t wrong = 0;
  for (int i = 0; i < n; ++i) {
    const float a = 2.0f * input[i];
    const float want = a * (0.5f * input[i]) + a;
    if (!(std::fabs(output[i] - want) <= 1e-5f * std::fmax(1.0f, std::fabs(want)))) ++wrong;
  }
  if (wrong != 0) {
    std::printf("diamond: %zu of %d elements differ from the reference\n", wrong, n);
    return 1;
  }
  std::printf("diamond: %d elements, matches reference\n", n);
  return 0;
}
