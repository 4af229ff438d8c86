// SPDX-License-Identifier: Apache-2.0
// Edge resolution and topological order, shared by validation and planning.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "flowdsl/description.hpp"
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

/// Adjacency in compressed rows: the neighbours of node i are
/// nodes[offsets[i]] .. nodes[offsets[i + 1]], ascending, without duplicates.
struct Adjacency {
  std::vector<std::uint32_t> offsets;
  std::vector<NodeId> nodes;

  const NodeId* begin(NodeId i) const { return nodes.data() + offsets[i]; }
  const NodeId* end(NodeId i) const { return nodes.data() + offsets[i + 1]; }
  std::size_t count(NodeId i) const { return offsets[i + 1] - offsets[i]; }
};

/// Predecessors of each node, without self-edges or unresolvable edges, and which of those
/// edges are programmatic.
struct ResolvedEdges {
  Adjacency predecessors;
  std::vector<std::uint64_t> programmatic;  ///< (to << 32 | from), ascending; empty in most graphs
  /// Every edge goes from a node to one declared later, as resolve_edges found (false: unknown).
  bool forward = false;

  bool is_programmatic(NodeId from, NodeId to) const {
    return !programmatic.empty() &&
           std::binary_search(programmatic.begin(), programmatic.end(), (std::uint64_t{to} << 32) | from);
  }
};

/// Resolves names to ids (within the body of the edge's other end); reports edges to unknown
/// nodes, self-edges and edges between bodies. `one_body`: the caller knows every node sits in
/// one body (no edge can cross one), so edges' ends are not looked up to check it.
ResolvedEdges resolve_edges(const Description& description, Diagnostics& diag, bool one_body = false);

/// Kahn's algorithm, ready nodes taken in declaration order. Returns fewer than `count` ids
/// when the edges hold a cycle. Bodies share no edge, so the order restricted to one body is
/// the order that body alone would get.
std::vector<NodeId> topological_order(const ResolvedEdges& edges, std::size_t count);

/// Resolved edges and the topological order of a description, with what validation learnt of
/// its nodes on its walk over them (so that lowering needs no walk of its own).
struct Ordering {
  ResolvedEdges edges;
  std::vector<NodeId> order;
  bool nested = false;        ///< some node holds bodies
  bool graph_memory = false;  ///< some node allocates or frees graph memory (is_graph_memory)
  /// Per node, its structure_hash(); filled only when validate was asked for it.
  std::vector<std::uint64_t> structure;
};

/// Reports every pair of nodes of one body that touch overlapping bytes, one of them writing,
/// with no path between them (a node holding bodies touches what its bodies touch). Needs a
/// complete order. src/lower/hazards.cpp.
void check_hazards(const Description& description, const Ordering& ordering, BufferIndex& buffers, KernelInfos& kernels,
                   Diagnostics& diag);

/// Checks everything validation covers, reporting into `diag`, and returns the ordering
/// (complete only when nothing was reported). `structure_hashes`: fill Ordering::structure too.
Ordering validate(const Description& description, Diagnostics& diag, bool structure_hashes = false);

/// Keeps the memory of `ordering`'s vectors for this thread's next validate (scratch.hpp).
void recycle(Ordering&& ordering);

}  // namespace flowdsl::lowering
