// Row-wise layer normalisation: y = (x - mean) / sqrt(var + eps) * gamma + beta.
//
// Rows that fit in registers (row_cache.cuh: up to warp_row_limit columns in the warp kernel,
// 4096 in the block kernel) are read once, and their statistics take two exact passes over
// the registers: the mean, then the mean of (x - mean)^2. Longer rows take one pass for the
// statistics, as sums of (x - shift) and (x - shift)^2 with shift = the row's first element
// (which avoids the cancellation of the plain sum of squares when the mean is large against
// the spread), and one pass to write, re-reading the row from L1/L2.
#pragma once

#include "row_cache.cuh"

namespace flowdsl::kernels::detail {

/// Component i (0..3) of a float4; i is a compile-time constant where this is called.
__device__ __forceinline__ float component(const float4& f, int i) { return i == 0 ? f.x : i == 1 ? f.y : i == 2 ? f.z : f.w; }

template <int G, int E, int W, class T>
__device__ __forceinline__ void layer_norm_cached(int rows, int cols, float eps, const T* x, const float* gamma,
                                                  const float* beta, T* y, float (&scratch)[2][row_block / 32]) {
  for_each_row_group<G>(rows, [&](int row, int q, bool active) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    const int valid = active ? cols : 0;
    RowSlice<T, G, E, W> slice;
    slice.load(x + offset, valid, q);
    // Summing x - x[0] rather than x keeps the rounding of the sum at the scale of the row's
    // spread, not of its mean: a row of large mean and small variance keeps its precision.
    const float shift = active ? to_float(x[offset]) : 0.0f;
    float sum = 0.0f;
    slice.for_each(valid, q, [&](float v) { sum += v - shift; });
    const float mean = shift + group_allreduce<G>(sum, SumOp{}, scratch[0]) / static_cast<float>(cols);
    float squares = 0.0f;
    slice.for_each(valid, q, [&](float v) { squares += (v - mean) * (v - mean); });
    const float variance = group_allreduce<G>(squares, SumOp{}, scratch[1]) / static_cast<float>(cols);
    const float inverse = rsqrtf(variance + eps);
    if (!active) return;
    if constexpr (W == 1) {
      slice.store(y + offset, cols, q, [&](int c, int, float v) { return (v - mean) * inverse * gamma[c] + beta[c]; });
    } else {
      // c0 is a multiple of W (4 or 8) and gamma, beta are 16-byte aligned: read them in float4s.
      slice.store(y + offset, cols, q, [&](int c0, int j, float v) {
        const float4 g = *reinterpret_cast<const float4*>(gamma + c0 + (j & ~3));
        const float4 b = *reinterpret_cast<const float4*>(beta + c0 + (j & ~3));
        return (v - mean) * inverse * component(g, j & 3) + component(b, j & 3);
      });
    }
  });
}

/// Any number of columns: shifted sums in one pass, then the write pass. Not inlined: kept
/// out of the cached paths' register allocation (inlined, it made ptxas spill).
template <int TPR, class T>
__device__ __noinline__ void layer_norm_streaming(int rows, int cols, float eps, const T* x, const float* gamma,
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
    map_row<TPR>(r, out, cols, groups.lane(), [&](int c, float v) { return (v - mean) * inverse * gamma[c] + beta[c]; });
  }
}

/// TPR = 32: rows of up to warp_row_limit columns cached by 4 lanes (up to 128 columns) or a
/// warp; TPR = row_block: rows of up to 4096 columns cached by the block. Longer rows stream.
template <int TPR, class T>
__global__ void __launch_bounds__(row_block, TPR == row_block ? 4 : 3) layer_norm_kernel(int rows, int cols, float eps, const T* x, const float* gamma,
                                                               const float* beta, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  __shared__ float scratch[2][row_block / 32];
  constexpr int V = 16 / sizeof(T);
  const bool vectorised = cols % V == 0 && aligned<16>(x) && aligned<16>(y) && aligned<16>(gamma) && aligned<16>(beta);
  if constexpr (TPR == 32) {
    constexpr int E = warp_cached_elements;
    if (cols <= warp_row_limit) {
      if (warp_group_size(cols) == 4) {
        if (vectorised) {
          layer_norm_cached<4, E, V>(rows, cols, eps, x, gamma, beta, y, scratch);
        } else {
          layer_norm_cached<4, E, 1>(rows, cols, eps, x, gamma, beta, y, scratch);
        }
      } else {
        if (vectorised) {
          layer_norm_cached<32, E, V>(rows, cols, eps, x, gamma, beta, y, scratch);
        } else {
          layer_norm_cached<32, E, 1>(rows, cols, eps, x, gamma, beta, y, scratch);
        }
      }
      return;
    }
  } else {
    constexpr int E = block_cached_elements;
    if (cols <= row_block * E) {
      if (vectorised) {
        layer_norm_cached<row_block, E, V>(rows, cols, eps, x, gamma, beta, y, scratch);
      } else {
        layer_norm_cached<row_block, E, 1>(rows, cols, eps, x, gamma, beta, y, scratch);
      }
      return;
    }
  }
  layer_norm_streaming<TPR>(rows, cols, eps, x, gamma, beta, y);
}

}  // namespace flowdsl::kernels::detail
