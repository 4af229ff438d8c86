// SPDX-License-Identifier: Apache-2.0
// Memory nodes, lowering side: CUDA's alloc node, whose address becomes the node's native value
// (what its symbol resolves to), and free node; neither can be updated. Launched eagerly, they are
// cudaMallocAsync and cudaFreeAsync on the stream. What spans nodes (which free frees which alloc,
// the order of every use) is checked with the graph: src/lower/graph_memory.cpp.
#include <string>

#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_structure(const AllocOp& op, NodeCheck& diag) {
  if (op.bytes == 0) {
    diag.report("allocates zero bytes");
  } else if (op.bytes - 1 > symbol::max_offset) {
    diag.report("allocates " + std::to_string(op.bytes) +
                " bytes, over the 1 TiB a graph allocation may have (its symbolic address holds a 40-bit offset)");
  }
}

void hash_structure(const AllocOp& op, StructureWords& h) { h.add(op.bytes); }

void describe_structure(const AllocOp& op, std::vector<StructureField>& out) {
  out.push_back({"bytes", std::to_string(op.bytes)});
}

cudaGraphNode_t add_native(const AllocOp& op, NativeNode& node) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice", node.path.c_str());
  // The resident device has access without an access descriptor (CUDA programming guide, graph
  // memory nodes, "Peer Access with Graph Node APIs"); descriptors only add peers.
  cudaMemAllocNodeParams params{};
  params.poolProps.allocType = cudaMemAllocationTypePinned;
  params.poolProps.handleTypes = cudaMemHandleTypeNone;
  params.poolProps.location.type = cudaMemLocationTypeDevice;
  params.poolProps.location.id = device;
  params.bytesize = op.bytes;
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddMemAllocNode(&native, node.graph, node.deps.data(), node.deps.size(), &params),
        "cudaGraphAddMemAllocNode", node.path.c_str());
  node.value = reinterpret_cast<std::uintptr_t>(params.dptr);
  return native;
}

cudaGraphNode_t add_native(const FreeOp& op, NativeNode& node) {
  void* memory = reinterpret_cast<void*>(static_cast<std::uintptr_t>(node.symbols.resolve(op.memory)));
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddMemFreeNode(&native, node.graph, node.deps.data(), node.deps.size(), memory),
        "cudaGraphAddMemFreeNode", node.path.c_str());
  return native;
}

void launch_eager(const AllocOp& op, EagerNode& node) {
  void* memory = nullptr;
  check(cudaMallocAsync(&memory, op.bytes, node.stream), "cudaMallocAsync", node.path.c_str());
  node.value = reinterpret_cast<std::uintptr_t>(memory);
}

void launch_eager(const FreeOp& op, EagerNode& node) {
  const std::uint64_t address = node.symbols.resolve(op.memory);
  check(cudaFreeAsync(reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), node.stream), "cudaFreeAsync",
        node.path.c_str());
  node.value = address;  // freed: the eager run does not free it again (release_eager_memory)
}

// The rest is the defaults. CUDA cannot update memory nodes, and they have no parameters. A free
// hashes nothing: which alloc it frees is fixed when it is declared, and the executables of a
// graph holding memory nodes are that Graph's own. Neither touches the memory's bytes (no
// accesses); the order of its uses is checked with the graph.
FLOWDSL_LOWERING(AllocOp)
FLOWDSL_LOWERING(FreeOp)

}  // namespace flowdsl::lowering
