// Event nodes, lowering side: CUDA's event record and event wait nodes, whose event is a
// parameter (cudaGraphExecEventRecordNodeSetEvent, cudaGraphExecEventWaitNodeSetEvent). Launched
// eagerly, they are cudaEventRecord and cudaStreamWaitEvent on the stream.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_structure(const EventRecordOp&, NodeCheck&) {}
void check_structure(const EventWaitOp&, NodeCheck&) {}

void check_parameters(const EventRecordOp& op, NodeCheck& diag) {
  if (op.event == nullptr) diag.report("event is null");
}
void check_parameters(const EventWaitOp& op, NodeCheck& diag) {
  if (op.event == nullptr) diag.report("event is null");
}

void hash_structure(const EventRecordOp&, StructureWords&) {}
void hash_structure(const EventWaitOp&, StructureWords&) {}
void describe_structure(const EventRecordOp&, std::vector<StructureField>&) {}
void describe_structure(const EventWaitOp&, std::vector<StructureField>&) {}

void check_device(const EventRecordOp&, NodeCheck&, DeviceContext&) {}
void check_device(const EventWaitOp&, NodeCheck&, DeviceContext&) {}

std::uint64_t prepare_native(const EventRecordOp&, cudaGraph_t, const std::string&) { return 0; }
std::uint64_t prepare_native(const EventWaitOp&, cudaGraph_t, const std::string&) { return 0; }

cudaGraphNode_t add_native(const EventRecordOp& op, NativeNode& node) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddEventRecordNode(&native, node.graph, node.deps.data(), node.deps.size(), op.event),
        "cudaGraphAddEventRecordNode", node.path.c_str());
  return native;
}

cudaGraphNode_t add_native(const EventWaitOp& op, NativeNode& node) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddEventWaitNode(&native, node.graph, node.deps.data(), node.deps.size(), op.event),
        "cudaGraphAddEventWaitNode", node.path.c_str());
  return native;
}

UpdateStatus update_native(const EventRecordOp& op, const NativeUpdate& node) {
  return {cudaGraphExecEventRecordNodeSetEvent(node.exec, node.native, op.event), "cudaGraphExecEventRecordNodeSetEvent"};
}

UpdateStatus update_native(const EventWaitOp& op, const NativeUpdate& node) {
  return {cudaGraphExecEventWaitNodeSetEvent(node.exec, node.native, op.event), "cudaGraphExecEventWaitNodeSetEvent"};
}

void launch_eager(const EventRecordOp& op, EagerNode& node) {
  check(cudaEventRecord(op.event, node.stream), "cudaEventRecord", node.path.c_str());
}

void launch_eager(const EventWaitOp& op, EagerNode& node) {
  check(cudaStreamWaitEvent(node.stream, op.event, 0), "cudaStreamWaitEvent", node.path.c_str());
}

// An event orders work; it touches no memory.
void derived_accesses(const EventRecordOp&, KernelInfos&, std::vector<Access>&) {}
void derived_accesses(const EventWaitOp&, KernelInfos&, std::vector<Access>&) {}

void save_parameters(const EventRecordOp& op, std::vector<unsigned char>& out) { put(out, op.event); }
void save_parameters(const EventWaitOp& op, std::vector<unsigned char>& out) { put(out, op.event); }

bool same_parameters(const EventRecordOp& wanted, SavedParameters& held, const SymbolMatch&) {
  return held.take<CudaEvent>() == wanted.event;
}
bool same_parameters(const EventWaitOp& wanted, SavedParameters& held, const SymbolMatch&) {
  return held.take<CudaEvent>() == wanted.event;
}

}  // namespace flowdsl::lowering
