// Row-wise softmax, numerically stable: the row maximum is subtracted before exp, so any
// finite input gives finite output. Three passes over the row (max, sum, write); the row is
// re-read from L1/L2.
#pragma once

#include "block_reduce.cuh"

namespace flowdsl::kernels::detail {

template <int TPR, class T>
__global__ void __launch_bounds__(row_block) softmax_kernel(int rows, int cols, const T* x, T* y) {
  const RowGroups<TPR> groups;
  for (int row = groups.first(); row < rows; row += groups.stride()) {
    const T* r = x + static_cast<std::int64_t>(row) * cols;
    T* out = y + static_cast<std::int64_t>(row) * cols;
    float peak = -INFINITY;
    for_each_in_row<TPR>(r, cols, groups.lane(), [&](int, float v) { peak = fmaxf(peak, v); });
    peak = group_reduce<TPR>(peak, MaxOp{});
    float total = 0.0f;
    for_each_in_row<TPR>(r, cols, groups.lane(), [&](int, float v) { total += expf(v - peak); });
    const float inverse = 1.0f / group_reduce<TPR>(total, SumOp{});
    constexpr int V = 16 / sizeof(T);
    if (aligned<16>(r) && aligned<16>(out)) {
      const int vectors = cols / V;
      for (int v = groups.lane(); v < vectors; v += TPR) {
        const Vec<T, V> in = reinterpret_cast<const Vec<T, V>*>(r)[v];
        Vec<T, V> result;
#pragma unroll
        for (int j = 0; j < V; ++j) result.v[j] = from_float<T>(expf(to_float(in.v[j]) - peak) * inverse);
        reinterpret_cast<Vec<T, V>*>(out)[v] = result;
      }
      for (int c = vectors * V + groups.lane(); c < cols; c += TPR) out[c] = from_float<T>(expf(to_float(r[c]) - peak) * inverse);
    } else {
      for (int c = groups.lane(); c < cols; c += TPR) out[c] = from_float<T>(expf(to_float(r[c]) - peak) * inverse);
    }
  }
}

}  // namespace flowdsl::kernels::detail
