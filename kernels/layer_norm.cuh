// Row-wise layer normalisation. Statistics in one pass over the row as sums of (x - shift)
// and (x - shift)^2 with shift = the row's first element, which avoids the cancellation of
// the plain sum of squares when the mean is large against the spread; then one write pass.
#pragma once

#include "block_reduce.cuh"

namespace flowdsl::kernels::detail {

template <int TPR, class T>
__global__ void __launch_bounds__(row_block) layer_norm_kernel(int rows, int cols, float eps, const T* x, const float* gamma,
                                                               const float* beta, T* y) {
  const RowGroups<TPR> groups;
  for (int row = groups.first(); row < rows; row += groups.stride()) {
    const T* r = x + static_cast<std::int64_t>(row) * cols;
    T* out = y + static_cast<std::int64_t>(row) * cols;
    const float shift = cols > 0 ? to_float(r[0]) : 0.0f;
    float2 sums = make_float2(0.0f, 0.0f);
    for_each_in_row<TPR>(r, cols, groups.lane(), [&](int, float v) {
      const float d = v - shift;
      sums.x += d;
      sums.y += d * d;
    });
    sums = group_reduce<TPR>(sums, Sum2Op{});
    const float mean_shifted = sums.x / static_cast<float>(cols);
    const float variance = fmaxf(sums.y / static_cast<float>(cols) - mean_shifted * mean_shifted, 0.0f);
    const float mean = shift + mean_shifted;
    const float inverse = rsqrtf(variance + eps);
    constexpr int V = 16 / sizeof(T);
    if (aligned<16>(r) && aligned<16>(out)) {
      const int vectors = cols / V;
      for (int v = groups.lane(); v < vectors; v += TPR) {
        const Vec<T, V> in = reinterpret_cast<const Vec<T, V>*>(r)[v];
        Vec<T, V> result;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int c = v * V + j;
          result.v[j] = from_float<T>((to_float(in.v[j]) - mean) * inverse * gamma[c] + beta[c]);
        }
        reinterpret_cast<Vec<T, V>*>(out)[v] = result;
      }
      for (int c = vectors * V + groups.lane(); c < cols; c += TPR) {
        out[c] = from_float<T>((to_float(r[c]) - mean) * inverse * gamma[c] + beta[c]);
      }
    } else {
      for (int c = groups.lane(); c < cols; c += TPR) out[c] = from_float<T>((to_float(r[c]) - mean) * inverse * gamma[c] + beta[c]);
    }
  }
}

}  // namespace flowdsl::kernels::detail
