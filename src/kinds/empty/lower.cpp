// Empty nodes, lowering side: join points with no work and no parameters.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_structure(const EmptyOp&, NodeCheck&) {}
void check_parameters(const EmptyOp&, NodeCheck&) {}
void hash_structure(const EmptyOp&, StructureWords&) {}
void describe_structure(const EmptyOp&, std::vector<StructureField>&) {}
void check_device(const EmptyOp&, NodeCheck&, DeviceContext&) {}

std::uint64_t prepare_native(const EmptyOp&, cudaGraph_t, const std::string&) { return 0; }

cudaGraphNode_t add_native(const EmptyOp&, NativeNode& node) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddEmptyNode(&native, node.graph, node.deps.data(), node.deps.size()), "cudaGraphAddEmptyNode",
        node.path.c_str());
  return native;
}

UpdateStatus update_native(const EmptyOp&, const NativeUpdate&) { return {}; }

void launch_eager(const EmptyOp&, EagerNode&) {}  // stream order already joins

// Nothing to access.
void derived_accesses(const EmptyOp&, KernelInfos&, std::vector<Access>&) {}

void save_parameters(const EmptyOp&, std::vector<unsigned char>&) {}  // it has none
bool same_parameters(const EmptyOp&, SavedParameters&, const SymbolMatch&) { return true; }

}  // namespace flowdsl::lowering
