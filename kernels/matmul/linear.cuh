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
// prefer cublaslt_linear there).
//
// The normed form multiplies by rms_norm(x) · g instead of x (a decoder layer's norm before its
// projection: each block computes the rows' scales itself, so the normalised rows are never
// written out), and the residual forms add the product into y (y = T(y + T(product)), the
// residual stream of a decoder), so a layer needs no separate norm kernels.
//
// For 16-bit types with k a multiple of 32 and more than one row the tensor cores take the
// products instead (linear_tiles_pass): a block of 8 warps computes 16 features for up to 16
// rows, its warps splitting k, each multiplying 16 features x 32 weights by 32 inputs x 8 rows
// with two mma.sync a step. The 16-byte loads of weights and inputs feed the operand registers
// directly: k is permuted the same way in both (a lane's 8 consecutive elements are its elements
// of two 16-wide k blocks), which leaves the dot products unchanged. The warps' sums meet in
// shared memory.
//
// The gated form multiplies by silu(gate) * up instead of x, where gate and up are the two halves
// of a [m, 2k] tensor (a SwiGLU MLP's fused gate and up projection), so the element-wise product
// is never written out.
//
// On the warp-a-feature path, where a pass's transformed rows fit in linear_stage_bytes, the
// block computes them once into shared memory and every weight it streams meets a plain 16-byte
// read; otherwise each weight vector recomputes the few inputs it multiplies. The tensor-core
// path computes each input once a block anyway (its lanes share a step's inputs across 16
// features), so it reads x as it is.
//
// Before a kernel waits for its inputs (programmatic_prologue's two halves), each warp has the
// start of its first weight rows fetched into L2.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common.cuh"
#include "../mma.cuh"

