// SPDX-License-Identifier: Apache-2.0
// Memset nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"

namespace flowdsl::io {

void dot_label(const MemsetOp& op, DotLabel& label) {
  label.lines.push_back("memset " + std::to_string(op.count) + " x " + std::to_string(op.element_size) + " bytes");
  if (label.options.show_arguments) label.lines.push_back(label.addresses(op.dst) + " = " + std::to_string(op.value));
}

DotStyle dot_style(Tag<MemsetOp>) { return {"khaki"}; }

}  // namespace flowdsl::io
