// SPDX-License-Identifier: Apache-2.0
// Attention of a decoder over a paged KV cache, as serving engines (vLLM, SGLang) keep it: the
// keys and values of every sequence live in pages of `page_size` tokens of one pool
// ([pages, kv_heads, page_size, head_dim] each), found through the sequence's row of the block
// table. Positions, sequences and block tables are read on the device, so one executable serves
// any lengths.
//
// rope_kv_append: rotates each new token's query and key heads by its position (rotary
// embedding, the two halves of each head as Hugging Face's rotate_half pairs them; the inverse
// frequencies come from the host, where any scaling such as Llama 3's is applied), writes the
// queries out and appends the keys and values at the token's place in the cache.
//
// attention_partial + attention_combine: grouped-query attention of each token over positions
// 0 .. its own of its sequence (causal, also inside a chunk of prefill tokens, whose keys were
// appended first), flash-decoding style: the context is split across `splits` blocks a
// (token, kv head), each keeping a running max, sum and weighted value sum in float per query
// head of the group over chunks of split_len positions; a second kernel combines the splits.
// 16-bit caches with head_dim 64 or 128 take the tensor-core path (attention_tiles.cuh), where a
// block serves a tile of a sequence's tokens; the warp path and the scalar path take the rest.
//
// Every index read from device memory is checked before it is used: a sequence, position or page
// outside the bounds the arguments give contributes nothing and is never dereferenced.
#pragma once

#include <cfloat>
#include <cstdint>

#include "../common.cuh"
#include "../reduction/block_reduce.cuh"
#include "attention_tiles.cuh"
#include "paged_cache.cuh"

namespace flowdsl::kernels::detail {

template <class T>
__global__ void __launch_bounds__(attention_block)
    rope_kv_append_kernel(std::int32_t tokens, std::int32_t q_heads, std::int32_t kv_heads, std::int32_t head_dim,
                          std::int32_t page_size, std::int32_t pages_per_seq, std::int32_t sequences, std::int32_t pages,
                          const T* qkv, const std::int32_t* positions, const std::int32_t* seq_of_token,
                          const std::int32_t* block_table, const float* inv_freq, T* q, T* k_cache, T* v_cache) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  const std::int32_t half = head_dim / 2;
  const std::int32_t heads = q_heads + 2 * kv_heads;
  // A token's work is spread over gridDim.y blocks (a thread a pair where they suffice), so that
  // its loads are in flight together rather than one after another.
  const std::int32_t first = static_cast<std::int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  const std::int32_t stride = static_cast<std::int32_t>(gridDim.y * blockDim.x);
  for (std::int32_t t = static_cast<std::int32_t>(blockIdx.x); t < tokens; t += static_cast<std::int32_t>(gridDim.x)) {
    const std::int32_t pos = positions[t];
    const std::int32_t seq = seq_of_token[t];
    const T* in = qkv + static_cast<std::int64_t>(t) * heads * head_dim;
    // Rotations: query heads, then key heads; element j pairs with j + half.
    for (std::int32_t i = first; i < (q_heads + kv_heads) * half; i += stride) {
      const std::int32_t head = i / half, j = i % half;
      float s = 0.0f, c = 1.0f;
      sincosf(static_cast<float>(pos) * inv_freq[j], &s, &c);
      const float x1 = to_float(in[head * head_dim + j]), x2 = to_float(in[head * head_dim + j + half]);
      const T r1 = from_float<T>(x1 * c - x2 * s), r2 = from_float<T>(x2 * c + x1 * s);
      if (head < q_heads) {
        T* out = q + (static_cast<std::int64_t>(t) * q_heads + head) * head_dim;
        out[j] = r1;
        out[j + half] = r2;
      } else {
        const std::int64_t slot = cache_slot(seq, pos, head - q_heads, kv_heads, head_dim, page_size, pages_per_seq,
                                             sequences, pages, block_table);
        if (slot >= 0) {
          k_cache[slot + j] = r1;
          k_cache[slot + j + half] = r2;
        }
      }
    }
    // An odd head_dim leaves its last element unrotated, as a pair would need a partner.
    if (head_dim % 2 != 0) {
      for (std::int32_t head = first; head < q_heads + kv_heads; head += stride) {
        const T x = in[head * head_dim + head_dim - 1];
        if (head < q_heads) {
          q[(static_cast<std::int64_t>(t) * q_heads + head) * head_dim + head_dim - 1] = x;
        } else {
          const std::int64_t slot = cache_slot(seq, pos, head - q_heads, kv_heads, head_dim, page_size, pages_per_seq,
                                               sequences, pages, block_table);
          if (slot >= 0) k_cache[slot + head_dim - 1] = x;
        }
      }
    }
    // Values are appended as they are.
    const T* v_in = in + static_cast<std::int64_t>(q_heads + kv_heads) * head_dim;
    for (std::int32_t i = first; i < kv_heads * head_dim; i += stride) {
      const std::int32_t head = i / head_dim, d = i % head_dim;
      const std::int64_t slot =
          cache_slot(seq, pos, head, kv_heads, head_dim, page_size, pages_per_seq, sequences, pages, block_table);
      if (slot >= 0) v_cache[slot + d] = v_in[i];
    }
  }
}

