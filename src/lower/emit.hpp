// The emitter: a plan becomes a native graph. The only code that adds native nodes.
#pragma once

#include <vector>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/plan.hpp"
#include "node_kinds.hpp"

namespace flowdsl::lowering {

/// A native graph with its table from node id to native node.
struct Emitted {
  NativeGraph graph;
  std::vector<cudaGraphNode_t> nodes;  ///< by plan position
};

/// Reads the limits of `device` that emission checks against.
/// \throws CudaError
DeviceLimits query_device_limits(int device);

/// Checks the description against the device, then adds one native node per plan step, in
/// step order, each with its dependencies in plan order.
/// \throws ValidationError listing every device-dependent problem; CudaError naming the node.
Emitted emit(const Description& description, const Plan& plan, DeviceContext& device);

/// Applies node `id`'s current parameters to `exec`.
UpdateStatus update(const Description& description, NodeId id, cudaGraphExec_t exec, cudaGraphNode_t native);

}  // namespace flowdsl::lowering
