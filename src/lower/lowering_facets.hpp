// SPDX-License-Identifier: Apache-2.0
// What lowering needs of every node kind: checks, hash contribution, device checks, native
// emission, in-place update, eager launch and parameter comparison. A kind defines the facets it
// has something to say about in src/kinds/<kind>/lower.cpp and ends that file with
// FLOWDSL_LOWERING(Op), which gathers them into the kind's table, LoweringOf<Op>::facets; the
// facets it leaves out get the defaults below. add_native and launch_eager have no default: a kind
// without them fails to compile, and a kind without FLOWDSL_LOWERING fails to link (undefined
// LoweringOf<Op>::facets). Generic code reaches a kind's facets through lowering_of(op) only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hasher.hpp"
#include "lowering_support.hpp"
#include "structure.hpp"

namespace flowdsl::lowering {

/// One kind's lowering facets.
template <class Op>
struct Lowering {
  /// Structure (launch shapes, element sizes, unset arguments): on topology change.
  void (*check_structure)(const Op&, NodeCheck&);
  /// Parameters (null pointers, zero sizes): on topology change and before updates.
  void (*check_parameters)(const Op&, NodeCheck&);
  /// The structure that goes into the topology hash, as words (StructureWords::add).
  void (*hash_structure)(const Op&, StructureWords&);
  /// The same structure as named text fields, for explaining cache misses.
  void (*describe_structure)(const Op&, std::vector<StructureField>&);
  /// Checks against the device, made when emitting.
  void (*check_device)(const Op&, NodeCheck&, DeviceContext&);
  /// The native value its symbol stands for, made in `graph` (the graph the node will be added
  /// to) before any node of that graph: a conditional handle; 0 for none. The node is `id` of `d`
  /// (for messages).
  std::uint64_t (*prepare_native)(const Op&, cudaGraph_t graph, const Description& d, NodeId id);
  /// Adds the native node. Throws CudaError naming the node.
  cudaGraphNode_t (*add_native)(const Op&, NativeNode&);
  /// Applies the node's current parameters to an executable.
  UpdateStatus (*update_native)(const Op&, const NativeUpdate&);
  /// Enqueues the node's work on its own (the eager baseline). Throws CudaError.
  void (*launch_eager)(const Op&, EagerNode&);
  /// The accesses its parameters imply (hazard check, edge inference).
  void (*derived_accesses)(const Op&, KernelInfos&, std::vector<Access>&);
  /// Appends its parameters to `out` (put), what an executable holding them keeps.
  void (*save_parameters)(const Op&, std::vector<unsigned char>& out);
  /// Whether its parameters equal those `held` saved of the node at the same plan position of a
  /// description of the same topology (take, then held.done()).
  bool (*same_parameters)(const Op& wanted, SavedParameters& held, const SymbolMatch&);
};

// The defaults: a kind with no structure, no parameters, no device limits, no native value of
// its own and no accesses. A kind with parameters defines save_parameters, same_parameters and
// update_native together.
template <class Op>
void check_structure(const Op&, NodeCheck&) {}
template <class Op>
void check_parameters(const Op&, NodeCheck&) {}
template <class Op>
void hash_structure(const Op&, StructureWords&) {}
template <class Op>
void describe_structure(const Op&, std::vector<StructureField>&) {}
template <class Op>
void check_device(const Op&, NodeCheck&, DeviceContext&) {}
template <class Op>
std::uint64_t prepare_native(const Op&, cudaGraph_t, const Description&, NodeId) {
  return 0;
}
template <class Op>
UpdateStatus update_native(const Op&, const NativeUpdate&) {
  return {};
}
template <class Op>
void derived_accesses(const Op&, KernelInfos&, std::vector<Access>&) {}
template <class Op>
void save_parameters(const Op&, std::vector<unsigned char>&) {}
template <class Op>
bool same_parameters(const Op&, SavedParameters&, const SymbolMatch&) {
  return true;
}

/// The table of kind `Op`, defined by FLOWDSL_LOWERING(Op) in the kind's lower.cpp.
template <class Op>
struct LoweringOf {
  static const Lowering<Op> facets;
};
#define FLOWDSL_LOWERING_DECLARE(Op) template <> const Lowering<Op> LoweringOf<Op>::facets;
FLOWDSL_NODE_KINDS(FLOWDSL_LOWERING_DECLARE)
#undef FLOWDSL_LOWERING_DECLARE

/// The lowering facets of an operation's kind.
template <class Op>
const Lowering<Op>& lowering_of(const Op&) noexcept {
  return LoweringOf<Op>::facets;
}

/// Defines kind `Op`'s table from the facets its file declared before it, and the defaults for
/// the others (a function of the kind's own, of the exact signature, is preferred to a default).
/// In namespace flowdsl::lowering, once per kind.
#define FLOWDSL_LOWERING(Op)                                              \
  template <>                                                             \
  const Lowering<Op> LoweringOf<Op>::facets = {                           \
      &check_structure,  &check_parameters, &hash_structure, &describe_structure, \
      &check_device,     &prepare_native,   &add_native,     &update_native,      \
      &launch_eager,     &derived_accesses, &save_parameters, &same_parameters};

/// A node's part of the topology hash as one word: its kind (`kind`, its index in Operation) and
/// its structure (hash_structure), hashed. Validation computes it while it has the node at hand, so
/// that hashing a plan (plan.cpp) need not visit the nodes again.
template <class Op>
StructureWords structure_words(const Op& op, std::size_t kind) {
  StructureWords words;
  words.add(kind);
  lowering_of(op).hash_structure(op, words);
  return words;
}
template <class Op>
std::uint64_t structure_hash(const Op& op, std::size_t kind) {
  return structure_words(op, kind).hash();
}

/// structure_hash of one node after another, as a walk over a graph's nodes meets them: a node of
/// the last one's structure (its kind and words equal) gets its hash without hashing again.
class StructureHashes {
 public:
  template <class Op>
  std::uint64_t operator()(const Op& op, std::size_t kind) {
    StructureWords words = structure_words(op, kind);
    if (!(seen_ && words == last_)) {
      last_hash_ = words.hash();
      last_ = words;
      seen_ = true;
    }
    return last_hash_;
  }

 private:
  bool seen_ = false;
  StructureWords last_;
  std::uint64_t last_hash_ = 0;
};

}  // namespace flowdsl::lowering
