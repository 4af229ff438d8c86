// Child-graph nodes, lowering side: the body is emitted into a native graph of its own, which
// the node takes over (moved, not cloned), so that the body's native nodes stay the ones the
// executable updates in place.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_structure(const ChildOp&, NodeCheck&) {}     // the body is checked as a graph
void check_parameters(const ChildOp&, NodeCheck&) {}
void hash_structure(const ChildOp&, StructureWords&) {}          // the body is hashed with the plan
void describe_structure(const ChildOp&, std::vector<StructureField>&) {}  // the body is described with the plan
void check_device(const ChildOp&, NodeCheck&, DeviceContext&) {}

std::uint64_t prepare_native(const ChildOp&, cudaGraph_t, const std::string&) { return 0; }

cudaGraphNode_t add_native(const ChildOp&, NativeNode& node) {
  NativeGraph body = node.body(0);
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeGraph;
  params.graph.graph = body.get();
  params.graph.ownership = cudaGraphChildGraphOwnershipMove;
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddNode(&native, node.graph, node.deps.data(), nullptr, node.deps.size(), &params), "cudaGraphAddNode",
        node.path.c_str());
  (void)body.release();  // the parent graph owns it now
  return native;
}

// Nodes inside the body are updated one by one, like any other; the child node has nothing of
// its own to update.
UpdateStatus update_native(const ChildOp&, const NativeUpdate&) { return {}; }

void launch_eager(const ChildOp&, EagerNode& node) { node.run_body(0); }

// Nothing of its own: its bodies' nodes have theirs.
void derived_accesses(const ChildOp&, KernelInfos&, std::vector<Access>&) {}

// Its body's nodes hold the parameters; they are saved and compared as nodes of their own.
void save_parameters(const ChildOp&, std::vector<unsigned char>&) {}
bool same_parameters(const ChildOp&, SavedParameters&, const SymbolMatch&) { return true; }

}  // namespace flowdsl::lowering
