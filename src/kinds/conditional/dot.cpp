// SPDX-License-Identifier: Apache-2.0
// Conditional nodes (IF, WHILE, SWITCH) in DOT dumps: the label lines after the node's name,
// and the style.
#include <string>

#include "dot_facets.hpp"

namespace flowdsl::io {

namespace {

// "while · default 1": the kind, then the default value if there is one.
void label(const ConditionalFields& op, std::string kind, DotLabel& label) {
  if (op.default_value) kind += " \xc2\xb7 default " + std::to_string(*op.default_value);
  label.lines.push_back(std::move(kind));
}

}  // namespace

void dot_label(const IfOp& op, DotLabel& lines) { label(op, op.has_else ? "if / else" : "if", lines); }
void dot_label(const WhileOp& op, DotLabel& lines) { label(op, "while", lines); }
void dot_label(const SwitchOp& op, DotLabel& lines) {
  label(op, "switch \xc2\xb7 " + std::to_string(op.cases) + (op.cases == 1 ? " case" : " cases"), lines);
}

DotStyle dot_style(Tag<IfOp>) { return {"wheat"}; }
DotStyle dot_style(Tag<WhileOp>) { return {"wheat"}; }
DotStyle dot_style(Tag<SwitchOp>) { return {"wheat"}; }

}  // namespace flowdsl::io
