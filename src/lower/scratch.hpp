// SPDX-License-Identifier: Apache-2.0
// Scratch vectors that lowering keeps per thread from one lowering to the next: a graph lowered
// again (or another of its size) reuses memory already touched instead of fresh pages.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace flowdsl::lowering {

/// What each kept vector is for: two uses of one element type keep a vector each.
enum class ScratchUse { name_slots, name_entries, edge_pairs, predecessor_offsets, predecessor_nodes, order, structure };

/// Vectors over this size are not kept (graphs of more than some 250k nodes allocate afresh).
inline constexpr std::size_t max_kept_scratch_bytes = std::size_t{4} << 20;

template <class T, ScratchUse Use>
std::vector<T>& spare_vector() {
  thread_local std::vector<T> spare;
  return spare;
}

/// An empty vector with the capacity this thread's last lowering gave back for `Use`.
template <ScratchUse Use, class V>
void take_scratch(std::vector<V>& out) {
  out = std::move(spare_vector<V, Use>());
  out.clear();
}

/// Keeps `v`'s memory for the next take_scratch of `Use` on this thread, unless it is larger than
/// max_kept_scratch_bytes or smaller than what is kept already.
template <ScratchUse Use, class V>
void keep_scratch(std::vector<V>&& v) {
  std::vector<V>& spare = spare_vector<V, Use>();
  if (v.capacity() <= spare.capacity() || v.capacity() * sizeof(V) > max_kept_scratch_bytes) return;
  spare = std::move(v);
}

}  // namespace flowdsl::lowering