namespace flowdsl::kernels::detail {

constexpr int linear_block = 256;  ///< 8 warps
constexpr int linear_rows = 8;     ///< rows of x a pass holds accumulators for
constexpr int linear_unroll = 4;   ///< 16-byte weight loads a lane has in flight (8 for one row)
constexpr int linear_blocks_per_sm = 3;  ///< blocks a multiprocessor holds (the kernels' launch bounds)
/// Shared memory for a pass's transformed rows: 8 rows of 2048 16-bit inputs, 1 row of 16384 (the
/// tensor-core path's sums beside it keep the block under 48 KiB).
constexpr int linear_stage_bytes = 32 * 1024;
constexpr int linear_prefetch_bytes = 4096;    ///< of each of a warp's first weight rows

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

/// x · scale · g rounded as Llama's RMSNorm does: the normalised value to T, then the product.
template <class T>
__device__ __forceinline__ float normed(float x, float scale, float g) {
  return to_float(from_float<T>(to_float(from_float<T>(x * scale)) * g));
}

/// What a linear kernel multiplies the weights by: x itself, silu(gate) * up of a [m, 2k] x,
/// rms_norm(x) · g, or rows already transformed into shared memory.
enum class LinearInput { plain, gated, normed, staged };

/// The input of a pass: rows of x (row_stride apart), and for the normed form the norm's weights
/// and each row's scale (shared memory).
template <class T>
struct LinearRows {
  const T* x;
  std::int64_t row_stride;
  std::int64_t k;
  const T* g;           ///< normed: the norm's weights [k]
  const float* scales;  ///< normed: rsqrt(mean(x²) + eps) a row
};

/// The input of row `r` at vector `i` (16 / sizeof(T) elements) as floats.
template <class T, LinearInput In>
__device__ __forceinline__ void input_vector(const LinearRows<T>& in, int r, std::int64_t i, float* out) {
  constexpr int V = 16 / sizeof(T);
  const T* row = in.x + r * in.row_stride;
  if constexpr (In == LinearInput::staged) {
    unpack<T>(reinterpret_cast<const uint4*>(row)[i], out);
    return;
  }
  unpack<T>(__ldg(reinterpret_cast<const uint4*>(row) + i), out);
  if constexpr (In == LinearInput::gated) {
    float up[V];
    unpack<T>(__ldg(reinterpret_cast<const uint4*>(row + in.k) + i), up);
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = gated<T>(out[e], up[e]);
  } else if constexpr (In == LinearInput::normed) {
    float g[V];
    unpack<T>(__ldg(reinterpret_cast<const uint4*>(in.g) + i), g);
    const float scale = in.scales[r];
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = normed<T>(out[e], scale, g[e]);
  }
}

/// The input of row `r` at element `c`.
template <class T, LinearInput In>
__device__ __forceinline__ float input_element(const LinearRows<T>& in, int r, std::int64_t c) {
  const T* row = in.x + r * in.row_stride;
  const float v = to_float(row[c]);
  if constexpr (In == LinearInput::gated) {
    return gated<T>(v, to_float(row[c + in.k]));
  } else if constexpr (In == LinearInput::normed) {
    return normed<T>(v, in.scales[r], to_float(in.g[c]));
  } else {
    return v;
  }
}

/// Writes `sum` to y, or adds it (rounded to T, as a model's branch output is) into y.
template <class T, bool Residual>
__device__ __forceinline__ void store_output(T* y, float sum) {
  if constexpr (Residual) {
    *y = from_float<T>(to_float(*y) + to_float(from_float<T>(sum)));
  } else {
    *y = from_float<T>(sum);
  }
}

/// The normed form's scales of rows 0 .. rows of x into `scales`, a warp a row; the block waits
/// for them (and, before, for every reader of the previous pass's).
template <class T>
__device__ void row_scales(const T* x, std::int64_t row_stride, int rows, std::int32_t k, float eps, bool vectors,
                           float* scales) {
  constexpr int V = 16 / sizeof(T);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();
  for (int r = warp; r < rows; r += linear_block / 32) {
    const T* row = x + r * row_stride;
    float sum = 0.0f;
    if (vectors) {
      for (std::int64_t i = lane; i < k / V; i += 32) {
        float v[V];
        unpack<T>(__ldg(reinterpret_cast<const uint4*>(row) + i), v);
#pragma unroll
        for (int e = 0; e < V; ++e) sum = fmaf(v[e], v[e], sum);
      }
    } else {
      for (std::int64_t c = lane; c < k; c += 32) {
        const float v = to_float(row[c]);
        sum = fmaf(v, v, sum);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) scales[r] = rsqrtf(sum / static_cast<float>(k) + eps);
  }
  __syncthreads();
}

/// acc[r] += w · input(r) over one 16-byte vector of weights, for rows 0 .. rows.
template <class T, LinearInput In, int R>
__device__ __forceinline__ void accumulate(float (&acc)[R], const uint4& wv, const LinearRows<T>& in, int rows,
                                           std::int64_t i) {
  constexpr int V = 16 / sizeof(T);
  float w[V];
  unpack<T>(wv, w);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows) {
      float x[V];
      input_vector<T, In>(in, r, i, x);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r] = fmaf(w[e], x[e], acc[r]);
    }
  }
}

/// Features f = first, first + warps, ... of `rows` rows of the output, with R >= rows
/// accumulators a lane (R a compile-time bound, so that they stay in registers).
template <class T, LinearInput In, bool Residual, int R>
__device__ __forceinline__ void linear_rows_pass(std::int32_t n, const LinearRows<T>& in, int rows, const T* w, T* yt,
                                                 bool vectors) {
  constexpr int V = 16 / sizeof(T);
  // 16-bit types take more than two rows here only where the tensor cores cannot (k not a
  // multiple of 32, unaligned rows): one load in flight keeps their registers, which the whole
  // kernel is sized by, for the one-row pass. That pass, with its inputs as they are or staged,
  // has room for twice the loads in flight (a decode step at batch 1 is this pass, reading
  // weights at the copy rate).
  constexpr bool light = R == 1 && (In == LinearInput::plain || In == LinearInput::staged);
  constexpr int unroll = mma_type<T> && R > 2 ? 1 : light ? 2 * linear_unroll : linear_unroll;
  const std::int64_t k = in.k;
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
      for (; i + 32 * (unroll - 1) < count; i += 32 * unroll) {
        uint4 loaded[unroll];
#pragma unroll
        for (int u = 0; u < unroll; ++u) loaded[u] = load_streaming(wv + i + 32 * u);
#pragma unroll
        for (int u = 0; u < unroll; ++u) accumulate<T, In>(acc, loaded[u], in, rows, i + 32 * u);
      }
      for (; i < count; i += 32) accumulate<T, In>(acc, load_streaming(wv + i), in, rows, i);
    } else {
      for (std::int64_t c = lane; c < k; c += 32) {
        const float wc = to_float(wf[c]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r < rows) acc[r] = fmaf(wc, input_element<T, In>(in, r, c), acc[r]);
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
      if (lane == r && r < rows) store_output<T, Residual>(yt + r * std::int64_t{n} + f, acc[r]);
    }
  }
}

