// SPDX-License-Identifier: Apache-2.0
// Memory nodes in DOT dumps: the label lines after the node's name, and the style; both drawn as
// cylinders, the allocation's lifetime a dashed edge from alloc to free (src/io/dot.cpp).
#include <string>

#include "dot_facets.hpp"

namespace flowdsl::io {

namespace {

// The alloc node whose memory a free frees, or no_node.
NodeId alloc_of(const Description& d, const FreeOp& op) { return allocation_of(d, op.memory); }

}  // namespace

void dot_label(const AllocOp& op, DotLabel& label) {
  label.lines.push_back("alloc " + std::to_string(op.bytes) + " bytes");
}

void dot_label(const FreeOp& op, DotLabel& label) {
  const NodeId alloc = alloc_of(label.description, op);
  label.lines.push_back(alloc == no_node ? std::string("free (no alloc)")
                                         : "free " + quoted_name(node_path(label.description, alloc)));
}

DotStyle dot_style(Tag<AllocOp>) { return {"lightpink", "cylinder"}; }
DotStyle dot_style(Tag<FreeOp>) { return {"lightpink", "cylinder"}; }

}  // namespace flowdsl::io
