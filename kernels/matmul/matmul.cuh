// SPDX-License-Identifier: Apache-2.0
// Matrix multiply c = act(a b + bias), row-major, float accumulation, any m, n, k.
//
// Half and bfloat16 run the Hopper kernel of matmul_wgmma.cuh; its fallback (no tensor maps, or
// a build or device without sm_90a) is mma_sync_tile here: 128 x 128 x 32 tiles on tensor cores
// (WMMA 16x16x16, 8 warps of 64 x 32), operands staged through shared memory two stages deep
// with cp.async (16-byte copies, zero-filled past the edges) when rows are 16-byte aligned,
// element by element otherwise. Its epilogue goes through a per-warp 16 x 16 scratch tile to
// apply the bias, the activation and the edge checks. Float: 64 x 64 tiles on the FMA units,
// 4 x 4 outputs per thread (exact float arithmetic).
#pragma once

#include <mma.h>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

namespace mm {
constexpr int bm = 128, bn = 128, bk = 32;
constexpr int threads = 256;
constexpr int a_stride = bk + 8;  // +16 bytes a row: no bank conflicts, rows stay 16-byte aligned
constexpr int b_stride = bn + 8;
constexpr int warp_m = 64, warp_n = 32;  // 2 x 4 warps
constexpr int frag_m = warp_m / 16, frag_n = warp_n / 16;
}  // namespace mm

__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool in_bounds) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  const int src_bytes = in_bounds ? 16 : 0;  // 0: fill the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending)); }

/// Loads the A tile [bm, bk] at (row0, k0) and the B tile [bk, bn] at (k0, col0) into shared.
template <class T>
__device__ __forceinline__ void load_tiles(bool vector_path, int m, int n, int k, const T* a, const T* b, int row0, int col0,
                                           int k0, T* sa, T* sb) {
  if (vector_path) {
    constexpr int per_chunk = 8;  // 8 elements = 16 bytes
#pragma unroll
    for (int i = 0; i < (mm::bm * mm::bk / per_chunk) / mm::threads; ++i) {
      const int chunk = threadIdx.x + i * mm::threads;
      const int r = chunk / (mm::bk / per_chunk), c = (chunk % (mm::bk / per_chunk)) * per_chunk;
      const bool in = row0 + r < m && k0 + c < k;
      cp_async_16(sa + r * mm::a_stride + c, in ? a + static_cast<std::int64_t>(row0 + r) * k + k0 + c : a, in);
    }
#pragma unroll
    for (int i = 0; i < (mm::bk * mm::bn / per_chunk) / mm::threads; ++i) {
      const int chunk = threadIdx.x + i * mm::threads;
      const int r = chunk / (mm::bn / per_chunk), c = (chunk % (mm::bn / per_chunk)) * per_chunk;
      const bool in = k0 + r < k && col0 + c < n;
      cp_async_16(sb + r * mm::b_stride + c, in ? b + static_cast<std::int64_t>(k0 + r) * n + col0 + c : b, in);
    }
  } else {
    const T zero = from_float<T>(0.0f);
    for (int e = threadIdx.x; e < mm::bm * mm::bk; e += mm::threads) {
      const int r = e / mm::bk, c = e % mm::bk;
      sa[r * mm::a_stride + c] = row0 + r < m && k0 + c < k ? a[static_cast<std::int64_t>(row0 + r) * k + k0 + c] : zero;
    }
    for (int e = threadIdx.x; e < mm::bk * mm::bn; e += mm::threads) {
      const int r = e / mm::bn, c = e % mm::bn;
      sb[r * mm::b_stride + c] = k0 + r < k && col0 + c < n ? b[static_cast<std::int64_t>(k0 + r) * n + col0 + c] : zero;
    }
  }
}

/// Shared memory of one mma_sync_tile: two stages of A and B, and a 16 x 16 float scratch tile per warp.
struct MmaSyncShared {
  static constexpr int a_elements = 2 * mm::bm * mm::a_stride, b_elements = 2 * mm::bk * mm::b_stride;
  static constexpr int scratch_floats = mm::threads / 32 * 16 * 16;
  template <class T>
  static constexpr int bytes() {
    return (a_elements + b_elements) * static_cast<int>(sizeof(T)) + scratch_floats * 4;
  }
};

