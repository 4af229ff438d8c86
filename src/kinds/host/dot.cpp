// SPDX-License-Identifier: Apache-2.0
// Host nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"

namespace flowdsl::io {

void dot_label(const HostOp& op, DotLabel& label) {
  label.lines.push_back("host");
  if (label.options.show_arguments) label.lines.push_back("user data " + pointer_text(op.user_data));
}

DotStyle dot_style(Tag<HostOp>) { return {"lightsalmon"}; }

}  // namespace flowdsl::io