/// The dynamic shared memory of attention_partial_kernel: for the general path the group's
/// queries and one chunk's scores, then its running max, sum and correction a query head; for
/// the warp path each warp's running max, sum and values a query head, combined at the end.
__host__ __device__ constexpr std::int64_t attention_shared_floats(std::int32_t group, std::int32_t head_dim,
                                                                   std::int32_t split_len) {
  const std::int64_t general =
      static_cast<std::int64_t>(group) * head_dim + static_cast<std::int64_t>(group) * split_len + 3 * group;
  const std::int64_t warps = static_cast<std::int64_t>(attention_block / 32) * group * (head_dim + 2);
  return general > warps ? general : warps;
}

/// The warp path of attention_partial_kernel for head_dim D (64 or 128, the common ones): each
/// warp takes every fourth position of the block's chunks; its lanes load the key and value rows
/// together (D / 32 elements a lane, one load each), a butterfly sum gives each query head's
/// score to every lane, and each lane keeps the online softmax's max, sum and its D / 32 values
/// of every query head of the group in registers. The warps' states are combined through shared
/// memory into the split's record. Two positions are loaded ahead of their use.
template <class T, int D>
__device__ void attention_partial_warps(std::int32_t tokens, std::int32_t q_heads, std::int32_t kv_heads,
                                        std::int32_t page_size, std::int32_t pages_per_seq, std::int32_t sequences,
                                        std::int32_t pages, std::int32_t splits, std::int32_t split_len, float scale,
                                        const T* q, const std::int32_t* positions, const std::int32_t* seq_of_token,
                                        const std::int32_t* block_table, const T* k_cache, const T* v_cache,
                                        float* partial, float* shared) {
  constexpr int E = D / 32;  // elements a lane
  constexpr int G = attention_max_group;
  using Row = Vec<T, E>;
  const std::int32_t group = q_heads / kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  constexpr int warps = attention_block / 32;
  for (std::int64_t work = blockIdx.x; work < static_cast<std::int64_t>(tokens) * kv_heads; work += gridDim.x) {
    const std::int32_t t = static_cast<std::int32_t>(work / kv_heads), h = static_cast<std::int32_t>(work % kv_heads);
    const std::int32_t pos = positions[t], seq = seq_of_token[t];
    const std::int32_t context = attended_context(pos, page_size, pages_per_seq);
    for (std::int32_t s = static_cast<std::int32_t>(blockIdx.y); s < splits; s += static_cast<std::int32_t>(gridDim.y)) {
      float qv[G][E], acc[G][E], run_max[G], run_sum[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        run_max[g] = -FLT_MAX;
        run_sum[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) {
          acc[g][e] = 0.0f;
          qv[g][e] = g < group ? to_float(q[(static_cast<std::int64_t>(t) * q_heads + h * group + g) * D + lane * E + e]) * scale
                               : 0.0f;
        }
      }
      // One position into the state: scores, the softmax's rescale, the values.
      auto take = [&](const Row& key, const Row& value) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          if (g < group) {
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < E; ++e) dot = fmaf(qv[g][e], to_float(key.v[e]), dot);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
            const float new_max = fmaxf(run_max[g], dot);
            const float fix = __expf(run_max[g] - new_max), weight = __expf(dot - new_max);
            run_sum[g] = run_sum[g] * fix + weight;
#pragma unroll
            for (int e = 0; e < E; ++e) acc[g][e] = fmaf(weight, to_float(value.v[e]), acc[g][e] * fix);
            run_max[g] = new_max;
          }
        }
      };
      for (std::int64_t first = static_cast<std::int64_t>(s) * split_len; first < context;
           first += static_cast<std::int64_t>(splits) * split_len) {
        const std::int32_t count = static_cast<std::int32_t>(context - first < split_len ? context - first : split_len);
        std::int32_t i = warp;
        for (; i + warps < count; i += 2 * warps) {
          const std::int64_t a = cache_slot(seq, static_cast<std::int32_t>(first + i), h, kv_heads, D, page_size,
                                            pages_per_seq, sequences, pages, block_table);
          const std::int64_t b = cache_slot(seq, static_cast<std::int32_t>(first + i + warps), h, kv_heads, D, page_size,
                                            pages_per_seq, sequences, pages, block_table);
          Row ka{}, va{}, kb{}, vb{};
          if (a >= 0) {
            ka = *reinterpret_cast<const Row*>(k_cache + a + lane * E);
            va = *reinterpret_cast<const Row*>(v_cache + a + lane * E);
          }
          if (b >= 0) {
            kb = *reinterpret_cast<const Row*>(k_cache + b + lane * E);
            vb = *reinterpret_cast<const Row*>(v_cache + b + lane * E);
          }
          if (a >= 0) take(ka, va);
          if (b >= 0) take(kb, vb);
        }
        if (i < count) {
          const std::int64_t a = cache_slot(seq, static_cast<std::int32_t>(first + i), h, kv_heads, D, page_size,
                                            pages_per_seq, sequences, pages, block_table);
          if (a >= 0) {
            take(*reinterpret_cast<const Row*>(k_cache + a + lane * E), *reinterpret_cast<const Row*>(v_cache + a + lane * E));
          }
        }
      }
      // The warps' states into shared memory ([warp][g][max, sum, D values]), then combined.
      __syncthreads();  // the previous (work, split)'s combine has read the shared memory
