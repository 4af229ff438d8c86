// SPDX-License-Identifier: Apache-2.0
// Memcpy nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"

namespace flowdsl::io {

void dot_label(const MemcpyOp& op, DotLabel& label) {
  label.lines.push_back("memcpy " + std::to_string(op.bytes) + " bytes");
  if (label.options.show_arguments) label.lines.push_back(label.addresses(op.src) + " -> " + label.addresses(op.dst));
}

DotStyle dot_style(Tag<MemcpyOp>) { return {"palegreen"}; }

}  // namespace flowdsl::io
