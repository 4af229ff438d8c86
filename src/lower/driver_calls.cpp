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
    return c;
  }();
  return calls;
}

}  // namespace flowdsl::lowering
