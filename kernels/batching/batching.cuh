// SPDX-License-Identifier: Apache-2.0
// Fixed-shape batching: pad variable-length rows into [batch, width] with a pad value and a
// validity mask, crop them back, gather selected rows. Columns over grid.x and threads, rows
// over grid.y, both with a grid stride (any grid is correct). pad and gather_rows write
// 16-byte chunks when the rows allow it, crop writes 16-byte vectors of its packed output,
// and all three keep batching_rows rows in flight a thread.
#pragma once

#include "../common.cuh"

namespace flowdsl::kernels::detail {

/// Rows a thread of pad and gather_rows handles at once: their loads are all in flight together.
constexpr int batching_rows = 4;

/// W bytes of mask: 1 where valid (W = 1, 4 or 8 bytes, one store).
template <int W>
__device__ __forceinline__ void store_mask(std::uint8_t* mask, const bool (&valid)[W]) {
  if constexpr (W == 1) {
    mask[0] = valid[0] ? 1 : 0;
  } else {
    Vec<std::uint8_t, W> m;
#pragma unroll
    for (int t = 0; t < W; ++t) m.v[t] = valid[t] ? 1 : 0;
    *reinterpret_cast<Vec<std::uint8_t, W>*>(mask) = m;
  }
}

/// pad over chunks of W columns (W = 16 / sizeof(T) when out rows and mask rows are aligned
/// for W-element stores, else 1), batching_rows rows a thread at a time. Values are read
/// element by element: rows start anywhere in `values`.
template <int W, class T>
__device__ __forceinline__ void pad_chunks(std::int32_t batch, std::int32_t width, T pad, const T* values,
                                           const std::int32_t* offsets, T* out, std::uint8_t* mask) {
  constexpr int R = batching_rows;
  const std::int32_t chunks = width / W;
  for (std::int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
    const std::int32_t j0 = c * W;
    for (std::int64_t b0 = static_cast<std::int64_t>(blockIdx.y) * R; b0 < batch; b0 += static_cast<std::int64_t>(gridDim.y) * R) {
      Vec<T, W> v[R];
      bool valid[R][W];
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const std::int64_t b = b0 + u;
        const std::int32_t start = b < batch ? offsets[b] : 0;
        const std::int32_t length = b < batch ? offsets[b + 1] - start : 0;
#pragma unroll
        for (int t = 0; t < W; ++t) {
          valid[u][t] = j0 + t < length;
          v[u].v[t] = valid[u][t] ? values[start + j0 + t] : pad;
        }
      }
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const std::int64_t b = b0 + u;
        if (b < batch) {
          const std::int64_t k = b * width + j0;
          *reinterpret_cast<Vec<T, W>*>(out + k) = v[u];
          if (mask) store_mask<W>(mask + k, valid[u]);
        }
      }
    }
  }
}

template <class T>
__global__ void pad_kernel(std::int32_t batch, std::int32_t width, float pad_value, const T* values,
                           const std::int32_t* offsets, T* out, std::uint8_t* mask) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int V = 16 / sizeof(T);
  const bool vectorised = width % V == 0 && aligned<16>(out) && (mask == nullptr || aligned<V>(mask));
  if (vectorised) {
    pad_chunks<V>(batch, width, from_float<T>(pad_value), values, offsets, out, mask);
  } else {
    pad_chunks<1>(batch, width, from_float<T>(pad_value), values, offsets, out, mask);
  }
}

/// floor(a / V) for a power of two V and any sign of a.
template <int V>
__device__ __forceinline__ std::int64_t floor_div(std::int64_t a) {
  return a >= 0 ? a / V : -((-a + V - 1) / V);
}

/// Element q of crop's packed output, which lies in row r or a later one: in[r', q - offsets[r']]
/// for the row r' holding q, pad past the width.
template <class T>
__device__ __forceinline__ T crop_element(std::int64_t q, std::int32_t r, std::int32_t width, T pad, const T* in,
                                          const std::int32_t* offsets) {
  while (q >= offsets[r + 1]) ++r;
  const std::int64_t j = q - offsets[r];
  return j < width ? in[static_cast<std::int64_t>(r) * width + j] : pad;
}

