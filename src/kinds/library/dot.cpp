// SPDX-License-Identifier: Apache-2.0
// Library nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"
#include "json_arguments.hpp"

namespace flowdsl::io {

void dot_label(const LibraryOp& op, DotLabel& label) {
  const std::string call = call_name_of(op);
  label.lines.push_back("library " + (call.empty() ? std::string("(unnamed)") : call));
  if (!label.options.show_arguments) return;
  const KernelInfo* entry =
      op.info != nullptr ? op.info
                         : (label.options.registry ? label.options.registry->find_function(op.function) : nullptr);
  dot_arguments(op.args, entry, label);
}

DotStyle dot_style(Tag<LibraryOp>) { return {"khaki"}; }

}  // namespace flowdsl::io
