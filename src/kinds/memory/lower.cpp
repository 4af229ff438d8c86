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
void check_structure(const FreeOp&, NodeCheck&) {}  // what it frees is checked with the graph

void check_parameters(const AllocOp&, NodeCheck&) {}
void check_parameters(const FreeOp&, NodeCheck&) {}

void hash_structure(const AllocOp& op, StructureWords& h) { h.add(op.bytes); }
// Which alloc a free frees is fixed when it is declared, and the executables of a graph holding
// memory nodes are that Graph's own: nothing to tell them apart by.
void hash_structure(const FreeOp&, StructureWords&) {}

void describe_structure(const AllocOp& op, std::vector<StructureField>& out) {
  out.push_back({"bytes", std::to_string(op.bytes)});
}
void describe_structure(const FreeOp&, std::vector<StructureField>&) {}

void check_device(const AllocOp&, NodeCheck&, DeviceContext&) {}
void check_device(const FreeOp&, NodeCheck&, DeviceContext&) {}

std::uint64_t prepare_native(const AllocOp&, cudaGraph_t, const std::string&) { return 0; }
std::uint64_t prepare_native(const FreeOp&, cudaGraph_t, const std::string&) { return 0; }

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

// All structure: CUDA cannot update memory nodes, and they have no parameters.
UpdateStatus update_native(const AllocOp&, const NativeUpdate&) { return {}; }
UpdateStatus update_native(const FreeOp&, const NativeUpdate&) { return {}; }

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

// Neither touches the memory's bytes; the order of its uses is checked with the graph.
void derived_accesses(const AllocOp&, KernelInfos&, std::vector<Access>&) {}
void derived_accesses(const FreeOp&, KernelInfos&, std::vector<Access>&) {}

// Nothing to keep: memory nodes have no parameters.
void save_parameters(const AllocOp&, std::vector<unsigned char>&) {}
void save_parameters(const FreeOp&, std::vector<unsigned char>&) {}
bool same_parameters(const AllocOp&, SavedParameters&, const SymbolMatch&) { return true; }
bool same_parameters(const FreeOp&, SavedParameters&, const SymbolMatch&) { return true; }

}  // namespace flowdsl::lowering
