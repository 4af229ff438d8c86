// SPDX-License-Identifier: Apache-2.0
// Event nodes, lowering side: CUDA's event record and event wait nodes, whose event is a
// parameter (cudaGraphExecEventRecordNodeSetEvent, cudaGraphExecEventWaitNodeSetEvent). Launched
// eagerly, they are cudaEventRecord and cudaStreamWaitEvent on the stream.
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_parameters(const EventRecordOp& op, NodeCheck& diag) {
  if (op.event == nullptr) diag.report("event is null");
}
void check_parameters(const EventWaitOp& op, NodeCheck& diag) {
  if (op.event == nullptr) diag.report("event is null");
}

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

void save_parameters(const EventRecordOp& op, std::vector<unsigned char>& out) { put(out, op.event); }
void save_parameters(const EventWaitOp& op, std::vector<unsigned char>& out) { put(out, op.event); }

bool same_parameters(const EventRecordOp& wanted, SavedParameters& held, const SymbolMatch&) {
  return held.take<CudaEvent>() == wanted.event;
}
bool same_parameters(const EventWaitOp& wanted, SavedParameters& held, const SymbolMatch&) {
  return held.take<CudaEvent>() == wanted.event;
}

// No structure, and an event orders work without touching memory (no accesses): the defaults.
FLOWDSL_LOWERING(EventRecordOp)
FLOWDSL_LOWERING(EventWaitOp)

}  // namespace flowdsl::lowering
