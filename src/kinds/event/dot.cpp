// SPDX-License-Identifier: Apache-2.0
// Event nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"

namespace flowdsl::io {

void dot_label(const EventRecordOp& op, DotLabel& label) {
  label.lines.push_back("record event");
  if (label.options.show_arguments) label.lines.push_back(pointer_text(op.event));
}

void dot_label(const EventWaitOp& op, DotLabel& label) {
  label.lines.push_back("wait for event");
  if (label.options.show_arguments) label.lines.push_back(pointer_text(op.event));
}

DotStyle dot_style(Tag<EventRecordOp>) { return {"plum", "cds"}; }
DotStyle dot_style(Tag<EventWaitOp>) { return {"plum", "invhouse"}; }

}  // namespace flowdsl::io
