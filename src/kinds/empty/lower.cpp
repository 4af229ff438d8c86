// SPDX-License-Identifier: Apache-2.0
// Empty nodes, lowering side: join points with no work and no parameters.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

cudaGraphNode_t add_native(const EmptyOp&, NativeNode& node) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddEmptyNode(&native, node.graph, node.deps.data(), node.deps.size()), "cudaGraphAddEmptyNode",
        node.path.c_str());
  return native;
}

void launch_eager(const EmptyOp&, EagerNode&) {}  // stream order already joins

// No structure, no parameters, no accesses: the defaults.
FLOWDSL_LOWERING(EmptyOp)

}  // namespace flowdsl::lowering