#pragma unroll
      for (int g = 0; g < G; ++g) {
        if (g < group) {
          float* mine = shared + (static_cast<std::int64_t>(warp) * group + g) * (D + 2);
          if (lane == 0) {
            mine[0] = run_max[g];
            mine[1] = run_sum[g];
          }
#pragma unroll
          for (int e = 0; e < E; ++e) mine[2 + lane * E + e] = acc[g][e];
        }
      }
      __syncthreads();
      for (int pair = static_cast<int>(threadIdx.x); pair < group * D; pair += static_cast<int>(blockDim.x)) {
        const int g = pair / D, d = pair % D;
        float top = -FLT_MAX;
        for (int w = 0; w < warps; ++w) top = fmaxf(top, shared[(w * group + g) * (D + 2)]);
        float sum = 0.0f, value = 0.0f;
        for (int w = 0; w < warps; ++w) {
          const float* theirs = shared + (w * group + g) * (D + 2);
          if (theirs[1] > 0.0f) {
            const float f = __expf(theirs[0] - top);
            sum += theirs[1] * f;
            value += theirs[2 + d] * f;
          }
        }
        float* record = partial + ((static_cast<std::int64_t>(t) * q_heads + h * group + g) * splits + s) * (D + 2);
        record[2 + d] = value;
        if (d == 0) {
          record[0] = top;
          record[1] = sum;
        }
      }
    }
  }
}