/// 8 inputs of row `r` at element `c` (16 bytes) as the 4 operand registers of two k blocks.
template <class T, LinearInput In>
__device__ __forceinline__ uint4 input_pairs(const LinearRows<T>& in, int r, std::int64_t c) {
  if constexpr (In == LinearInput::plain) {
    return __ldg(reinterpret_cast<const uint4*>(in.x + r * in.row_stride + c));
  } else {
    float v[8];
    input_vector<T, In>(in, r, c / 8, v);
    uint4 out;
    out.x = pack_pair<T>(v[0], v[1]);
    out.y = pack_pair<T>(v[2], v[3]);
    out.z = pack_pair<T>(v[4], v[5]);
    out.w = pack_pair<T>(v[6], v[7]);
    return out;
  }
}

constexpr int linear_tile_features = 16;  ///< features a block of the tensor-core path
constexpr int linear_tile_rows = 16;      ///< rows of x a pass of the tensor-core path
constexpr int linear_tile_unroll = 4;     ///< 32-wide k steps a warp has in flight

/// The tensor-core path over `rows` rows (at most 16) of the input, NT 8-row fragments.
/// `shared` holds 8 warps x 32 lanes x 4 NT floats.
template <class T, LinearInput In, bool Residual, int NT>
__device__ __forceinline__ void linear_tiles_pass(std::int32_t n, const LinearRows<T>& in, int rows, const T* w, T* yt,
                                                  float* shared) {
  constexpr int warps = linear_block / 32;
  // The normed and gated inputs take the registers of two loads in flight (the kernel's are capped).
  constexpr int unroll = In == LinearInput::plain ? linear_tile_unroll : 2;
  const std::int64_t k = in.k;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;  // fragment row (feature, input row) and column pair
  const std::int64_t steps = k / 32;     // 32-wide steps of k; warp w takes w, w + 8, ...
  const std::int64_t tiles = (std::int64_t{n} + linear_tile_features - 1) / linear_tile_features;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t f0 = tile * linear_tile_features;
    const bool has_a = f0 + g < n, has_b = f0 + g + 8 < n;
    const T* wa = w + (f0 + g) * k + 8 * c;
    const T* wb = wa + 8 * k;
    float acc[NT][4] = {};
    const auto product = [&](const uint4& a_lo, const uint4& a_hi, std::int64_t step) {
      const std::int64_t col = step * 32 + 8 * c;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int r = nt * 8 + g;
        const uint4 xv = r < rows ? input_pairs<T, In>(in, r, col) : make_uint4(0u, 0u, 0u, 0u);
        const std::uint32_t first[4] = {a_lo.x, a_hi.x, a_lo.y, a_hi.y}, second[4] = {a_lo.z, a_hi.z, a_lo.w, a_hi.w};
        mma_16x8x16<T>(acc[nt], first, xv.x, xv.y);
        mma_16x8x16<T>(acc[nt], second, xv.z, xv.w);
      }
    };
    std::int64_t step = warp;
    for (; step + warps * (unroll - 1) < steps; step += warps * unroll) {
      uint4 lo[unroll], hi[unroll];
#pragma unroll
      for (int u = 0; u < unroll; ++u) {
        const std::int64_t at = (step + u * warps) * 32;
        lo[u] = has_a ? load_streaming(reinterpret_cast<const uint4*>(wa + at)) : make_uint4(0u, 0u, 0u, 0u);
        hi[u] = has_b ? load_streaming(reinterpret_cast<const uint4*>(wb + at)) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < unroll; ++u) product(lo[u], hi[u], step + u * warps);
    }
    for (; step < steps; step += warps) {
      const uint4 lo = has_a ? load_streaming(reinterpret_cast<const uint4*>(wa + step * 32)) : make_uint4(0u, 0u, 0u, 0u);
      const uint4 hi = has_b ? load_streaming(reinterpret_cast<const uint4*>(wb + step * 32)) : make_uint4(0u, 0u, 0u, 0u);
      product(lo, hi, step);
    }
    // acc[nt]: (feature g, rows nt * 8 + 2c, + 1) and (feature g + 8, the same rows).
    __syncthreads();  // the previous tile's sums are read
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) shared[((nt * 4 + e) * warps + warp) * 32 + lane] = acc[nt][e];
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < NT * 4 * 32; i += linear_block) {
      const int slot = i / 32, from = i % 32;  // slot = nt * 4 + e, from = the lane that held it
      float sum = 0.0f;
#pragma unroll
      for (int v = 0; v < warps; ++v) sum += shared[(slot * warps + v) * 32 + from];
      const int nt = slot / 4, e = slot % 4;
      const std::int64_t f = f0 + from / 4 + (e >= 2 ? 8 : 0);
      const int r = nt * 8 + 2 * (from % 4) + (e & 1);
      if (f < n && r < rows) store_output<T, Residual>(yt + r * std::int64_t{n} + f, sum);
    }
  }
}

