// SPDX-License-Identifier: Apache-2.0
// Child-graph nodes, lowering side: the body is emitted into a native graph of its own, which
// the node takes over (moved, not cloned), so that the body's native nodes stay the ones the
// executable updates in place.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

cudaGraphNode_t add_native(const ChildOp&, NativeNode& node) { return add_child_graph(node, node.body(0)); }

void launch_eager(const ChildOp&, EagerNode& node) { node.run_body(0); }

// Everything else is the default: the body's nodes are checked, hashed, updated, saved and
// compared as nodes of their own, and the child node has no structure, parameters or accesses.
FLOWDSL_LOWERING(ChildOp)

}  // namespace flowdsl::lowering