template <class T>
__global__ void __launch_bounds__(attention_block, 3)
    attention_partial_kernel(std::int32_t tokens, std::int32_t q_heads, std::int32_t kv_heads, std::int32_t head_dim,
                             std::int32_t page_size, std::int32_t pages_per_seq, std::int32_t sequences,
                             std::int32_t pages, std::int32_t splits, std::int32_t split_len, float scale, const T* q,
                             const std::int32_t* positions, const std::int32_t* seq_of_token,
                             const std::int32_t* block_table, const T* k_cache, const T* v_cache, float* partial) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (kv_heads <= 0 || q_heads % kv_heads != 0 || head_dim <= 0 || head_dim > attention_max_head_dim || split_len <= 0 ||
      split_len > attention_max_split || q_heads / kv_heads > attention_max_group) {
    return;  // shapes the launch rule never makes (it sizes the shared memory): nothing is touched
  }
  extern __shared__ float shared[];
  const bool full_block = blockDim.x == attention_block;  // the four warps the fast paths divide the work by
  // 16-bit types, head_dim 64 or 128, 16-byte aligned caches: the tensor-core path, where the
  // launch gave it its shared memory.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (attention_tiles_take<T>(64)) {
    std::uint32_t shared_bytes = 0;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(shared_bytes));
    if (full_block && (head_dim == 64 || head_dim == 128) && shared_bytes >= attention_tiles_shared_bytes(head_dim, 2) &&
        aligned<16>(k_cache) && aligned<16>(v_cache) && aligned<4>(q)) {
      auto* bytes = reinterpret_cast<unsigned char*>(shared);
      if (head_dim == 64) {
        attention_partial_tiles<T, 64>(tokens, q_heads, kv_heads, page_size, pages_per_seq, sequences, pages, splits,
                                       split_len, scale, q, positions, seq_of_token, block_table, k_cache, v_cache,
                                       partial, bytes);
      } else {
        attention_partial_tiles<T, 128>(tokens, q_heads, kv_heads, page_size, pages_per_seq, sequences, pages, splits,
                                        split_len, scale, q, positions, seq_of_token, block_table, k_cache, v_cache,
                                        partial, bytes);
      }
      return;
    }
  }
#endif
  // Rows of 16 / 8 / 4 bytes a lane (head_dim 64 or 128) aligned: the warp path, for what the
  // tensor cores don't take (its registers would hold back the tensor-core path's occupancy).
  bool warp_path = true;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  warp_path = !attention_tiles_take<T>(64);
