// SPDX-License-Identifier: Apache-2.0
// The paged KV cache as the attention kernels read it: the block size and limits the launchers
// keep to, a position's slot through the block table, and the positions a token attends.
#pragma once

#include <cstdint>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

constexpr int attention_block = 128;
/// Limits the launchers and the launch rule keep to (the kernels stay in bounds beyond them).
constexpr int attention_max_head_dim = 256;
constexpr int attention_max_group = 16;  ///< query heads a key/value head
constexpr int attention_max_split = 256; ///< positions a block holds scores for at once

/// The cache slot of position `pos` of sequence `seq`, or -1 where any index is out of bounds.
__device__ __forceinline__ std::int64_t cache_slot(std::int32_t seq, std::int32_t pos, std::int32_t kv_head,
                                                  std::int32_t kv_heads, std::int32_t head_dim, std::int32_t page_size,
                                                  std::int32_t pages_per_seq, std::int32_t sequences, std::int32_t pages,
                                                  const std::int32_t* block_table) {
  if (seq < 0 || seq >= sequences || pos < 0 || page_size <= 0) return -1;
  const std::int32_t entry = pos / page_size;
  if (entry >= pages_per_seq) return -1;
  const std::int32_t page = block_table[static_cast<std::int64_t>(seq) * pages_per_seq + entry];
  if (page < 0 || page >= pages) return -1;
  return ((static_cast<std::int64_t>(page) * kv_heads + kv_head) * page_size + pos % page_size) * head_dim;
}

/// Positions 0 .. pos, none past the block table's row (whose slots cache_slot refuses).
__device__ __forceinline__ std::int32_t attended_context(std::int32_t pos, std::int32_t page_size,
                                                        std::int32_t pages_per_seq) {
  const std::int64_t rows = std::int64_t{page_size} * pages_per_seq;
  return pos < 0 ? 0 : static_cast<std::int32_t>(std::int64_t{pos} + 1 < rows ? std::int64_t{pos} + 1 : rows);
}

}  // namespace flowdsl::kernels::detail
