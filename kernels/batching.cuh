// Fixed-shape batching: pad variable-length rows into [batch, width] with a pad value and a
// validity mask, crop them back, gather selected rows. Columns over grid.x and threads, rows
// over grid.y, both with a grid stride (any grid is correct). pad and gather_rows write
// 16-byte chunks when the rows allow it and keep batching_rows rows in flight a thread.
#pragma once

#include "common.cuh"

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

/// crop: batching_rows rows a thread at a time, so that several loads are in flight before the
/// first store (the packed output rows start anywhere, so accesses stay element-wide).
template <class T>
__global__ void crop_kernel(std::int32_t batch, std::int32_t width, float pad_value, const T* in, const std::int32_t* offsets,
                            T* values) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int R = batching_rows;
  const T pad = from_float<T>(pad_value);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t b0 = static_cast<std::int64_t>(blockIdx.y) * R; b0 < batch; b0 += static_cast<std::int64_t>(gridDim.y) * R) {
    std::int32_t start[R], length[R];
    std::int32_t longest = 0;
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const bool row = b0 + u < batch;
      start[u] = row ? offsets[b0 + u] : 0;
      length[u] = row ? offsets[b0 + u + 1] - start[u] : 0;
      longest = length[u] > longest ? length[u] : longest;
    }
    for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < longest; j += stride) {
      T v[R];
#pragma unroll
      for (int u = 0; u < R; ++u) v[u] = j < length[u] && j < width ? in[(b0 + u) * width + j] : pad;
#pragma unroll
      for (int u = 0; u < R; ++u) {
        if (j < length[u]) values[start[u] + j] = v[u];
      }
    }
  }
}

/// gather_rows over chunks of W columns (W = 16 / sizeof(T) when every row is 16-byte
/// aligned, else 1), batching_rows rows a thread at a time.
template <int W, class T>
__device__ __forceinline__ void gather_chunks(std::int32_t count, std::int32_t cols, const std::int32_t* index,
                                              std::int32_t src_rows, const T* in, T* out) {
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
        const std::int32_t src = r0 + u < count ? index[r0 + u] : -1;
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
__global__ void gather_rows_kernel(std::int32_t count, std::int32_t cols, const std::int32_t* index, std::int32_t src_rows,
                                   const T* in, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int V = 16 / sizeof(T);
  if (cols % V == 0 && aligned<16>(in) && aligned<16>(out)) {
    gather_chunks<V>(count, cols, index, src_rows, in, out);
  } else {
    gather_chunks<1>(count, cols, index, src_rows, in, out);
  }
}

}  // namespace flowdsl::kernels::detail