/// crop: the packed output is cut into 16-byte vectors on 16-byte boundaries, and row b owns
/// the vectors whose first element lies in [offsets[b], offsets[b + 1]) (row 0 also the one
/// holding offsets[0]), so every vector has one writer and is written whole, with one
/// 16-byte store; only the vectors at the two ends of the output are written element by
/// element. The input side is read element by element (a row's start is anywhere against
/// the vectors; neighbouring lanes read neighbouring elements, so L1 serves the overlap). A
/// vector that runs past its row's end takes the rest from the rows after it. Each thread
/// takes batching_rows rows at a time, all their loads in flight before the stores.
template <class T>
__global__ void crop_kernel(std::int32_t batch, std::int32_t width, float pad_value, const T* in, const std::int32_t* offsets,
                            T* values) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int V = 16 / sizeof(T);
  constexpr int R = batching_rows;
  if (batch <= 0) return;
  const T pad = from_float<T>(pad_value);
  // Output positions p on a 16-byte boundary: p % V == phase.
  const std::int64_t phase = ((16 - reinterpret_cast<std::uintptr_t>(values) % 16) % 16) / sizeof(T);
  const std::int64_t first = offsets[0], last = offsets[batch];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * V;
  for (std::int64_t b0 = static_cast<std::int64_t>(blockIdx.y) * R; b0 < batch; b0 += static_cast<std::int64_t>(gridDim.y) * R) {
    std::int64_t start[R], end[R], owned[R];  // row range; first owned vector position
    std::int64_t longest = 0;
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const std::int64_t b = b0 + u;
      start[u] = b < batch ? offsets[b] : 0;
      end[u] = b < batch ? offsets[b + 1] : 0;
      const std::int64_t lo = b == 0 ? start[u] - V + 1 : start[u];
      owned[u] = phase + floor_div<V>(lo - phase + V - 1) * V;
      longest = end[u] - owned[u] > longest ? end[u] - owned[u] : longest;
    }
    for (std::int64_t j = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V; j < longest; j += stride) {
      Vec<T, V> v[R];
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const std::int64_t p = owned[u] + j;
        if (p >= end[u]) continue;
        const std::int32_t b = static_cast<std::int32_t>(b0 + u);
        if (p >= start[u] && p + V <= end[u]) {  // inside the row: its elements p - start .. + V
          const T* row = in + static_cast<std::int64_t>(b) * width;
#pragma unroll
          for (int t = 0; t < V; ++t) v[u].v[t] = p - start[u] + t < width ? row[p - start[u] + t] : pad;
        } else {
#pragma unroll
          for (int t = 0; t < V; ++t) {
            const std::int64_t q = p + t;
            v[u].v[t] = q >= first && q < last ? crop_element(q, b, width, pad, in, offsets) : pad;
          }
        }
      }
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const std::int64_t p = owned[u] + j;
        if (p >= end[u]) continue;
        if (p >= first && p + V <= last) {
          *reinterpret_cast<Vec<T, V>*>(values + p) = v[u];
        } else {
#pragma unroll
          for (int t = 0; t < V; ++t) {
            if (p + t >= first && p + t < last) values[p + t] = v[u].v[t];
          }
        }
      }
    }
  }
}

/// gather_rows over chunks of W columns (W = 16 / sizeof(T) when every row is 16-byte
/// aligned, else 1), batching_rows rows a thread at a time; row index[r] - first of in.
template <int W, class T>
__device__ __forceinline__ void gather_chunks(std::int32_t count, std::int32_t cols, const std::int32_t* index,
                                              std::int32_t first, std::int32_t src_rows, const T* in, T* out) {
  constexpr int R = batching_rows;
  using Chunk = Vec<T, W>;
  Chunk zero;
#pragma unroll
  for (int t = 0; t < W; ++t) zero.v[t] = from_float<T>(0.0f);
  const std::int32_t chunks = cols / W;
  for (std::int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
    for (std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * R; r0 < count; r0 += static_cast<std::int64_t>(gridDim.y) * R) {
      Chunk v[R];
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const std::int64_t src = r0 + u < count ? std::int64_t{index[r0 + u]} - first : -1;
        v[u] = src >= 0 && src < src_rows ? reinterpret_cast<const Chunk*>(in + static_cast<std::int64_t>(src) * cols)[c] : zero;
      }
#pragma unroll
      for (int u = 0; u < R; ++u) {
        if (r0 + u < count) reinterpret_cast<Chunk*>(out + (r0 + u) * cols)[c] = v[u];
      }
    }
  }
}

template <class T>
__device__ __forceinline__ void gather_rows_body(std::int32_t count, std::int32_t cols, const std::int32_t* index,
                                                 std::int32_t first, std::int32_t src_rows, const T* in, T* out) {
  constexpr int V = 16 / sizeof(T);
  if (cols % V == 0 && aligned<16>(in) && aligned<16>(out)) {
    gather_chunks<V>(count, cols, index, first, src_rows, in, out);
  } else {
    gather_chunks<1>(count, cols, index, first, src_rows, in, out);
  }
}

template <class T>
__global__ void gather_rows_kernel(std::int32_t count, std::int32_t cols, const std::int32_t* index, std::int32_t src_rows,
                                   const T* in, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  gather_rows_body(count, cols, index, 0, src_rows, in, out);
}

/// gather_rows of the rows first .. first + src_rows of a larger table, of which `in` holds
/// just those (a rank's share of an embedding split by vocabulary).
template <class T>
__global__ void gather_rows_from_kernel(std::int32_t count, std::int32_t cols, const std::int32_t* index,
                                        std::int32_t first, std::int32_t src_rows, const T* in, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  gather_rows_body(count, cols, index, first, src_rows, in, out);
}

}  // namespace flowdsl::kernels::detail