/// c[row0 .. +bm, col0 .. +bn] = act(a b + bias) by threads 0 .. mm::threads - 1 on WMMA
/// (mma.sync), converted to Out. `shared` holds MmaSyncShared::bytes<T>(), 128-byte aligned;
/// `sync()` is a barrier of exactly those threads.
template <class T, class Out, class Sync>
__device__ __forceinline__ void mma_sync_tile(std::int32_t m, std::int32_t n, std::int32_t k, const T* a, const T* b,
                                              const float* bias, std::int32_t act, Out* c, int row0, int col0,
                                              unsigned char* shared, Sync sync) {
  using namespace nvcuda;
  T* const sa_base = reinterpret_cast<T*>(shared);
  T* const sb_base = sa_base + MmaSyncShared::a_elements;
  float* const scratch = reinterpret_cast<float*>(sb_base + MmaSyncShared::b_elements);
  auto sa = [&](int stage) { return sa_base + stage * mm::bm * mm::a_stride; };
  auto sb = [&](int stage) { return sb_base + stage * mm::bk * mm::b_stride; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = (warp / (mm::bn / mm::warp_n)) * mm::warp_m;
  const int warp_col = (warp % (mm::bn / mm::warp_n)) * mm::warp_n;
  const bool vector_path = k % 8 == 0 && n % 8 == 0 && aligned<16>(a) && aligned<16>(b);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[mm::frag_m][mm::frag_n];
#pragma unroll
  for (int i = 0; i < mm::frag_m; ++i)
#pragma unroll
    for (int j = 0; j < mm::frag_n; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  const int tiles = (k + mm::bk - 1) / mm::bk;
  load_tiles(vector_path, m, n, k, a, b, row0, col0, 0, sa(0), sb(0));
  cp_async_commit();
  for (int t = 0; t < tiles; ++t) {
    const int stage = t & 1;
    if (t + 1 < tiles) load_tiles(vector_path, m, n, k, a, b, row0, col0, (t + 1) * mm::bk, sa(stage ^ 1), sb(stage ^ 1));
    cp_async_commit();
    cp_async_wait<1>();
    sync();
#pragma unroll
    for (int kk = 0; kk < mm::bk; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[mm::frag_m];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[mm::frag_n];
#pragma unroll
      for (int i = 0; i < mm::frag_m; ++i) wmma::load_matrix_sync(fa[i], sa(stage) + (warp_row + i * 16) * mm::a_stride + kk, mm::a_stride);
#pragma unroll
      for (int j = 0; j < mm::frag_n; ++j) wmma::load_matrix_sync(fb[j], sb(stage) + kk * mm::b_stride + warp_col + j * 16, mm::b_stride);
#pragma unroll
      for (int i = 0; i < mm::frag_m; ++i)
#pragma unroll
        for (int j = 0; j < mm::frag_n; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    sync();  // the stage just read is the next iteration's load target
  }
  cp_async_wait<0>();  // no copy may be left in flight at exit (k == 0 issues one and never waits)

  float* tile = scratch + warp * 16 * 16;
#pragma unroll
  for (int i = 0; i < mm::frag_m; ++i) {
#pragma unroll
    for (int j = 0; j < mm::frag_n; ++j) {
      wmma::store_matrix_sync(tile, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int r_base = row0 + warp_row + i * 16, c_base = col0 + warp_col + j * 16;
      for (int e = lane; e < 256; e += 32) {
        const int r = r_base + e / 16, col = c_base + e % 16;
        if (r < m && col < n) {
          c[static_cast<std::int64_t>(r) * n + col] = from_float<Out>(activate(act, tile[e] + (bias ? bias[col] : 0.0f)));
        }
      }
      __syncwarp();
    }
  }
}

namespace mmf {
constexpr int bm = 64, bn = 64, bk = 16, threads = 256;
}

__global__ void __launch_bounds__(mmf::threads) matmul_float_kernel(std::int32_t m, std::int32_t n, std::int32_t k, const float* a,
                                                                    const float* b, const float* bias, std::int32_t act,
                                                                    float* c) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  __shared__ float sa[mmf::bk][mmf::bm + 4];  // transposed: sa[kk][row]
  __shared__ float sb[mmf::bk][mmf::bn + 4];
  const int row0 = blockIdx.y * mmf::bm, col0 = blockIdx.x * mmf::bn;
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;  // 16 x 16 threads, 4 x 4 outputs each
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += mmf::bk) {
    for (int e = threadIdx.x; e < mmf::bm * mmf::bk; e += mmf::threads) {
      const int r = e / mmf::bk, kk = e % mmf::bk;
      sa[kk][r] = row0 + r < m && k0 + kk < k ? a[static_cast<std::int64_t>(row0 + r) * k + k0 + kk] : 0.0f;
    }
    for (int e = threadIdx.x; e < mmf::bk * mmf::bn; e += mmf::threads) {
      const int kk = e / mmf::bn, col = e % mmf::bn;
      sb[kk][col] = k0 + kk < k && col0 + col < n ? b[static_cast<std::int64_t>(k0 + kk) * n + col0 + col] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < mmf::bk; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = sa[kk][tr + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = sb[kk][tc + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + tr + 16 * i, col = col0 + tc + 16 * j;
      if (r < m && col < n) c[static_cast<std::int64_t>(r) * n + col] = activate(act, acc[i][j] + (bias ? bias[col] : 0.0f));
    }
  }
}

}  // namespace flowdsl::kernels::detail
