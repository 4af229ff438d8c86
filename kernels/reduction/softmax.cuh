// SPDX-License-Identifier: Apache-2.0
// Row-wise softmax, numerically stable: the row maximum is subtracted before exp, so any
// finite input gives finite output.
//
// Rows that fit in registers (row_cache.cuh: up to warp_row_limit columns in the warp kernel,
// 4096 in the block kernel) are read once: load, max, exp and sum in registers, write. Longer
// rows take three passes (max, sum, write), re-reading the row from L1/L2.
#pragma once

#include "row_cache.cuh"

namespace flowdsl::kernels::detail {

template <int G, int E, int W, class T>
__device__ __forceinline__ void softmax_cached(int rows, int cols, const T* x, T* y, float (&scratch)[2][row_block / 32]) {
  for_each_row_group<G>(rows, [&](int row, int q, bool active) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    RowSlice<T, G, E, W> slice;
    const int valid = active ? cols : 0;
    slice.load(x + offset, valid, q, -INFINITY);
    float peak = -INFINITY;
    slice.for_each(valid, q, [&](float v) { peak = fmaxf(peak, v); });
    peak = group_allreduce<G>(peak, MaxOp{}, scratch[0]);
    // Over every register, the -inf past the row's end included: exp gives 0 there. (Skipping
    // those chunks, like for_each, made ptxas spill.)
    float total = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      slice.v[e] = expf(slice.v[e] - peak);
      total += slice.v[e];
    }
    const float inverse = 1.0f / group_allreduce<G>(total, SumOp{}, scratch[1]);
    if (active) slice.store(y + offset, cols, q, [&](int, int, float e) { return e * inverse; });
  });
}

/// Any number of columns: max, sum and write, each a pass over the row. Not inlined: kept
/// out of the cached paths' register allocation (inlined, it made ptxas spill).
template <int TPR, class T>
__device__ __noinline__ void softmax_streaming(int rows, int cols, const T* x, T* y) {
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
    map_row<TPR>(r, out, cols, groups.lane(), [&](int, float v) { return expf(v - peak) * inverse; });
  }
}

/// TPR = 32: rows of up to warp_row_limit columns cached by 4 lanes (up to 128 columns) or a
/// warp; TPR = row_block: rows of up to 4096 columns cached by the block. Longer rows stream.
template <int TPR, class T>
__global__ void __launch_bounds__(row_block, TPR == row_block ? 4 : 3) softmax_kernel(int rows, int cols, const T* x, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  __shared__ float scratch[2][row_block / 32];
  constexpr int V = 16 / sizeof(T);
  const bool vectorised = cols % V == 0 && aligned<16>(x) && aligned<16>(y);
  if constexpr (TPR == 32) {
    constexpr int E = warp_cached_elements;
    if (cols <= warp_row_limit) {
      if (warp_group_size(cols) == 4) {
        if (vectorised) {
          softmax_cached<4, E, V>(rows, cols, x, y, scratch);
        } else {
          softmax_cached<4, E, 1>(rows, cols, x, y, scratch);
        }
      } else {
        if (vectorised) {
          softmax_cached<32, E, V>(rows, cols, x, y, scratch);
        } else {
          softmax_cached<32, E, 1>(rows, cols, x, y, scratch);
        }
      }
      return;
    }
  } else {
    constexpr int E = block_cached_elements;
    if (cols <= row_block * E) {
      if (vectorised) {
        softmax_cached<row_block, E, V>(rows, cols, x, y, scratch);
      } else {
        softmax_cached<row_block, E, 1>(rows, cols, x, y, scratch);
      }
      return;
    }
  }
  softmax_streaming<TPR>(rows, cols, x, y);
}

}  // namespace flowdsl::kernels::detail
