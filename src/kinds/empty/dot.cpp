// SPDX-License-Identifier: Apache-2.0
// Empty nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"

namespace flowdsl::io {

void dot_label(const EmptyOp&, DotLabel& label) { label.lines.push_back("empty"); }
DotStyle dot_style(Tag<EmptyOp>) { return {"white"}; }

}  // namespace flowdsl::io