/// V values (16 bytes) as T.
template <class T>
__device__ __forceinline__ uint4 pack_vector(const float* v) {
  uint4 out;
  T* e = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int i = 0; i < int(16 / sizeof(T)); ++i) e[i] = from_float<T>(v[i]);
  return out;
}

/// Whether a pass of `rows` rows of k inputs fits the staging buffer.
template <class T>
__host__ __device__ constexpr bool fits_stage(std::int64_t rows, std::int64_t k) {
  return rows * k * std::int64_t{sizeof(T)} <= linear_stage_bytes;
}

/// Has L2 fetch the first linear_prefetch_bytes of weight row `row` (one of a warp's first), a
/// 128-byte line a lane.
template <class T>
__device__ __forceinline__ void prefetch_row(const T* w, std::int64_t row, std::int64_t n, std::int64_t k) {
  if (row >= n) return;
  const char* start = reinterpret_cast<const char*>(w + row * k);
  const std::int64_t bytes = min(k * std::int64_t{sizeof(T)}, std::int64_t{linear_prefetch_bytes});
  for (std::int64_t at = std::int64_t{threadIdx.x % 32} * 128; at < bytes; at += 32 * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(start + at));
  }
}

/// The pass's rows transformed (normed or gated) into shared memory, each as T with the rounding
/// the model applies, rows k elements apart; the block waits for them (and, before, for the
/// readers of the previous pass's).
template <class T, LinearInput In>
__device__ LinearRows<T> staged_rows(const LinearRows<T>& in, int rows) {
  constexpr int V = 16 / sizeof(T);
  __shared__ uint4 staged[linear_stage_bytes / 16];
  const std::int64_t per_row = in.k / V;  // vectors
  __syncthreads();
  for (std::int64_t at = threadIdx.x; at < rows * per_row; at += blockDim.x) {
    const int r = static_cast<int>(at / per_row);
    const std::int64_t i = at % per_row;
    float v[V];
    input_vector<T, In>(in, r, i, v);
    staged[at] = pack_vector<T>(v);
  }
  __syncthreads();
  return LinearRows<T>{reinterpret_cast<const T*>(staged), in.k, in.k, nullptr, nullptr};
}

/// The warp-a-feature pass with as few accumulators as the rows need: a batch of one sums one
/// value a lane.
template <class T, LinearInput In, bool Residual>
__device__ __forceinline__ void rows_pass(std::int32_t n, const LinearRows<T>& in, int rows, const T* w, T* yt,
                                          bool vectors) {
  if (rows == 1) {
    linear_rows_pass<T, In, Residual, 1>(n, in, rows, w, yt, vectors);
  } else if (rows == 2) {
    linear_rows_pass<T, In, Residual, 2>(n, in, rows, w, yt, vectors);
  } else if (rows <= 4) {
    linear_rows_pass<T, In, Residual, 4>(n, in, rows, w, yt, vectors);
  } else {
    linear_rows_pass<T, In, Residual, linear_rows>(n, in, rows, w, yt, vectors);
  }
}