#endif
  if (warp_path && full_block && head_dim == 64 && aligned<sizeof(T) * 2>(k_cache) && aligned<sizeof(T) * 2>(v_cache)) {
    attention_partial_warps<T, 64>(tokens, q_heads, kv_heads, page_size, pages_per_seq, sequences, pages, splits,
                                   split_len, scale, q, positions, seq_of_token, block_table, k_cache, v_cache, partial,
                                   shared);
    return;
  }
  if (warp_path && full_block && head_dim == 128 && aligned<sizeof(T) * 4>(k_cache) && aligned<sizeof(T) * 4>(v_cache)) {
    attention_partial_warps<T, 128>(tokens, q_heads, kv_heads, page_size, pages_per_seq, sequences, pages, splits,
                                    split_len, scale, q, positions, seq_of_token, block_table, k_cache, v_cache, partial,
                                    shared);
    return;
  }
  const std::int32_t group = q_heads / kv_heads;
  float* qs = shared;                            // [group][head_dim], scaled
  float* scores = qs + group * head_dim;         // [group][split_len]
  float* running_max = scores + group * split_len;
  float* running_sum = running_max + group;
  float* correction = running_sum + group;
  constexpr int max_pairs = attention_max_group * attention_max_head_dim / attention_block;
  const int pairs = (group * head_dim + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;

  for (std::int64_t work = blockIdx.x; work < static_cast<std::int64_t>(tokens) * kv_heads; work += gridDim.x) {
    const std::int32_t t = static_cast<std::int32_t>(work / kv_heads), h = static_cast<std::int32_t>(work % kv_heads);
    const std::int32_t pos = positions[t], seq = seq_of_token[t];
    const std::int32_t context = attended_context(pos, page_size, pages_per_seq);
    for (std::int32_t s = static_cast<std::int32_t>(blockIdx.y); s < splits; s += static_cast<std::int32_t>(gridDim.y)) {
      __syncthreads();  // the shared memory of the previous (work, split) is no longer read
      for (int i = static_cast<int>(threadIdx.x); i < group * head_dim; i += static_cast<int>(blockDim.x)) {
        const std::int32_t g = i / head_dim, d = i % head_dim;
        qs[i] = to_float(q[(static_cast<std::int64_t>(t) * q_heads + h * group + g) * head_dim + d]) * scale;
      }
      for (int g = static_cast<int>(threadIdx.x); g < group; g += static_cast<int>(blockDim.x)) {
        running_max[g] = -FLT_MAX;
        running_sum[g] = 0.0f;
      }
      float acc[max_pairs];
#pragma unroll
      for (int k = 0; k < max_pairs; ++k) acc[k] = 0.0f;
      // Chunks of split_len positions: this block's are s, s + splits, s + 2 splits, ...
      for (std::int64_t first = static_cast<std::int64_t>(s) * split_len; first < context;
           first += static_cast<std::int64_t>(splits) * split_len) {
        const std::int32_t count = static_cast<std::int32_t>(context - first < split_len ? context - first : split_len);
        __syncthreads();  // queries and running values are written; the last chunk's scores are read
        for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) {
          const std::int64_t slot = cache_slot(seq, static_cast<std::int32_t>(first + i), h, kv_heads, head_dim, page_size,
                                               pages_per_seq, sequences, pages, block_table);
          for (int g = 0; g < group; ++g) scores[g * split_len + i] = -FLT_MAX;
          if (slot < 0) continue;
          const T* key = k_cache + slot;
          for (int g = 0; g < group; ++g) {
            float dot = 0.0f;
            for (int d = 0; d < head_dim; ++d) dot = fmaf(qs[g * head_dim + d], to_float(key[d]), dot);
            scores[g * split_len + i] = dot;
          }
        }
        __syncthreads();
        // A warp a query head: the chunk's max, its weights, the running values' correction.
        for (int g = warp; g < group; g += warps) {
          float chunk_max = -FLT_MAX;
          for (int i = lane; i < count; i += 32) chunk_max = fmaxf(chunk_max, scores[g * split_len + i]);
          for (int o = 16; o > 0; o >>= 1) chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, o));
          const float old_max = running_max[g];
          const float new_max = fmaxf(old_max, chunk_max);
          float sum = 0.0f;
          for (int i = lane; i < count; i += 32) {
            const float score = scores[g * split_len + i];
            const float weight = score == -FLT_MAX ? 0.0f : __expf(score - new_max);
            scores[g * split_len + i] = weight;
            sum += weight;
          }
          for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
          __syncwarp();  // every lane has read running_max[g] before lane 0 replaces it
          if (lane == 0) {
            const float fix = old_max == -FLT_MAX ? 0.0f : __expf(old_max - new_max);
            correction[g] = fix;
            running_sum[g] = running_sum[g] * fix + sum;
            running_max[g] = new_max;
          }
        }
        __syncthreads();
        for (int k = 0; k < pairs && k < max_pairs; ++k) {
          const int pair = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
          if (pair >= group * head_dim) break;
          const int g = pair / head_dim, d = pair % head_dim;
          float value = acc[k] * correction[g];
          for (int i = 0; i < count; ++i) {
            const float weight = scores[g * split_len + i];
            if (weight == 0.0f) continue;
            const std::int64_t slot = cache_slot(seq, static_cast<std::int32_t>(first + i), h, kv_heads, head_dim,
                                                 page_size, pages_per_seq, sequences, pages, block_table);
            value = fmaf(weight, to_float(v_cache[slot + d]), value);
          }
          acc[k] = value;
        }
      }
      __syncthreads();
      // This split's record a query head: max, sum, then the unnormalised weighted values.
      for (int k = 0; k < pairs && k < max_pairs; ++k) {
        const int pair = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
        if (pair >= group * head_dim) break;
        const int g = pair / head_dim, d = pair % head_dim;
        float* record = partial + ((static_cast<std::int64_t>(t) * q_heads + h * group + g) * splits + s) * (head_dim + 2);
        record[2 + d] = acc[k];
        if (d == 0) {
          record[0] = running_max[g];
          record[1] = running_sum[g];
        }
      }
    }
  }
}

