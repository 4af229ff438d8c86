// SPDX-License-Identifier: Apache-2.0
// Kernel nodes in DOT dumps: the label lines after the node's name, and the style.
#include "dot_facets.hpp"
#include "json_arguments.hpp"

namespace flowdsl::io {

void dot_label(const KernelOp& op, DotLabel& label) {
  const std::string kernel = kernel_name_of(op);
  label.lines.push_back("kernel " + (kernel.empty() ? std::string("(unnamed)") : kernel));
  label.lines.push_back((op.grid_set ? "grid " + to_string(op.launch.grid) : std::string("grid (unset)")) +
                        (op.block_set ? " block " + to_string(op.launch.block) : std::string(" block (unset)")) +
                        (op.launch.shared_bytes ? " smem " + std::to_string(op.launch.shared_bytes) : "") +
                        (op.launch.cluster.volume() != 1 ? " cluster " + to_string(op.launch.cluster) : ""));
  if (!label.options.show_arguments) return;
  dot_arguments(op.args, label.options.registry ? label.options.registry->find_function(op.function) : nullptr, label);
}

DotStyle dot_style(Tag<KernelOp>) { return {"lightblue"}; }

}  // namespace flowdsl::io
