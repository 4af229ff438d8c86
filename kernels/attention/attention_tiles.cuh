// SPDX-License-Identifier: Apache-2.0
// The tensor-core path of attention_partial_kernel, for bf16 and f16 caches with head_dim 64 or
// 128 (sm_80 and later): a block takes consecutive tokens of one sequence (a prefill chunk's, or
// one token in a decode step) with every query head of one key/value head as the rows of its
// tile, so that each key and value row the block reads serves all of them. Keys and values come
// 64 positions at a time (32 of head_dim 128) from the paged cache into shared memory (the next tile's loads in flight
// while the current one is computed); each warp multiplies 16 query rows by 16 positions at a
// time with mma.sync (scores and the probability-weighted values in float), keeping the online
// softmax's running max and sum a row. Where the block's rows fill fewer than four warps' 16
// (decode), the warps share the tile's positions instead and are combined at the end. The record
// of each row and split is the warp and scalar paths': max, sum, then the unnormalised values.
#pragma once

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "../common.cuh"
#include "../mma.cuh"
#include "paged_cache.cuh"

namespace flowdsl::kernels::detail {

constexpr int attention_tile_rows = 64;       ///< query rows a block: 4 warps of 16
/// Key positions a block holds in shared memory: 64 rows of head_dim 64, 32 of 128 (8 KiB each
/// of keys and values, a thread's part of the next tile in flight in its registers).
__host__ __device__ constexpr int attention_tile_positions(std::int32_t head_dim) { return head_dim > 64 ? 32 : 64; }

/// Tokens a block takes at once: a sequence's tokens on average (a decode step: 1; a prefill
/// chunk: its length), at most as many as fill 64 query rows. Tokens of a tile that belong to
/// different sequences are taken a run of one sequence at a time.
__host__ __device__ constexpr std::int32_t attention_tile_tokens(std::int32_t tokens, std::int32_t sequences,
                                                                 std::int32_t group) {
  const std::int32_t per_sequence = sequences > 0 ? (tokens + sequences - 1) / sequences : 1;
  const std::int32_t limit = group > 0 && group < attention_tile_rows ? attention_tile_rows / group : 1;
  return per_sequence < 1 ? 1 : per_sequence > limit ? limit : per_sequence;
}

/// Whether the tensor-core path runs T and head_dim (the launch shape sizes its shared memory).
template <class T>
__host__ __device__ constexpr bool attention_tiles_take(std::int32_t head_dim) {
  return mma_type<T> && (head_dim == 64 || head_dim == 128);
}

/// The shared memory of the tensor-core path: the key and value tiles (rows padded by 8 elements,
/// so that the fragments' reads hit 32 distinct banks) and a validity flag a position; at the
/// end, aliased, each warp's running max, sum and values of its 16 rows.
__host__ __device__ constexpr std::int64_t attention_tiles_shared_bytes(std::int32_t head_dim, std::int32_t element) {
  const std::int64_t positions = attention_tile_positions(head_dim);
  const std::int64_t tiles = 2 * positions * (head_dim + 8) * element + positions * 4;
  const std::int64_t states = std::int64_t{attention_block / 32} * 16 * (head_dim + 2) * 4;
  return tiles > states ? tiles : states;
}

/// attention_partial_kernel's tensor-core path for head_dim D. `shared` holds
/// attention_tiles_shared_bytes(D, sizeof(T)) bytes, 16-byte aligned.
template <class T, int D>
__device__ void attention_partial_tiles(std::int32_t tokens, std::int32_t q_heads, std::int32_t kv_heads,
                                        std::int32_t page_size, std::int32_t pages_per_seq, std::int32_t sequences,
                                        std::int32_t pages, std::int32_t splits, std::int32_t split_len, float scale,
                                        const T* q, const std::int32_t* positions, const std::int32_t* seq_of_token,
                                        const std::int32_t* block_table, const T* k_cache, const T* v_cache,
                                        float* partial, unsigned char* shared) {
  constexpr int KT = attention_tile_positions(D);
  constexpr int stride = D + 8;                          // elements a row of the shared tiles
  constexpr int pieces = D / 8;                          // 16-byte pieces a row
  constexpr int loads = KT * pieces / attention_block;   // pieces of each tile a thread loads
  constexpr int warps = attention_block / 32;
  constexpr int subtiles = KT / 16;
  static_assert(KT * pieces % attention_block == 0, "every thread loads as many pieces");
  T* ks = reinterpret_cast<T*>(shared);
  T* vs = ks + KT * stride;
  int* valid = reinterpret_cast<int*>(vs + KT * stride);
  float* states = reinterpret_cast<float*>(shared);  // after the last tile: [warp][16][max, sum, D values]

  const std::int32_t group = q_heads / kv_heads;
  const std::int32_t per_tile = attention_tile_tokens(tokens, sequences, group);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int r0 = lane / 4, c0 = (lane % 4) * 2;  // a fragment's row and first column
  const std::int64_t tiles = (std::int64_t{tokens} + per_tile - 1) / per_tile;

  for (std::int64_t work = blockIdx.x; work < tiles * kv_heads; work += gridDim.x) {
    const std::int32_t h = static_cast<std::int32_t>(work % kv_heads);
    const std::int32_t tile_first = static_cast<std::int32_t>(work / kv_heads) * per_tile;
    const std::int32_t tile_end = tokens - tile_first < per_tile ? tokens : tile_first + per_tile;
    for (std::int32_t s = static_cast<std::int32_t>(blockIdx.y); s < splits; s += static_cast<std::int32_t>(gridDim.y)) {
      // A run: the tile's consecutive tokens of one sequence.
      for (std::int32_t run = tile_first; run < tile_end;) {
        const std::int32_t seq = seq_of_token[run];
        std::int32_t run_end = run + 1;
        while (run_end < tile_end && seq_of_token[run_end] == seq) ++run_end;
        std::int32_t top = -1;
        for (std::int32_t t = run; t < run_end; ++t) top = max(top, positions[t]);
        const std::int64_t context = attended_context(top, page_size, pages_per_seq);  // the run's last and before
        const int rows = (run_end - run) * group;
        const int row_groups = (rows + 15) / 16;
        const int ways = warps / row_groups;  // warps sharing a row group's positions
        const int my_group = warp % row_groups, my_way = warp / row_groups;
        const bool active = my_way < ways;
        // This thread's two rows (r0 and r0 + 8 of its warp's 16) and their tokens' positions.
        const int row_a = my_group * 16 + r0, row_b = row_a + 8;
        const std::int32_t pos_a = active && row_a < rows ? positions[run + row_a / group] : -1;
        const std::int32_t pos_b = active && row_b < rows ? positions[run + row_b / group] : -1;
        const auto query = [&](int row) {
          return q + (static_cast<std::int64_t>(run + row / group) * q_heads + h * group + row % group) * D;
        };
        std::uint32_t qf[D / 16][4];
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const int col = kk * 16 + c0;
          const bool a = active && row_a < rows, b = active && row_b < rows;
          qf[kk][0] = a ? *reinterpret_cast<const std::uint32_t*>(query(row_a) + col) : 0u;
          qf[kk][1] = b ? *reinterpret_cast<const std::uint32_t*>(query(row_b) + col) : 0u;
          qf[kk][2] = a ? *reinterpret_cast<const std::uint32_t*>(query(row_a) + col + 8) : 0u;
          qf[kk][3] = b ? *reinterpret_cast<const std::uint32_t*>(query(row_b) + col + 8) : 0u;
        }
        float o[D / 8][4];
#pragma unroll
        for (int dn = 0; dn < D / 8; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
        float max_a = -FLT_MAX, max_b = -FLT_MAX, sum_a = 0.0f, sum_b = 0.0f;

        // Tiles of KT positions of this split's chunks (s, s + splits, ... of split_len each).
        struct Tile {
          std::int64_t chunk, first, end;  // the chunk's start; the tile's positions first .. end
        };
        const std::int64_t step = std::int64_t{splits} * split_len;
        const auto tile_at = [&](std::int64_t chunk, std::int64_t first) {
          const std::int64_t chunk_end = chunk + split_len < context ? chunk + split_len : context;
          return Tile{chunk, first, first + KT < chunk_end ? first + KT : chunk_end};
        };
        const auto next_tile = [&](const Tile& t) {
          if (t.end < (t.chunk + split_len < context ? t.chunk + split_len : context)) return tile_at(t.chunk, t.end);
          return tile_at(t.chunk + step, t.chunk + step);
        };
        uint4 kr[loads], vr[loads];
        int ok = 0;  // bit i: piece i's row is a cache slot
        const auto load = [&](const Tile& t) {
          ok = 0;
#pragma unroll
          for (int i = 0; i < loads; ++i) {
            const int piece = static_cast<int>(threadIdx.x) + i * attention_block;
            const std::int64_t j = t.first + piece / pieces;
            const std::int64_t slot = j < t.end ? cache_slot(seq, static_cast<std::int32_t>(j), h, kv_heads, D, page_size,
                                                             pages_per_seq, sequences, pages, block_table)
                                                : -1;
            kr[i] = vr[i] = make_uint4(0u, 0u, 0u, 0u);
            if (slot >= 0) {
              kr[i] = *reinterpret_cast<const uint4*>(k_cache + slot + (piece % pieces) * 8);
              vr[i] = *reinterpret_cast<const uint4*>(v_cache + slot + (piece % pieces) * 8);
              ok |= 1 << i;
            }
          }
        };
        Tile tile = tile_at(std::int64_t{s} * split_len, std::int64_t{s} * split_len);
        if (tile.first < context) load(tile);
        while (tile.first < context) {
          __syncthreads();  // every warp is done with the previous tile (or the previous run's states)
#pragma unroll
          for (int i = 0; i < loads; ++i) {
            const int piece = static_cast<int>(threadIdx.x) + i * attention_block;
            *reinterpret_cast<uint4*>(ks + (piece / pieces) * stride + (piece % pieces) * 8) = kr[i];
            *reinterpret_cast<uint4*>(vs + (piece / pieces) * stride + (piece % pieces) * 8) = vr[i];
            if (piece % pieces == 0) valid[piece / pieces] = (ok >> i) & 1;
          }
          __syncthreads();
          const Tile next = next_tile(tile);
          if (next.first < context) load(next);  // in flight while this tile is computed
          if (active) {
            for (int st = my_way; st < subtiles; st += ways) {
              const std::int64_t base = tile.first + st * 16;
              if (base >= tile.end) break;
              // Scores of the warp's 16 rows and 16 positions: two 16 x 8 fragments.
              float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
              for (int nt = 0; nt < 2; ++nt) {
                const T* key = ks + (st * 16 + nt * 8 + r0) * stride;
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk) {
                  mma_16x8x16<T>(sc[nt], qf[kk], *reinterpret_cast<const std::uint32_t*>(key + kk * 16 + c0),
                                 *reinterpret_cast<const std::uint32_t*>(key + kk * 16 + c0 + 8));
                }
              }
              // Causal and cache masks; the rows' maxima over the four lanes that hold each row.
              int allowed = 0;  // bit nt * 4 + e
              float top_a = -FLT_MAX, top_b = -FLT_MAX;
#pragma unroll
              for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  const int col = st * 16 + nt * 8 + c0 + (e & 1);
                  const std::int64_t j = tile.first + col;
                  const std::int32_t pos = e < 2 ? pos_a : pos_b;
                  if (j < tile.end && j <= pos && valid[col]) {
                    allowed |= 1 << (nt * 4 + e);
                    sc[nt][e] *= scale;
                    if (e < 2) top_a = fmaxf(top_a, sc[nt][e]);
                    else top_b = fmaxf(top_b, sc[nt][e]);
                  }
                }
              }
#pragma unroll
              for (int o_ = 1; o_ <= 2; o_ <<= 1) {
                top_a = fmaxf(top_a, __shfl_xor_sync(0xffffffffu, top_a, o_));
                top_b = fmaxf(top_b, __shfl_xor_sync(0xffffffffu, top_b, o_));
              }
              const float new_a = fmaxf(max_a, top_a), new_b = fmaxf(max_b, top_b);
              const float fix_a = __expf(max_a - new_a), fix_b = __expf(max_b - new_b);
              max_a = new_a;
              max_b = new_b;
              float p[2][4];
#pragma unroll
              for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  p[nt][e] = (allowed >> (nt * 4 + e)) & 1 ? __expf(sc[nt][e] - (e < 2 ? new_a : new_b)) : 0.0f;
                }
              }
              sum_a = sum_a * fix_a + p[0][0] + p[0][1] + p[1][0] + p[1][1];
              sum_b = sum_b * fix_b + p[0][2] + p[0][3] + p[1][2] + p[1][3];
              // The probabilities as the A operand (16 rows x 16 positions), times the values.
              const std::uint32_t pa[4] = {pack_pair<T>(p[0][0], p[0][1]), pack_pair<T>(p[0][2], p[0][3]),
                                           pack_pair<T>(p[1][0], p[1][1]), pack_pair<T>(p[1][2], p[1][3])};
              const T* v0 = vs + (st * 16 + c0) * stride + r0;
#pragma unroll
              for (int dn = 0; dn < D / 8; ++dn) {
                o[dn][0] *= fix_a;
                o[dn][1] *= fix_a;
                o[dn][2] *= fix_b;
                o[dn][3] *= fix_b;
                const T* v = v0 + dn * 8;
                mma_16x8x16<T>(o[dn], pa, pair_of(v[0], v[stride]), pair_of(v[8 * stride], v[9 * stride]));
              }
            }
          }
          tile = next;
        }
        // The four lanes of a row hold parts of its sum.
