// SPDX-License-Identifier: Apache-2.0
#include "driver_calls.hpp"

namespace flowdsl::lowering {
namespace {

template <class Pfn>
Pfn find(const char* name, int version) {
  void* found = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &found, version, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Pfn>(found);
}

}  // namespace

const DriverCalls& driver_calls() {
  static const DriverCalls calls = [] {
    DriverCalls c;
    c.add_kernel_node = find<PFN_cuGraphAddKernelNode_v12000>("cuGraphAddKernelNode", 12000);
    c.exec_kernel_node_set_params =
        find<PFN_cuGraphExecKernelNodeSetParams_v12000>("cuGraphExecKernelNodeSetParams", 12000);
    c.ctx_get_current = find<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
    return c;
  }();
  return calls;
}

CUcontext current_context() noexcept {
  const DriverCalls& calls = driver_calls();
  CUcontext context = nullptr;
  if (!calls.available() || calls.ctx_get_current(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

}  // namespace flowdsl::lowering
