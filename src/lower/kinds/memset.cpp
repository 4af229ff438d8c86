// Memset nodes: 1-D fills of 1-, 2- or 4-byte elements.
#include <string>

#include "../node_kinds.hpp"

namespace flowdsl::lowering {
namespace {

cudaMemsetParams native_params(const MemsetOp& op) {
  cudaMemsetParams p{};
  p.dst = op.dst;
  p.value = op.value;
  p.elementSize = op.element_size;
  p.width = op.count;
  p.height = 1;
  p.pitch = 0;
  return p;
}

}  // namespace

void check_structure(const MemsetOp& op, const Node& node, Diagnostics& diag) {
  if (op.element_size != 1 && op.element_size != 2 && op.element_size != 4) {
    diag.report(node, "element size " + std::to_string(op.element_size) + " is not 1, 2 or 4 bytes");
  }
}

void check_parameters(const MemsetOp& op, const Node& node, Diagnostics& diag) {
  if (op.dst == nullptr) diag.report(node, "destination pointer is null");
  if (op.count == 0) diag.report(node, "sets zero elements");
}

void hash_structure(const MemsetOp& op, Hasher& h) { h.add(op.element_size); }

void check_device(const MemsetOp&, const Node&, DeviceContext&, Diagnostics&) {}

cudaGraphNode_t add_native(const MemsetOp& op, const Node& node, cudaGraph_t graph,
                           const std::vector<cudaGraphNode_t>& deps) {
  const cudaMemsetParams params = native_params(op);
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddMemsetNode(&native, graph, deps.data(), deps.size(), &params), "cudaGraphAddMemsetNode",
        node.name.c_str());
  return native;
}

UpdateStatus update_native(const MemsetOp& op, cudaGraphExec_t exec, cudaGraphNode_t native) {
  // The new destination must be the same kind of allocation as the emitted one (CUDA's rule).
  cudaMemsetParams emitted{};
  if (const cudaError_t e = cudaGraphMemsetNodeGetParams(native, &emitted); e != cudaSuccess) {
    return {e, "cudaGraphMemsetNodeGetParams"};
  }
  if (emitted.dst != op.dst && memory_type(emitted.dst) != memory_type(op.dst)) {
    return {cudaErrorInvalidValue, "cudaGraphExecMemsetNodeSetParams",
            "the memset destination moved to another kind of memory"};
  }
  const cudaMemsetParams params = native_params(op);
  return {cudaGraphExecMemsetNodeSetParams(exec, native, &params), "cudaGraphExecMemsetNodeSetParams"};
}

}  // namespace flowdsl::lowering
