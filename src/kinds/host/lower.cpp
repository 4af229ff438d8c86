// SPDX-License-Identifier: Apache-2.0
// Host nodes, lowering side: a host function called in stream order with its user data.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_parameters(const HostOp& op, NodeCheck& diag) {
  if (op.fn == nullptr) diag.report("host function is null");
}

cudaGraphNode_t add_native(const HostOp& op, NativeNode& node) {
  const cudaHostNodeParams params{op.fn, op.user_data};
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddHostNode(&native, node.graph, node.deps.data(), node.deps.size(), &params), "cudaGraphAddHostNode",
        node.path.c_str());
  return native;
}

UpdateStatus update_native(const HostOp& op, const NativeUpdate& node) {
  const cudaHostNodeParams params{op.fn, op.user_data};
  return {cudaGraphExecHostNodeSetParams(node.exec, node.native, &params), "cudaGraphExecHostNodeSetParams"};
}

void launch_eager(const HostOp& op, EagerNode& node) {
  check(cudaLaunchHostFunc(node.stream, op.fn, op.user_data), "cudaLaunchHostFunc", node.path.c_str());
}

void save_parameters(const HostOp& op, std::vector<unsigned char>& out) {
  put(out, op.fn);
  put(out, op.user_data);
}

bool same_parameters(const HostOp& wanted, SavedParameters& held, const SymbolMatch&) {
  return held.take<void (*)(void*)>() == wanted.fn && held.take<void*>() == wanted.user_data;
}

// No structure; no accesses known (a host function declares what it touches with reads() and
// writes()): the defaults.
FLOWDSL_LOWERING(HostOp)

}  // namespace flowdsl::lowering
