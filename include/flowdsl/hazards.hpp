// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file hazards.hpp
/// \brief Edges inferred from what nodes read and write, as task-based runtimes do.
///
/// Validation reports *hazards*: two nodes of one body that touch overlapping bytes, one of
/// them writing, with no path between them (Graph::check_hazards turns it off). A graph can
/// instead be declared without edges and get them from its accesses:
/// \code
///   flowdsl::Graph g;
///   flowdsl::kernels::fill(g, "init", n, 1.0f, d_x);
///   flowdsl::kernels::scale(g, "twice", n, 2.0f, d_x, d_y);    // reads x: after init
///   flowdsl::EdgeInference made = flowdsl::infer_edges(g);      // made.added == 1
/// \endcode
/// Accesses are the declared ones (reads(), writes()) and those a node's parameters imply
/// (registered kernels' extents, copies, fills); see docs/architecture.md, "Hazards".

#include <cstddef>
#include <vector>

#include "flowdsl/graph.hpp"

namespace flowdsl {

/// \brief Every access of node `id`: those declared (reads(), writes(), a file's "reads" and
/// "writes") and those its parameters imply (a registered kernel's extents, a copy's source
/// and destination, a fill's destination). Bytes 0: extent unknown.
std::vector<Access> accesses_of(const Description& description, NodeId id);

/// \brief What infer_edges did.
struct EdgeInference {
  std::size_t added = 0;    ///< edges that are new (inferred and not redundant)
  std::size_t removed = 0;  ///< declared edges dropped as redundant
  bool reduced = true;      ///< false when the reduction was skipped (a cycle) or cut short (size)
};

/// \brief Adds the edges the accesses imply in declaration order, within each body: a reader
/// runs after the last writer of its bytes, a writer after the last writer and every reader
/// since. Then drops every edge (declared or inferred) that a longer path already implies
/// (transitive reduction), so that the graph keeps the fewest edges with the same order.
/// An access of unknown extent reaches the end of its named buffer (Graph::buffer), or of
/// memory when it is in none. Changes the topology.
EdgeInference infer_edges(Graph& graph);

}  // namespace flowdsl
