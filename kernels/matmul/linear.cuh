// SPDX-License-Identifier: Apache-2.0
// A linear layer at small batch: y[m, n] = x[m, k] · w[n, k]^T, the weights in the layout
// Hugging Face and PyTorch keep them ([out, in], row-major). For m up to a few dozen rows this
// is a matrix-vector product bound by reading the weights once, where a tiled GEMM leaves most
// of its tiles empty: one warp takes one output feature at a time, streams its weight row with
// 16-byte loads (several in flight a lane, L1 bypassed, since each weight is read once) and
// multiplies it with each of the rows of x, which every warp of the GPU reads and so stay in L1
// and L2. A warp-wide butterfly sum ends each feature.
//
// Rows of x are taken `linear_rows` at a time (m above that re-reads the weights once a tile:
// prefer cublaslt_linear there). The gated form multiplies by silu(gate) * up instead of x,
// where gate and up are the two halves of a [m, 2k] tensor (a SwiGLU MLP's fused gate and up
// projection), so the element-wise product is never written out.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

constexpr int linear_block = 256;  ///< 8 warps
constexpr int linear_rows = 8;     ///< rows of x a pass holds accumulators for
constexpr int linear_unroll = 4;   ///< 16-byte weight loads a lane has in flight

/// 16 bytes of weights, read once: not kept in L1, where x lives.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

/// The 16 / sizeof(T) elements of a 16-byte vector as floats.
template <class T>
__device__ __forceinline__ void unpack(const uint4& v, float* out) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < int(16 / sizeof(T)); ++i) out[i] = to_float(e[i]);
}

/// silu(gate) * up rounded as a bf16 or f16 model computes it (Hugging Face's LlamaMLP): the
/// activation to T, then the product to T.
/// For 16-bit T, silu through __expf and __fdividef: their few-ulp float error vanishes in the
/// rounding to T, and the down projection computes it once a weight row it reads.
template <class T>
__device__ __forceinline__ float gated(float gate, float up) {
  const float activated = std::is_same_v<T, float> ? silu(gate) : __fdividef(gate, 1.0f + __expf(-gate));
  return to_float(from_float<T>(to_float(from_float<T>(activated)) * up));
}

/// The input of row `r` at vector `i` (16 / sizeof(T) elements): x, or silu(gate) * up.
template <class T, bool Gated>
__device__ __forceinline__ void input_vector(const T* x, std::int64_t row_stride, int r, std::int64_t i, std::int64_t k,
                                             float* out) {
  constexpr int V = 16 / sizeof(T);
  const T* row = x + r * row_stride;
  unpack<T>(__ldg(reinterpret_cast<const uint4*>(row) + i), out);
  if constexpr (Gated) {
    float up[V];
    unpack<T>(__ldg(reinterpret_cast<const uint4*>(row + k) + i), up);
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = gated<T>(out[e], up[e]);
  }
}

/// The input of row `r` at element `c`.
template <class T, bool Gated>
__device__ __forceinline__ float input_element(const T* x, std::int64_t row_stride, int r, std::int64_t c, std::int64_t k) {
  const T* row = x + r * row_stride;
  const float v = to_float(row[c]);
  if constexpr (Gated) {
    return gated<T>(v, to_float(row[c + k]));
  } else {
    return v;
  }
}

/// acc[r] += w · input(r) over one 16-byte vector of weights, for rows 0 .. rows.
template <class T, bool Gated, int R>
__device__ __forceinline__ void accumulate(float (&acc)[R], const uint4& wv, const T* x, std::int64_t row_stride, int rows,
                                           std::int64_t i, std::int64_t k) {
  constexpr int V = 16 / sizeof(T);
  float w[V];
  unpack<T>(wv, w);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows) {
      float in[V];
      input_vector<T, Gated>(x, row_stride, r, i, k, in);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r] = fmaf(w[e], in[e], acc[r]);
    }
  }
}

/// Features f = first, first + warps, ... of rows row0 .. row0 + rows of the output, with R >= rows
/// accumulators a lane (R a compile-time bound, so that they stay in registers).
template <class T, bool Gated, int R>
__device__ __forceinline__ void linear_rows_pass(std::int32_t n, std::int32_t k, const T* xt, std::int64_t row_stride,
                                                 int rows, const T* w, T* yt, bool vectors) {
  constexpr int V = 16 / sizeof(T);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = std::int64_t{gridDim.x} * (linear_block / 32);
  const std::int64_t first = std::int64_t{blockIdx.x} * (linear_block / 32) + threadIdx.x / 32;
  for (std::int64_t f = first; f < n; f += warps) {
    float acc[R] = {};
    const T* wf = w + f * k;
    if (vectors) {
      const auto* wv = reinterpret_cast<const uint4*>(wf);
      const std::int64_t count = k / V;
      std::int64_t i = lane;
      for (; i + 32 * (linear_unroll - 1) < count; i += 32 * linear_unroll) {
        uint4 loaded[linear_unroll];
#pragma unroll
        for (int u = 0; u < linear_unroll; ++u) loaded[u] = load_streaming(wv + i + 32 * u);
#pragma unroll
        for (int u = 0; u < linear_unroll; ++u) accumulate<T, Gated>(acc, loaded[u], xt, row_stride, rows, i + 32 * u, k);
      }
      for (; i < count; i += 32) accumulate<T, Gated>(acc, load_streaming(wv + i), xt, row_stride, rows, i, k);
    } else {
      for (std::int64_t c = lane; c < k; c += 32) {
        const float wc = to_float(wf[c]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r < rows) acc[r] = fmaf(wc, input_element<T, Gated>(xt, row_stride, r, c, k), acc[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
    }
    // Lane r writes row r's feature.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (lane == r && r < rows) yt[r * std::int64_t{n} + f] = from_float<T>(acc[r]);
    }
  }
}

template <class T, bool Gated>
__global__ void __launch_bounds__(linear_block)
    linear_kernel(std::int32_t m, std::int32_t n, std::int32_t k, const T* x, const T* w, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int V = 16 / sizeof(T);
  const std::int64_t row_stride = Gated ? 2 * std::int64_t{k} : std::int64_t{k};
  // 16-byte vectors need k a multiple of V and the rows 16-byte aligned.
  const bool vectors = k % V == 0 && aligned<16>(x) && aligned<16>(w);
  for (std::int32_t row0 = 0; row0 < m; row0 += linear_rows) {
    const int rows = min(linear_rows, m - row0);
    const T* xt = x + row0 * row_stride;
    T* yt = y + row0 * std::int64_t{n};
    // As few accumulators as the rows need: a batch of one sums one value a lane.
    if (rows == 1) {
      linear_rows_pass<T, Gated, 1>(n, k, xt, row_stride, rows, w, yt, vectors);
    } else if (rows == 2) {
      linear_rows_pass<T, Gated, 2>(n, k, xt, row_stride, rows, w, yt, vectors);
    } else if (rows <= 4) {
      linear_rows_pass<T, Gated, 4>(n, k, xt, row_stride, rows, w, yt, vectors);
    } else {
      linear_rows_pass<T, Gated, linear_rows>(n, k, xt, row_stride, rows, w, yt, vectors);
    }
  }
}

}  // namespace flowdsl::kernels::detail
