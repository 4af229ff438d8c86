// SPDX-License-Identifier: Apache-2.0
// A row held in registers by a group of threads, so that a row operation (softmax, layer
// normalisation) reads the row from device memory once: the group loads it, reduces over it
// as often as it needs, and writes the result.
//
// A group is G consecutive threads: a power of two up to 32 (lanes of one warp, reduced with
// shuffles) or row_block (the whole block, reduced through shared memory). Each thread holds
// up to E elements of the row in chunks of W: W = 16 / sizeof(T) (16-byte vectors, when every
// row starts on a 16-byte boundary and cols % W == 0) or W = 1 (any alignment). Chunk k of the
// thread of rank q is chunk q + G k of the row, so a group's loads are coalesced.
#pragma once

#include "block_reduce.cuh"

namespace flowdsl::kernels::detail {

/// Reduces `value` over the aligned group of G threads; every thread of the group gets the
/// same result (a butterfly: each step combines commutatively). Every thread of the warp
/// (G <= 32) or of the block (G = row_block) must call it. For G = row_block, `scratch` is
/// row_block / 32 floats of shared memory with one barrier per call: consecutive calls must
/// alternate between two scratch arrays (a call's barrier is what guarantees that the
/// previous call's scratch has been read by every thread before it is written again).
template <int G, class Op>
__device__ __forceinline__ float group_allreduce(float value, Op op, [[maybe_unused]] float* scratch) {
  static_assert(G == row_block || (G <= 32 && (G & (G - 1)) == 0), "a group is a power of two up to a warp, or the block");
  constexpr int lanes = G < 32 ? G : 32;
#pragma unroll
  for (int offset = lanes / 2; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if constexpr (G == row_block) {
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
    __syncthreads();
    value = scratch[0];
#pragma unroll
    for (int w = 1; w < row_block / 32; ++w) value = op(value, scratch[w]);
  }
  return value;
}

/// The E elements of a row that one thread of a G-thread group holds, as floats.
template <class T, int G, int E, int W>
struct RowSlice {
  static_assert(E % W == 0, "whole chunks per thread");
  static constexpr int chunks = E / W;
  /// Elements the whole group holds: rows of up to this many columns fit.
  static constexpr int capacity = G * E;

  float v[E];

  /// First column of chunk k of the thread of rank q.
  __device__ static int column(int q, int k) { return (q + G * k) * W; }

  /// Loads this thread's part of `row` (all loads in flight at once); `fill` past the end
  /// (for_each and store skip those).
  __device__ __forceinline__ void load(const T* row, int cols, int q, float fill = 0.0f) {
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
      const int c = column(q, k);
      if constexpr (W == 1) {
        v[k] = c < cols ? to_float(row[c]) : fill;
      } else {
        if (c < cols) {
          const Vec<T, W> in = *reinterpret_cast<const Vec<T, W>*>(row + c);
#pragma unroll
          for (int j = 0; j < W; ++j) v[k * W + j] = to_float(in.v[j]);
        } else {
#pragma unroll
          for (int j = 0; j < W; ++j) v[k * W + j] = fill;
        }
      }
    }
  }

  /// Calls f(value) for each element inside the row (f may take it by reference and update
  /// it). A chunk past the end of every row of the warp is skipped by the whole warp.
  template <class F>
  __device__ __forceinline__ void for_each(int cols, int q, F&& f) {
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
      if (column(q, k) < cols) {
#pragma unroll
        for (int j = 0; j < W; ++j) f(v[k * W + j]);
      }
    }
  }

  /// Stores f(c0, j, value) for each element inside the row, element j of the chunk at column
  /// c0 (c0 a multiple of W; j a compile-time constant after unrolling).
  template <class F>
  __device__ __forceinline__ void store(T* row, int cols, int q, F&& f) const {
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
      const int c = column(q, k);
      if (c < cols) {
        if constexpr (W == 1) {
          row[c] = from_float<T>(f(c, 0, v[k]));
        } else {
          Vec<T, W> out;
#pragma unroll
          for (int j = 0; j < W; ++j) out.v[j] = from_float<T>(f(c, j, v[k * W + j]));
          *reinterpret_cast<Vec<T, W>*>(row + c) = out;
        }
      }
    }
  }
};

/// Runs body(row, q, active) for every row, G threads a row. For G <= 32 a warp takes 32 / G
/// consecutive rows at a time and loops while any of them exists (uniform within the warp, as
/// group_allreduce needs); `active` says whether this thread's row exists. For G = row_block
/// the block takes one row at a time (uniform within the block).
template <int G, class Body>
__device__ __forceinline__ void for_each_row_group(int rows, Body&& body) {
  if constexpr (G == row_block) {
    for (int row = blockIdx.x; row < rows; row += gridDim.x) body(row, static_cast<int>(threadIdx.x), true);
  } else {
    constexpr int per_warp = 32 / G;
    constexpr int per_block = row_block / G;
    const int lane = threadIdx.x % 32;
    for (int first = blockIdx.x * per_block + threadIdx.x / 32 * per_warp; first < rows; first += gridDim.x * per_block) {
      const int row = first + lane / G;
      body(row, lane % G, row < rows);
    }
  }
}

/// Threads a row for rows of `cols` columns in the warp-per-row kernels (cols <= warp_row_limit):
/// 4 for rows of up to 128 columns (8 rows a warp, no idle lanes), else the whole warp.
__host__ __device__ constexpr int warp_group_size(int cols) { return cols <= 128 ? 4 : 32; }

/// Elements a thread holds: warp groups cache rows of up to warp_row_limit columns (32 a lane
/// for a whole warp, 32 a lane for 4 lanes: up to 128 columns); a block caches rows of up to
/// 4096 columns.
constexpr int warp_cached_elements = warp_row_limit / 32;
constexpr int block_cached_elements = 16;
static_assert(4 * warp_cached_elements >= 128 && 32 * warp_cached_elements >= warp_row_limit,
              "warp groups cache every row that warp_group_size gives them");

}  // namespace flowdsl::kernels::detail
