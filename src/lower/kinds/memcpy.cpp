// Memcpy nodes: 1-D copies in any direction (cudaMemcpyDefault infers it from the pointers).
#include "../node_kinds.hpp"

namespace flowdsl::lowering {

void check_structure(const MemcpyOp&, const Node&, Diagnostics&) {}

void check_parameters(const MemcpyOp& op, const Node& node, Diagnostics& diag) {
  if (op.dst == nullptr) diag.report(node, "destination pointer is null");
  if (op.src == nullptr) diag.report(node, "source pointer is null");
  if (op.bytes == 0) diag.report(node, "copies zero bytes");
}

void hash_structure(const MemcpyOp&, Hasher&) {}

void check_device(const MemcpyOp&, const Node&, const DeviceLimits&, Diagnostics&) {}

cudaGraphNode_t add_native(const MemcpyOp& op, const Node& node, cudaGraph_t graph,
                           const std::vector<cudaGraphNode_t>& deps) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddMemcpyNode1D(&native, graph, deps.data(), deps.size(), op.dst, op.src, op.bytes,
                                 cudaMemcpyDefault),
        "cudaGraphAddMemcpyNode1D", node.name.c_str());
  return native;
}

UpdateStatus update_native(const MemcpyOp& op, cudaGraphExec_t exec, cudaGraphNode_t native) {
  return {cudaGraphExecMemcpyNodeSetParams1D(exec, native, op.dst, op.src, op.bytes, cudaMemcpyDefault),
          "cudaGraphExecMemcpyNodeSetParams1D"};
}

}  // namespace flowdsl::lowering
