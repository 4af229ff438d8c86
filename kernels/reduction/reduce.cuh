// SPDX-License-Identifier: Apache-2.0
// Reductions: row-wise sum, max, mean and argmax of a row-major [rows, cols] tensor (a warp
// or a block per row), and a deterministic whole-array sum (per-block partials in double,
// then one block adds them: the same grid gives the same bits, no atomics).
#pragma once

#include <climits>

#include "argmax_key.hpp"
#include "block_reduce.cuh"

namespace flowdsl::kernels::detail {

enum class RowOp { sum, max, mean };

template <int TPR, class T, RowOp Op>
__global__ void __launch_bounds__(row_block) row_reduce_kernel(int rows, int cols, const T* x, float* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  const RowGroups<TPR> groups;
  // Uniform trip count across the block when TPR == row_block (group_reduce synchronises).
  for (int row = groups.first(); row < rows; row += groups.stride()) {
    const T* r = x + static_cast<std::int64_t>(row) * cols;
    float acc = Op == RowOp::max ? -INFINITY : 0.0f;
    for_each_in_row<TPR>(r, cols, groups.lane(), [&](int, float v) { acc = Op == RowOp::max ? fmaxf(acc, v) : acc + v; });
    float total;
    if constexpr (Op == RowOp::max) {
      total = group_reduce<TPR>(acc, MaxOp{});
    } else {
      total = group_reduce<TPR>(acc, SumOp{});
    }
    if (groups.lane() == 0) out[row] = Op == RowOp::mean ? total / static_cast<float>(cols) : total;
  }
}

/// Each row's argmax (value and first index; index INT_MAX for an empty row), handed to
/// write(row, pair) on the row group's first lane.
template <int TPR, class T, class Write>
__device__ __forceinline__ void for_each_row_argmax(int rows, int cols, const T* x, Write write) {
  const RowGroups<TPR> groups;
  for (int row = groups.first(); row < rows; row += groups.stride()) {
    const T* r = x + static_cast<std::int64_t>(row) * cols;
    ArgMaxPair best{-INFINITY, INT_MAX};
    for_each_in_row<TPR>(r, cols, groups.lane(), [&](int c, float v) { best = ArgMaxOp{}(best, ArgMaxPair{v, c}); });
    const ArgMaxPair total = group_reduce<TPR>(best, ArgMaxOp{});
    if (groups.lane() == 0) write(row, total);
  }
}

template <int TPR, class T>
__global__ void __launch_bounds__(row_block) row_argmax_kernel(int rows, int cols, const T* x, std::int32_t* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for_each_row_argmax<TPR>(rows, cols, x, [&](int row, const ArgMaxPair& total) {
    out[row] = total.index == INT_MAX ? -1 : total.index;
  });
}

/// row_argmax with the answer as an argmax key (argmax_key.hpp) of the index plus `first`, so
/// that rows split by columns over ranks give, by the largest of their keys, the argmax of the
/// whole row: keys[r] = 0 for an empty row.
template <int TPR, class T>
__global__ void __launch_bounds__(row_block)
    row_argmax_key_kernel(int rows, int cols, int first, const T* x, std::uint64_t* keys) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for_each_row_argmax<TPR>(rows, cols, x, [&](int row, const ArgMaxPair& total) {
    keys[row] = total.index == INT_MAX ? 0 : argmax_key(total.value, static_cast<std::int64_t>(first) + total.index);
  });
}

/// out[r] = the index keys[r] holds (-1 for the key 0 of an empty row), a thread a row.
__global__ void argmax_key_token_kernel(int rows, const std::uint64_t* keys, std::int32_t* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for (std::int64_t r = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < rows; r += std::int64_t{gridDim.x} * blockDim.x) {
    out[r] = argmax_key_index(keys[r]);
  }
}

/// partials[blockIdx.x] = sum of this block's grid-stride share of x, in double.
template <class T>
__global__ void __launch_bounds__(row_block) sum_partial_kernel(std::int64_t n, const T* x, double* partials) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int V = 16 / sizeof(T);
  double acc = 0.0;
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t start = 0;
  if (aligned<16>(x)) {
    const std::int64_t vectors = n / V;
    const Vec<T, V>* xv = reinterpret_cast<const Vec<T, V>*>(x);
    std::int64_t v = thread;
    // Two vectors in flight per iteration.
    for (; v + stride < vectors; v += 2 * stride) {
      const Vec<T, V> a = xv[v], b = xv[v + stride];
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < V; ++j) s += to_float(a.v[j]) + to_float(b.v[j]);
      acc += s;
    }
    for (; v < vectors; v += stride) {
      const Vec<T, V> a = xv[v];
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < V; ++j) s += to_float(a.v[j]);
      acc += s;
    }
    start = vectors * V;
  }
  for (std::int64_t i = start + thread; i < n; i += stride) acc += to_float(x[i]);
  __shared__ typename cub::BlockReduce<double, row_block>::TempStorage temp;
  const double total = cub::BlockReduce<double, row_block>(temp).Sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

/// out[0] = sum of partials[0 .. count) (its square root when take_sqrt != 0). One block.
__global__ void __launch_bounds__(row_block) sum_finish_kernel(std::int32_t count, const double* partials,
                                                               std::int32_t take_sqrt, float* out);

}  // namespace flowdsl::kernels::detail
