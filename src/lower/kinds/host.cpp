// Host nodes: a host function called in stream order with its user data.
#include "../node_kinds.hpp"

namespace flowdsl::lowering {

void check_structure(const HostOp&, const Node&, Diagnostics&) {}

void check_parameters(const HostOp& op, const Node& node, Diagnostics& diag) {
  if (op.fn == nullptr) diag.report(node, "host function is null");
}

void hash_structure(const HostOp&, Hasher&) {}

void check_device(const HostOp&, const Node&, DeviceContext&, Diagnostics&) {}

cudaGraphNode_t add_native(const HostOp& op, const Node& node, cudaGraph_t graph,
                           const std::vector<cudaGraphNode_t>& deps) {
  const cudaHostNodeParams params{op.fn, op.user_data};
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddHostNode(&native, graph, deps.data(), deps.size(), &params), "cudaGraphAddHostNode",
        node.name.c_str());
  return native;
}

UpdateStatus update_native(const HostOp& op, cudaGraphExec_t exec, cudaGraphNode_t native) {
  const cudaHostNodeParams params{op.fn, op.user_data};
  return {cudaGraphExecHostNodeSetParams(exec, native, &params), "cudaGraphExecHostNodeSetParams"};
}

}  // namespace flowdsl::lowering
