// SPDX-License-Identifier: Apache-2.0
// The few driver-API graph calls emission and updates make directly, found through the
// runtime's entry-point query, so that flowdsl links no libcuda of its own.
//
// Why: cudaGraphAddKernelNode and cudaGraphExecKernelNodeSetParams translate the kernel's host
// stub to its driver function on every call (a lookup under the runtime's lock, a lazy-loading
// check, the parameter conversion). Emission knows each node's function once per kernel, so
// it calls the driver with it, about half the runtime call's cost an add and an update
// (bench/native_calls_bench.cu; the figures are in docs/performance.md).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace flowdsl::lowering {

struct DriverCalls {
  PFN_cuGraphAddKernelNode_v12000 add_kernel_node = nullptr;
  PFN_cuGraphExecKernelNodeSetParams_v12000 exec_kernel_node_set_params = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  /// Whether every call was found; otherwise callers use the runtime's.
  bool available() const noexcept {
    return add_kernel_node != nullptr && exec_kernel_node_set_params != nullptr && ctx_get_current != nullptr;
  }
};

/// The calls, looked up on first use (thread-safe); members stay null when the driver lacks one.
const DriverCalls& driver_calls();

/// The driver context current on this thread; null when there is none or the calls are unavailable.
///
/// A driver handle belongs to one context, and the driver's calls act on the calling thread's
/// current context, which the runtime makes current only when a thread first makes a runtime
/// call. So a driver call is made only where the handle's context is current (a thread whose
/// first CUDA call would be an update has none yet: the driver crashed there, on the H200,
/// 2026-12-01); elsewhere the runtime's call binds the context and does the work.
CUcontext current_context() noexcept;

/// A driver status as the runtime's: CUDA numbers the errors of these calls alike in both APIs
/// (CUDA_ERROR_INVALID_VALUE is cudaErrorInvalidValue, ..._GRAPH_EXEC_UPDATE_FAILURE is
/// cudaErrorGraphExecUpdateFailure), so CudaError names them as the runtime would.
inline cudaError_t as_runtime_status(CUresult status) noexcept { return static_cast<cudaError_t>(status); }

}  // namespace flowdsl::lowering
