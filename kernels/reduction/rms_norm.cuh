// SPDX-License-Identifier: Apache-2.0
// Root-mean-square normalisation of rows, as transformer decoders (Llama) apply it before their
// attention and MLP: y = T(T(x * rsqrt(mean(x^2) + eps)) * w), float math, the normalised value
// rounded to the element type before the weight multiplies it (as Hugging Face's LlamaRMSNorm
// does). add_rms_norm first adds the branch output into the residual stream in place,
// residual = T(residual + x), and normalises the sum: the two memory passes of a decoder layer's
// seam in one kernel. A block per row, striding over rows; each thread reads its columns once
// into registers where the row fits (rms_cached_columns a thread), else twice.
#pragma once

#include <cstdint>

#include "block_reduce.cuh"

namespace flowdsl::kernels::detail {

/// Columns each thread keeps in registers between the statistics and the write.
constexpr int rms_cached_columns = 16;

/// Normalises row `row` of `x` (already holding the residual sum where `Add`) into `y`.
/// `cached` holds the thread's first columns as floats (column threadIdx.x + k * row_block).
/// The weights are read before the block's sum (their loads in flight during it) and before any
/// write: y could alias w as far as the compiler knows, so reads after a write would each wait.
template <class T>
__device__ __forceinline__ void rms_normalise_row(std::int64_t offset, int cols, float eps, const T* x, const T* w, T* y,
                                                  const float (&cached)[rms_cached_columns], float sum_squares) {
  float weight[rms_cached_columns];
#pragma unroll
  for (int k = 0; k < rms_cached_columns; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * row_block;
    weight[k] = c < cols ? to_float(w[c]) : 0.0f;
  }
  const float inverse = rsqrtf(group_reduce<row_block>(sum_squares, SumOp{}) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int k = 0; k < rms_cached_columns; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * row_block;
    if (c < cols) y[offset + c] = from_float<T>(to_float(from_float<T>(cached[k] * inverse)) * weight[k]);
  }
  for (int c = static_cast<int>(threadIdx.x) + rms_cached_columns * row_block; c < cols; c += row_block) {
    y[offset + c] = from_float<T>(to_float(from_float<T>(to_float(x[offset + c]) * inverse)) * to_float(w[c]));
  }
}

template <class T>
__global__ void __launch_bounds__(row_block) rms_norm_kernel(std::int32_t rows, std::int32_t cols, float eps, const T* x,
                                                             const T* w, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for (std::int32_t row = static_cast<std::int32_t>(blockIdx.x); row < rows; row += static_cast<std::int32_t>(gridDim.x)) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    float cached[rms_cached_columns];
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < rms_cached_columns; ++k) {
      const int c = static_cast<int>(threadIdx.x) + k * row_block;
      cached[k] = c < cols ? to_float(x[offset + c]) : 0.0f;
      squares += cached[k] * cached[k];
    }
    for (int c = static_cast<int>(threadIdx.x) + rms_cached_columns * row_block; c < cols; c += row_block) {
      const float v = to_float(x[offset + c]);
      squares += v * v;
    }
    rms_normalise_row(offset, cols, eps, x, w, y, cached, squares);
  }
}

template <class T>
__global__ void __launch_bounds__(row_block) add_rms_norm_kernel(std::int32_t rows, std::int32_t cols, float eps, T* residual,
                                                                 const T* x, const T* w, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for (std::int32_t row = static_cast<std::int32_t>(blockIdx.x); row < rows; row += static_cast<std::int32_t>(gridDim.x)) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    // Every cached column's two inputs are read before the first sum is written (residual
    // could alias x as far as the compiler knows: reads after a write would each wait for it).
    float cached[rms_cached_columns], branch[rms_cached_columns];
#pragma unroll
    for (int k = 0; k < rms_cached_columns; ++k) {
      const int c = static_cast<int>(threadIdx.x) + k * row_block;
      cached[k] = c < cols ? to_float(residual[offset + c]) : 0.0f;
      branch[k] = c < cols ? to_float(x[offset + c]) : 0.0f;
    }
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < rms_cached_columns; ++k) {
      const int c = static_cast<int>(threadIdx.x) + k * row_block;
      const T sum = from_float<T>(cached[k] + branch[k]);
      cached[k] = c < cols ? to_float(sum) : 0.0f;
      if (c < cols) residual[offset + c] = sum;
      squares += cached[k] * cached[k];
    }
    for (int c = static_cast<int>(threadIdx.x) + rms_cached_columns * row_block; c < cols; c += row_block) {
      const T sum = from_float<T>(to_float(residual[offset + c]) + to_float(x[offset + c]));
      residual[offset + c] = sum;
      squares += to_float(sum) * to_float(sum);
    }
    // Each thread re-reads only the columns it wrote itself (past the cached ones): no barrier
    // is needed between the write of the sum and its read.
    rms_normalise_row(offset, cols, eps, static_cast<const T*>(residual), w, y, cached, squares);
  }
}

}  // namespace flowdsl::kernels::detail
