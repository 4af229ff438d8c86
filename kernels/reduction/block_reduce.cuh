// SPDX-License-Identifier: Apache-2.0
// Reducing one value per thread across a row group: a warp (cub::WarpReduce, for short rows)
// or a whole block (cub::BlockReduce, for long rows). The result is returned to every thread
// of the group, and the temporary storage is ready for the next call.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

constexpr int row_block = 256;

struct SumOp {
  template <class V>
  __device__ V operator()(const V& a, const V& b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
/// (value, index): the larger value, the smaller index on ties.
struct ArgMaxPair {
  float value;
  int index;
};
struct ArgMaxOp {
  __device__ ArgMaxPair operator()(const ArgMaxPair& a, const ArgMaxPair& b) const {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index <= b.index ? a : b;
  }
};
/// Two sums at once (layer normalisation's shifted sum and sum of squares).
struct Sum2Op {
  __device__ float2 operator()(const float2& a, const float2& b) const { return make_float2(a.x + b.x, a.y + b.y); }
};

/// Reduces `value` over the TPR threads of this thread's row group: a warp (TPR = 32), or the
/// whole block, of TPR threads (row_block for the row kernels); every thread gets the result.
template <int TPR, class V, class Op>
__device__ __forceinline__ V group_reduce(V value, Op op) {
  static_assert(TPR == 32 || TPR % 32 == 0, "a row group is a warp or a whole block of warps");
  if constexpr (TPR == 32) {
    using WarpReduce = cub::WarpReduce<V>;
    __shared__ typename WarpReduce::TempStorage temp[row_block / 32];
    const V result = WarpReduce(temp[threadIdx.x / 32]).Reduce(value, op);
    __syncwarp();
    V broadcast;
    // Lane 0 holds the result; shuffle it to the warp word by word.
    static_assert(sizeof(V) % 4 == 0, "reduced values are made of 32-bit words");
    const unsigned* src = reinterpret_cast<const unsigned*>(&result);
    unsigned* dst = reinterpret_cast<unsigned*>(&broadcast);
#pragma unroll
    for (int w = 0; w < static_cast<int>(sizeof(V) / 4); ++w) dst[w] = __shfl_sync(0xffffffffu, src[w], 0);
    return broadcast;
  } else {
    using BlockReduce = cub::BlockReduce<V, TPR>;
    __shared__ typename BlockReduce::TempStorage temp;
    __shared__ V shared_result;
    const V result = BlockReduce(temp).Reduce(value, op);
    if (threadIdx.x == 0) shared_result = result;
    __syncthreads();
    const V broadcast = shared_result;
    __syncthreads();
    return broadcast;
  }
}

/// Calls f(column, value) for every element of a row, in 16-byte vectors when the row starts
/// on a 16-byte boundary, `Unroll` loads of a thread in flight together (a lane's elements in
/// column order all the same, so sums come out as a one-at-a-time loop's). `lane` in [0, TPR).
template <int TPR, int Unroll = 8, class T, class F>
__device__ __forceinline__ void for_each_in_row(const T* row, int cols, int lane, F&& f) {
  constexpr int V = 16 / sizeof(T);
  int start = 0;
  if (aligned<16>(row)) {
    const int vectors = cols / V;
    const Vec<T, V>* rv = reinterpret_cast<const Vec<T, V>*>(row);
    int v = lane;
    for (; v + (Unroll - 1) * TPR < vectors; v += Unroll * TPR) {
      Vec<T, V> in[Unroll];
#pragma unroll
      for (int u = 0; u < Unroll; ++u) in[u] = rv[v + u * TPR];
#pragma unroll
      for (int u = 0; u < Unroll; ++u) {
#pragma unroll
        for (int j = 0; j < V; ++j) f((v + u * TPR) * V + j, to_float(in[u].v[j]));
      }
    }
    for (; v < vectors; v += TPR) {
      const Vec<T, V> value = rv[v];
#pragma unroll
      for (int j = 0; j < V; ++j) f(v * V + j, to_float(value.v[j]));
    }
    start = vectors * V;
  }
  for (int c = start + lane; c < cols; c += TPR) f(c, to_float(row[c]));
}

/// out[c] = f(c, row[c]) for every element of a row, in 16-byte vectors when the row and
/// `out` start on 16-byte boundaries. `lane` in [0, TPR).
template <int TPR, class T, class F>
__device__ __forceinline__ void map_row(const T* row, T* out, int cols, int lane, F&& f) {
  constexpr int V = 16 / sizeof(T);
  if (aligned<16>(row) && aligned<16>(out)) {
    const int vectors = cols / V;
    for (int v = lane; v < vectors; v += TPR) {
      const Vec<T, V> in = reinterpret_cast<const Vec<T, V>*>(row)[v];
      Vec<T, V> result;
#pragma unroll
      for (int j = 0; j < V; ++j) result.v[j] = from_float<T>(f(v * V + j, to_float(in.v[j])));
      reinterpret_cast<Vec<T, V>*>(out)[v] = result;
    }
    for (int c = vectors * V + lane; c < cols; c += TPR) out[c] = from_float<T>(f(c, to_float(row[c])));
  } else {
    for (int c = lane; c < cols; c += TPR) out[c] = from_float<T>(f(c, to_float(row[c])));
  }
}

/// Row-group geometry: which row group this thread is in, its lane, and the group stride.
template <int TPR>
struct RowGroups {
  static constexpr int per_block = row_block / TPR;
  __device__ int first() const { return blockIdx.x * per_block + threadIdx.x / TPR; }
  __device__ int stride() const { return gridDim.x * per_block; }
  __device__ int lane() const { return threadIdx.x % TPR; }
};

/// Rows of up to this many columns get a warp each; longer rows a block each.
constexpr int warp_row_limit = 1024;

}  // namespace flowdsl::kernels::detail