#pragma unroll
        for (int o_ = 1; o_ <= 2; o_ <<= 1) {
          sum_a += __shfl_xor_sync(0xffffffffu, sum_a, o_);
          sum_b += __shfl_xor_sync(0xffffffffu, sum_b, o_);
        }
        __syncthreads();  // the tiles are read: their memory takes the warps' states
        if (active) {
          float* mine = states + static_cast<std::int64_t>(warp) * 16 * (D + 2);
          if (lane % 4 == 0) {
            mine[r0 * (D + 2)] = max_a;
            mine[r0 * (D + 2) + 1] = sum_a;
            mine[(r0 + 8) * (D + 2)] = max_b;
            mine[(r0 + 8) * (D + 2) + 1] = sum_b;
          }
#pragma unroll
          for (int dn = 0; dn < D / 8; ++dn) {
            mine[r0 * (D + 2) + 2 + dn * 8 + c0] = o[dn][0];
            mine[r0 * (D + 2) + 2 + dn * 8 + c0 + 1] = o[dn][1];
            mine[(r0 + 8) * (D + 2) + 2 + dn * 8 + c0] = o[dn][2];
            mine[(r0 + 8) * (D + 2) + 2 + dn * 8 + c0 + 1] = o[dn][3];
          }
        }
        __syncthreads();
        // Each row's record: the warps that shared its positions combined.
        for (int pair = static_cast<int>(threadIdx.x); pair < rows * D; pair += attention_block) {
          const int row = pair / D, d = pair % D;
          const int rg = row / 16, r = row % 16;
          float best = -FLT_MAX;
          for (int w = 0; w < ways; ++w) best = fmaxf(best, states[((w * row_groups + rg) * 16 + r) * (D + 2)]);
          float sum = 0.0f, value = 0.0f;
          for (int w = 0; w < ways; ++w) {
            const float* theirs = states + ((w * row_groups + rg) * 16 + r) * (D + 2);
            if (theirs[1] > 0.0f) {
              const float f = __expf(theirs[0] - best);
              sum += theirs[1] * f;
              value += theirs[2 + d] * f;
            }
          }
          const std::int64_t head = static_cast<std::int64_t>(run + row / group) * q_heads + h * group + row % group;
          float* record = partial + (head * splits + s) * (D + 2);
          record[2 + d] = value;
          if (d == 0) {
            record[0] = best;
            record[1] = sum;
          }
        }
        run = run_end;
      }
    }
  }
}

}  // namespace flowdsl::kernels::detail
