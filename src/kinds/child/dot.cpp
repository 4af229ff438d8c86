// SPDX-License-Identifier: Apache-2.0
// Child-graph nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"

namespace flowdsl::io {

void dot_label(const ChildOp&, DotLabel& label) { label.lines.push_back("child graph"); }
DotStyle dot_style(Tag<ChildOp>) { return {"lavender"}; }

}  // namespace flowdsl::io
