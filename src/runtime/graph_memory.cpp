// SPDX-License-Identifier: Apache-2.0
// Graph memory in use on a device: what CUDA's graph allocator holds for alloc nodes.
#include "flowdsl/runtime.hpp"

namespace flowdsl {

GraphMemory graph_memory(int device) {
  GraphMemory memory;
  const std::pair<cudaGraphMemAttributeType, std::uint64_t*> attributes[] = {
      {cudaGraphMemAttrUsedMemCurrent, &memory.used},
      {cudaGraphMemAttrUsedMemHigh, &memory.used_high},
      {cudaGraphMemAttrReservedMemCurrent, &memory.reserved},
      {cudaGraphMemAttrReservedMemHigh, &memory.reserved_high},
  };
  for (const auto& [attribute, out] : attributes) {
    check(cudaDeviceGetGraphMemAttribute(device, attribute, out), "cudaDeviceGetGraphMemAttribute");
  }
  return memory;
}

}  // namespace flowdsl
