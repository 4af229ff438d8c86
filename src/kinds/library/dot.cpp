// SPDX-License-Identifier: Apache-2.0
// Library nodes in DOT dumps: the label lines after the node's name, and the style.
#include "builder/registered_name.hpp"
#include "dot_facets.hpp"
#include "json_arguments.hpp"

namespace flowdsl::io {

void dot_label(const LibraryOp& op, DotLabel& label) {
  const std::string call = call_name_of(op);
  label.lines.push_back("library " + (call.empty() ? std::string("(unnamed)") : call));
  if (!label.options.show_arguments) return;
  dot_arguments(op.args, detail::registered_entry(op.info, op.function, label.options.registry), label);
}

DotStyle dot_style(Tag<LibraryOp>) { return {"khaki"}; }

}  // namespace flowdsl::io