/// Splits whose weights attention_combine_kernel keeps in shared memory (more are recomputed).
constexpr int attention_combine_cached = 256;

/// A block a (token, query head): the splits' maxima and sums are read a thread a split, all
/// at once, and each output element's weighted values with several loads in flight.
template <class T>
__global__ void __launch_bounds__(attention_block)
    attention_combine_kernel(std::int32_t tokens, std::int32_t q_heads, std::int32_t head_dim, std::int32_t splits,
                             const float* partial, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  __shared__ float weight[attention_combine_cached];
  const std::int64_t record_size = std::int64_t{head_dim} + 2;
  for (std::int64_t row = blockIdx.x; row < static_cast<std::int64_t>(tokens) * q_heads; row += gridDim.x) {
    const float* records = partial + row * splits * record_size;
    float max = -FLT_MAX;
    for (int s = static_cast<int>(threadIdx.x); s < splits; s += static_cast<int>(blockDim.x)) {
      if (records[s * record_size + 1] > 0.0f) max = fmaxf(max, records[s * record_size]);
    }
    max = group_reduce<attention_block>(max, MaxOp{});
    // A split's weight: exp(its max - the max), 0 for a split that saw no position.
    const auto weight_of = [&](int s) {
      const float* record = records + s * record_size;
      return record[1] > 0.0f ? __expf(record[0] - max) : 0.0f;
    };
    float total = 0.0f;
    for (int s = static_cast<int>(threadIdx.x); s < splits; s += static_cast<int>(blockDim.x)) {
      const float w = weight_of(s);
      if (s < attention_combine_cached) weight[s] = w;
      total += records[s * record_size + 1] > 0.0f ? records[s * record_size + 1] * w : 0.0f;
    }
    total = group_reduce<attention_block>(total, SumOp{});  // its barriers also publish the weights
    for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += static_cast<int>(blockDim.x)) {
      float value = 0.0f;
#pragma unroll 8
      for (int s = 0; s < splits; ++s) {
        const float w = s < attention_combine_cached ? weight[s] : weight_of(s);
        const float v = records[s * record_size + 2 + d];  // read whatever the weight, in flight together
        value = fmaf(w > 0.0f ? v : 0.0f, w, value);
      }
      out[row * head_dim + d] = from_float<T>(total > 0.0f ? value / total : 0.0f);
    }
    __syncthreads();  // the weights are read before the next row's are written
  }
}

/// positions[t] += 1 for every token: a decode step's last node, so that the next launch of the
/// same executable decodes at the next positions without the host writing them.
template <class T>
__global__ void advance_positions_kernel(std::int32_t tokens, std::int32_t* positions) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < tokens;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    positions[t] += 1;
  }
}

}  // namespace flowdsl::kernels::detail
