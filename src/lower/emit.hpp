// SPDX-License-Identifier: Apache-2.0
// The emitter: a plan becomes a native graph. The only code that adds native nodes.
#pragma once

#include <vector>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/plan.hpp"
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

/// A native graph with its native nodes, by plan position (bodies' nodes included).
struct Emitted {
  NativeGraph graph;
  std::vector<cudaGraphNode_t> nodes;
  /// The driver's handles of kernel nodes' functions, by plan position (null: other kinds, or
  /// the runtime's calls), for updates.
  std::vector<cudaFunction_t> functions;
  CUcontext context = nullptr;  ///< the driver context those handles belong to
  std::vector<std::uint64_t> values;  ///< native values symbols stand for, by plan position (0: none)
};

/// Reads the limits of `device` that emission checks against.
/// \throws CudaError
DeviceLimits query_device_limits(int device);

/// Checks the description against the device, then adds one native node per plan step, in
/// step order, each with its dependencies in plan order, bodies when their node is added.
/// \throws ValidationError listing every device-dependent problem; CudaError naming the node.
Emitted emit(const Description& description, const Plan& plan, DeviceContext& device);

/// Applies node `id`'s current parameters to `exec`, resolving symbols through `values` (the
/// executable's Emitted::values); `function` is the node's Emitted::functions entry.
UpdateStatus update(const Description& description, const Plan& plan, NodeId id, cudaGraphExec_t exec,
                    cudaGraphNode_t native, cudaFunction_t function, const std::vector<std::uint64_t>& values);

}  // namespace flowdsl::lowering