/// Every form: y (+)= input(x) w^T for m rows, passes of 16 rows on the tensor cores (16-bit T,
/// k a multiple of 32, aligned rows), of 8 otherwise.
template <class T, LinearInput In, bool Residual>
__device__ __forceinline__ void linear_body(std::int32_t m, std::int32_t n, std::int32_t k, float eps, const T* x,
                                            const T* g, const T* w, T* y) {
  constexpr int V = 16 / sizeof(T);
  const std::int64_t row_stride = In == LinearInput::gated ? 2 * std::int64_t{k} : std::int64_t{k};
  // 16-byte vectors need k a multiple of V and the rows 16-byte aligned.
  const bool vectors = k % V == 0 && aligned<16>(x) && aligned<16>(w) && (In != LinearInput::normed || aligned<16>(g));
  __shared__ float scales[linear_tile_rows];
  const auto rows_at = [&](std::int32_t row0, int rows) {
    if constexpr (In == LinearInput::normed) row_scales(x + row0 * row_stride, row_stride, rows, k, eps, vectors, scales);
    return LinearRows<T>{x + row0 * row_stride, row_stride, k, g, scales};
  };
  const int warp = static_cast<int>(threadIdx.x) / 32;
  // One row is a plain matrix-vector product: the warp-a-row path streams it faster.
  bool tiles = false;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (mma_type<T>) tiles = m > 1 && vectors && k % 32 == 0 && blockDim.x == linear_block;
#endif
  // Each warp's first weight rows start on their way to L2 before the kernel waits for its
  // inputs (on a programmatic edge, while the kernel before still runs). A prefetch reads nothing
  // into a register and L2 sees every write, so even weights a kernel before writes stay right.
  ::flowdsl::device::let_dependents_launch();
  if (tiles) {
    const std::int64_t f0 = std::int64_t{blockIdx.x} * linear_tile_features;
    prefetch_row(w, f0 + warp, n, k);
    prefetch_row(w, f0 + warp + 8, n, k);
  } else {
    prefetch_row(w, std::int64_t{blockIdx.x} * (linear_block / 32) + warp, n, k);
  }
  ::flowdsl::device::wait_for_producers();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (mma_type<T>) {
    if (tiles) {
      __shared__ float sums[2 * 4 * linear_block];
      for (std::int32_t row0 = 0; row0 < m; row0 += linear_tile_rows) {
        const int rows = min(linear_tile_rows, m - row0);
        const LinearRows<T> in = rows_at(row0, rows);
        T* yt = y + row0 * std::int64_t{n};
        if (rows <= 8) {
          linear_tiles_pass<T, In, Residual, 1>(n, in, rows, w, yt, sums);
        } else {
          linear_tiles_pass<T, In, Residual, 2>(n, in, rows, w, yt, sums);
        }
      }
      return;
    }
  }
#endif
  for (std::int32_t row0 = 0; row0 < m; row0 += linear_rows) {
    const int rows = min(linear_rows, m - row0);
    T* yt = y + row0 * std::int64_t{n};
    if constexpr (In != LinearInput::plain) {
      if (vectors && fits_stage<T>(rows, k)) {
        rows_pass<T, LinearInput::staged, Residual>(n, staged_rows<T, In>(rows_at(row0, rows), rows), rows, w, yt, true);
        continue;
      }
    }
    rows_pass<T, In, Residual>(n, rows_at(row0, rows), rows, w, yt, vectors);
  }
}

/// linear (plain x) and linear_gated, y = or += their product.
template <class T, bool Gated, bool Residual>
__global__ void __launch_bounds__(linear_block, linear_blocks_per_sm)
    linear_kernel(std::int32_t m, std::int32_t n, std::int32_t k, const T* x, const T* w, T* y) {
  linear_body<T, Gated ? LinearInput::gated : LinearInput::plain, Residual>(m, n, k, 0.0f, x, nullptr, w, y);
}

/// linear_norm: y = (rms_norm(x) · g) w^T.
template <class T>
__global__ void __launch_bounds__(linear_block, linear_blocks_per_sm)
    linear_norm_kernel(std::int32_t m, std::int32_t n, std::int32_t k, float eps, const T* x, const T* g, const T* w, T* y) {
  linear_body<T, LinearInput::normed, false>(m, n, k, eps, x, g, w, y);
}

}  // namespace flowdsl::kernels::detail
