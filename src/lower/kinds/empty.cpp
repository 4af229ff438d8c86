// Empty nodes: join points with no work and no parameters.
#include "../node_kinds.hpp"

namespace flowdsl::lowering {

void check_structure(const EmptyOp&, const Node&, Diagnostics&) {}
void check_parameters(const EmptyOp&, const Node&, Diagnostics&) {}
void hash_structure(const EmptyOp&, Hasher&) {}
void check_device(const EmptyOp&, const Node&, DeviceContext&, Diagnostics&) {}

cudaGraphNode_t add_native(const EmptyOp&, const Node& node, cudaGraph_t graph,
                           const std::vector<cudaGraphNode_t>& deps) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddEmptyNode(&native, graph, deps.data(), deps.size()), "cudaGraphAddEmptyNode", node.name.c_str());
  return native;
}

UpdateStatus update_native(const EmptyOp&, cudaGraphExec_t, cudaGraphNode_t) { return {}; }

}  // namespace flowdsl::lowering
