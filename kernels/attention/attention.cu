// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the attention kernels: rope_kv_append and decode_attention
// (partial, then combine) over a paged KV cache.
#include <algorithm>

#include "../descriptor.cuh"
#include "attention.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {

/// rope_kv_append: a token's rotations over enough blocks for a thread a pair (at most 16), the
/// tokens along x.
struct ByToken : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32 tokens, i32 q_heads, i32 kv_heads, i32 head_dim, const A&...) {
    const std::int64_t pairs = std::int64_t{std::max(q_heads, 0) + std::max(kv_heads, 0)} * std::max(head_dim / 2, 1);
    const std::int64_t along = std::clamp<std::int64_t>((pairs + attention_block - 1) / attention_block, 1, 16);
    return {Dim3(blocks_for(tokens, 1), static_cast<std::uint32_t>(along)), attention_block};
  }
};

/// A block a (token, key/value head) and split; shared memory for the group's queries and one
/// chunk's scores. The tensor-core path (16-bit types, head_dim 64 or 128) takes a tile of
/// tokens a block, with shared memory for a tile of keys and values.
struct ByTokenHeadSplit : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32 tokens, i32 q_heads, i32 kv_heads, i32 head_dim, i32, i32, i32 sequences, i32,
                           i32 splits, i32 split_len, const A&...) {
    const i32 group = kv_heads > 0 ? std::clamp<i32>(q_heads / kv_heads, 1, attention_max_group) : 1;
    std::int64_t bytes = sizeof(float) * attention_shared_floats(group, std::clamp<i32>(head_dim, 1, attention_max_head_dim),
                                                                 std::clamp<i32>(split_len, 1, attention_max_split));
    std::int64_t work = std::int64_t{tokens};
    if (sizeof...(T) > 0 && (attention_tiles_take<T>(head_dim) && ...)) {
      bytes = std::max(bytes, attention_tiles_shared_bytes(head_dim, 2));
      const i32 per_tile = attention_tile_tokens(tokens, sequences, group);
      work = (std::int64_t{tokens} + per_tile - 1) / per_tile;
    }
    const Dim3 grid(blocks_for(work * std::max<i32>(kv_heads, 1), 1),
                    static_cast<std::uint32_t>(std::clamp<i32>(splits, 1, 65535)));
    return {grid, attention_block, static_cast<std::uint32_t>(bytes)};
  }
};

/// A thread a token.
struct ByTokenI32 : Descriptor {
  using instances = Instances<Types<i32>>;
  template <class... T, class... A>
  static LaunchShape shape(i32 tokens, const A&...) {
    return {blocks_for(tokens, attention_block), attention_block};
  }
};

/// A block a (token, query head).
struct ByTokenHead : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32 tokens, i32 q_heads, const A&...) {
    return {blocks_for(std::int64_t{tokens} * q_heads, 1), attention_block};
  }
};

#define FLOWDSL_KV_SHAPE "tokens", "q_heads", "kv_heads", "head_dim", "page_size", "pages_per_seq", "sequences", "pages"
#define FLOWDSL_KV_POOL(name) name ": pages * kv_heads * page_size * head_dim"
#define FLOWDSL_ATTENTION_KERNELS(X)                                                                                    \
  X(RopeKvAppend, ByToken, "rope_kv_append",                                                                           \
    "q = rope(q), k = rope(k) at each token's position; k and v appended to the paged cache at that position",        \
    rope_kv_append_kernel<T...>, FLOWDSL_KV_SHAPE, "qkv: tokens * (q_heads + 2 * kv_heads) * head_dim",                \
    "positions: tokens", "seq_of_token: tokens", "block_table: sequences * pages_per_seq", "inv_freq: head_dim / 2",   \
    "q: tokens * q_heads * head_dim", FLOWDSL_KV_POOL("k_cache"), FLOWDSL_KV_POOL("v_cache"))                          \
  X(DecodeAttentionPartial, ByTokenHeadSplit, "decode_attention_partial",                                              \
    "grouped-query attention of each token over positions 0 .. its own, one split of the context a block",           \
    attention_partial_kernel<T...>, FLOWDSL_KV_SHAPE, "splits", "split_len", "scale",                                 \
    "q: tokens * q_heads * head_dim", "positions: tokens", "seq_of_token: tokens",                                     \
    "block_table: sequences * pages_per_seq", FLOWDSL_KV_POOL("k_cache"), FLOWDSL_KV_POOL("v_cache"),                  \
    "partial: tokens * q_heads * splits * (head_dim + 2)")                                                             \
  X(DecodeAttentionCombine, ByTokenHead, "decode_attention_combine",                                                   \
    "out = the splits of decode_attention_partial combined (softmax-weighted)", attention_combine_kernel<T...>,       \
    "tokens", "q_heads", "head_dim", "splits", "partial: tokens * q_heads * splits * (head_dim + 2)",                  \
    "out: tokens * q_heads * head_dim")                                                                               \
  X(AdvancePositions, ByTokenI32, "advance_positions", "positions[t] += 1: the next decode step's positions",         \
    advance_positions_kernel<T...>, "tokens", "positions: tokens")
