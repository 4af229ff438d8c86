// SPDX-License-Identifier: Apache-2.0
// Row-wise layer normalisation: y = (x - mean) / sqrt(var + eps) * gamma + beta.
//
// Rows that fit in registers (row_cache.cuh: up to warp_row_limit columns in the warp kernel,
// 4096 in the block kernel) are read once, and their statistics take two exact passes over
// the registers: the mean, then the mean of (x - mean)^2. Longer rows take one pass for the
// statistics, as sums of (x - shift) and (x - shift)^2 with shift = the row's first element
// (which avoids the cancellation of the plain sum of squares when the mean is large against
// the spread), and one pass to write, re-reading the row from L1/L2.
#pragma once

#include <cstring>
#include <type_traits>

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

/// Longest rows of 16-bit elements that the block kernel gives a warp each (layer_norm_packed).
constexpr int packed_row_limit = 4096;

/// The two 16-bit elements of a 32-bit word, as floats (low half first).
template <class T>
__device__ __forceinline__ float2 unpack2(std::uint32_t word) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
  } else {
    __half2 pair;
    memcpy(&pair, &word, sizeof(pair));
    return __half22float2(pair);
  }
}

/// Hides the row's words from the optimiser before a pass over them, so that each pass
/// converts them to float again rather than keeping 128 converted floats alive from the
/// first pass (which made ptxas spill): the row stays 64 registers.
__device__ __forceinline__ void reconvert(uint4 (&words)[packed_row_limit / 256]) {
#pragma unroll
  for (int k = 0; k < packed_row_limit / 256; ++k) asm volatile("" : "+r"(words[k].x), "+r"(words[k].y), "+r"(words[k].z), "+r"(words[k].w));
}

/// Calls f(k, j, value) for element j (0..7) of each of this lane's 16-byte chunks k inside
/// the row (chunk k of lane `lane` is chunk lane + 32 k of the row).
template <class T, class F>
__device__ __forceinline__ void for_each_packed(const uint4 (&words)[packed_row_limit / 256], int cols, int lane, F&& f) {
#pragma unroll
  for (int k = 0; k < packed_row_limit / 256; ++k) {
    if ((lane + 32 * k) * 8 < cols) {
      const std::uint32_t w[4] = {words[k].x, words[k].y, words[k].z, words[k].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 pair = unpack2<T>(w[q]);
        f(k, 2 * q, pair.x);
        f(k, 2 * q + 1, pair.y);
      }
    }
  }
}

/// 16-bit rows of up to packed_row_limit columns, 16-byte aligned, cols % 8 == 0: a warp a
/// row, the row held in registers as loaded (16 chunks of 8 elements a lane: 64 registers),
/// so that 16 loads a lane are in flight at once and the statistics need only warp shuffles,
/// no block barrier; the warps of a block take rows independently. Same arithmetic as
/// layer_norm_cached: the mean of x - x[0], then the mean of (x - mean)^2.
template <class T>
__device__ __forceinline__ void layer_norm_packed(int rows, int cols, float eps, const T* x, const float* gamma,
                                                  const float* beta, T* y) {
  constexpr int chunks = packed_row_limit / 256;
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  for (int row = blockIdx.x * warps + threadIdx.x / 32; row < rows; row += gridDim.x * warps) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    const uint4* in = reinterpret_cast<const uint4*>(x + offset);
    uint4 words[chunks];
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
      if ((lane + 32 * k) * 8 < cols) words[k] = in[lane + 32 * k];
    }
    const float shift = __shfl_sync(0xffffffffu, unpack2<T>(words[0].x).x, 0);  // x[0], lane 0's
    float sum = 0.0f;
    for_each_packed<T>(words, cols, lane, [&](int, int, float v) { sum += v - shift; });
    const float mean = shift + group_allreduce<32>(sum, SumOp{}, nullptr) / static_cast<float>(cols);
    reconvert(words);
    float squares = 0.0f;
    for_each_packed<T>(words, cols, lane, [&](int, int, float v) { squares += (v - mean) * (v - mean); });
    const float inverse = rsqrtf(group_allreduce<32>(squares, SumOp{}, nullptr) / static_cast<float>(cols) + eps);
    reconvert(words);
    // gamma and beta of a chunk's 8 columns: 4 float4 loads a chunk, not 2 an element (per
    // element they kept the L1 at 92% of its throughput and the row at 44% of the copy's).
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
      const int c0 = (lane + 32 * k) * 8;
      if (c0 >= cols) continue;
      const float4 g[2] = {*reinterpret_cast<const float4*>(gamma + c0), *reinterpret_cast<const float4*>(gamma + c0 + 4)};
      const float4 b[2] = {*reinterpret_cast<const float4*>(beta + c0), *reinterpret_cast<const float4*>(beta + c0 + 4)};
      const std::uint32_t w[4] = {words[k].x, words[k].y, words[k].z, words[k].w};
      Vec<T, 8> result;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 pair = unpack2<T>(w[q]);
        const int j = 2 * q;
        result.v[j] = from_float<T>((pair.x - mean) * inverse * component(g[j / 4], j & 3) + component(b[j / 4], j & 3));
        result.v[j + 1] =
            from_float<T>((pair.y - mean) * inverse * component(g[j / 4], (j + 1) & 3) + component(b[j / 4], (j + 1) & 3));
      }
      reinterpret_cast<Vec<T, 8>*>(y + offset)[lane + 32 * k] = result;
    }
  }
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
/// warp; TPR = row_block: aligned 16-bit rows of up to packed_row_limit columns a warp each
/// (layer_norm_packed; 2 blocks an SM for its registers: 16 rows in flight), other rows of up
/// to 4096 columns cached by the block. Longer rows stream.
template <int TPR, class T>
__global__ void __launch_bounds__(row_block, TPR == row_block ? (sizeof(T) == 2 ? 2 : 4) : 3) layer_norm_kernel(int rows, int cols, float eps, const T* x, const float* gamma,
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
    if constexpr (sizeof(T) == 2) {
      if (vectorised && cols <= packed_row_limit) {
        layer_norm_packed(rows, cols, eps, x, gamma, beta, y);
        return;
      }
    }
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