FLOWDSL_ATTENTION_KERNELS(FLOWDSL_KERNEL)
#undef FLOWDSL_KV_POOL
#undef FLOWDSL_KV_SHAPE

/// UsageError unless the launchers' kernels can run `kv` (the registered kernels stay in bounds
/// whatever their arguments, but compute nothing for shapes outside these limits).
void check_paged_kv(const std::string& name, const PagedKv& kv) {
  const auto refuse = [&](const std::string& why) {
    throw UsageError("flowdsl: node '" + name + "': " + why);
  };
  if (kv.q_heads <= 0 || kv.kv_heads <= 0 || kv.q_heads % kv.kv_heads != 0) {
    refuse("q_heads (" + std::to_string(kv.q_heads) + ") must be a positive multiple of kv_heads (" +
           std::to_string(kv.kv_heads) + ")");
  }
  if (kv.q_heads / kv.kv_heads > attention_max_group) {
    refuse("at most " + std::to_string(attention_max_group) + " query heads a key/value head");
  }
  if (kv.head_dim <= 0 || kv.head_dim > attention_max_head_dim) {
    refuse("head_dim must be 1 to " + std::to_string(attention_max_head_dim));
  }
  if (kv.page_size <= 0 || kv.pages_per_seq <= 0 || kv.sequences <= 0 || kv.pages <= 0) {
    refuse("page_size, pages_per_seq, sequences and pages must be positive");
  }
}

}  // namespace

void register_attention(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_ATTENTION_KERNELS); }

}  // namespace detail

AttentionSplits attention_splits(i32 tokens, const PagedKv& kv, i32 max_context) {
  // About two blocks a multiprocessor of a large GPU (132 on an H100): with few (token tile,
  // head) pairs (a decode step's small batches) the context is split until their count times
  // the splits reaches that.
  constexpr std::int64_t target_blocks = 256;
  const i32 group = kv.kv_heads > 0 ? std::max<i32>(kv.q_heads / kv.kv_heads, 1) : 1;
  const i32 per_tile = detail::attention_tile_tokens(tokens, kv.sequences, group);
  const std::int64_t tiles = (std::int64_t{std::max(tokens, 1)} + per_tile - 1) / per_tile;
  const std::int64_t work = std::max<std::int64_t>(1, tiles * std::max(kv.kv_heads, 1));
  const std::int64_t context = std::max<i32>(max_context, 1);
  const std::int64_t wanted = std::max<std::int64_t>(1, (target_blocks + work - 1) / work);
  std::int64_t split_len = (context + wanted - 1) / wanted;
  split_len = std::clamp<std::int64_t>((split_len + 31) / 32 * 32, 32, detail::attention_max_split);
  const std::int64_t splits = std::clamp<std::int64_t>((context + split_len - 1) / split_len, 1, 65535);
  return {static_cast<i32>(splits), static_cast<i32>(split_len)};
}

std::int64_t attention_workspace_floats(i32 tokens, const PagedKv& kv, i32 max_context) {
  return std::int64_t{tokens} * kv.q_heads * attention_splits(tokens, kv, max_context).splits * (kv.head_dim + 2);
}

template <class T>
RopeKvAppendNode<T> rope_kv_append(Into g, std::string name, const PagedKv& kv, const DecodeTokens& batch, const T* qkv,
                                   const float* inv_freq, T* q, T* k_cache, T* v_cache) {
  detail::check_paged_kv(name, kv);
  return detail::declare<detail::RopeKvAppend, T>(g, std::move(name), batch.tokens, kv.q_heads, kv.kv_heads, kv.head_dim,
                                                  kv.page_size, kv.pages_per_seq, kv.sequences, kv.pages, qkv,
                                                  batch.positions, batch.seq_of_token, batch.block_table, inv_freq, q,
                                                  k_cache, v_cache);
}

template <class T>
AttentionNodes<T> decode_attention(Into g, const std::string& name, const PagedKv& kv, const DecodeTokens& batch,
                                   i32 max_context, float scale, const T* q, const T* k_cache, const T* v_cache,
                                   float* workspace, T* out) {
  detail::check_paged_kv(name, kv);
  const AttentionSplits s = attention_splits(batch.tokens, kv, max_context);
  auto partial = detail::declare<detail::DecodeAttentionPartial, T>(
      g, name + ".partial", batch.tokens, kv.q_heads, kv.kv_heads, kv.head_dim, kv.page_size, kv.pages_per_seq,
      kv.sequences, kv.pages, s.splits, s.split_len, scale, q, batch.positions, batch.seq_of_token, batch.block_table,
      k_cache, v_cache, workspace);
  auto combine = detail::declare<detail::DecodeAttentionCombine, T>(g, name, batch.tokens, kv.q_heads, kv.head_dim,
                                                                    s.splits, static_cast<const float*>(workspace), out);
  combine.after(partial);
  return AttentionNodes<T>{partial, combine};
}

KernelNode<i32, i32*> advance_positions(Into g, std::string name, i32 tokens, i32* positions) {
  return detail::declare<detail::AdvancePositions, i32>(g, std::move(name), tokens, positions);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(rope_kv_append)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(decode_attention)

}  // namespace flowdsl::kernels
