// The operations each node kind provides to validation, hashing and emission.
//
// Every kind lives in one file under kinds/ and defines the overloads below for its operation
// type; adding a kind means one alternative in flowdsl::Operation, one line per function here,
// and one new file. std::visit makes a missing overload a compile error.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"
#include "hasher.hpp"

namespace flowdsl::lowering {

/// Collects diagnostics, formatting each as "node 'name' (kind): message".
class Diagnostics {
 public:
  explicit Diagnostics(std::vector<Diagnostic>& out) : out_(out) {}
  void report(const Node& node, const std::string& message);
  void add(std::vector<std::string> nodes, std::string message);  // message already complete
  bool empty() const noexcept { return out_.empty(); }

 private:
  std::vector<Diagnostic>& out_;
};

/// What emission needs to know about the device.
struct DeviceLimits {
  int device = 0;
  std::size_t shared_optin = 0;       ///< max dynamic + static shared memory per block (opt-in)
  unsigned max_grid[3] = {0, 0, 0};
};

/// The device and what emission has learnt about it: kernel attributes are read once per
/// function for the life of the backend that owns this, not once per node or per emission.
struct DeviceContext {
  DeviceLimits limits;
  struct KernelAttributes {
    cudaError_t status;
    cudaFuncAttributes attributes;
  };
  std::unordered_map<const void*, KernelAttributes> kernels;
};

// Checks of structure (launch shapes, element sizes, unbound arguments): on topology change.
void check_structure(const KernelOp&, const Node&, Diagnostics&);
void check_structure(const MemcpyOp&, const Node&, Diagnostics&);
void check_structure(const MemsetOp&, const Node&, Diagnostics&);
void check_structure(const EmptyOp&, const Node&, Diagnostics&);
void check_structure(const HostOp&, const Node&, Diagnostics&);

// Checks of parameters (null pointers, zero sizes): on topology change and before updates.
void check_parameters(const KernelOp&, const Node&, Diagnostics&);
void check_parameters(const MemcpyOp&, const Node&, Diagnostics&);
void check_parameters(const MemsetOp&, const Node&, Diagnostics&);
void check_parameters(const EmptyOp&, const Node&, Diagnostics&);
void check_parameters(const HostOp&, const Node&, Diagnostics&);

// The structure that goes into the topology hash.
void hash_structure(const KernelOp&, Hasher&);
void hash_structure(const MemcpyOp&, Hasher&);
void hash_structure(const MemsetOp&, Hasher&);
void hash_structure(const EmptyOp&, Hasher&);
void hash_structure(const HostOp&, Hasher&);

// Checks against the device, made when emitting.
void check_device(const KernelOp&, const Node&, DeviceContext&, Diagnostics&);
void check_device(const MemcpyOp&, const Node&, DeviceContext&, Diagnostics&);
void check_device(const MemsetOp&, const Node&, DeviceContext&, Diagnostics&);
void check_device(const EmptyOp&, const Node&, DeviceContext&, Diagnostics&);
void check_device(const HostOp&, const Node&, DeviceContext&, Diagnostics&);

// Adds the native node. Throws CudaError naming the node.
cudaGraphNode_t add_native(const KernelOp&, const Node&, cudaGraph_t, const std::vector<cudaGraphNode_t>& deps);
cudaGraphNode_t add_native(const MemcpyOp&, const Node&, cudaGraph_t, const std::vector<cudaGraphNode_t>& deps);
cudaGraphNode_t add_native(const MemsetOp&, const Node&, cudaGraph_t, const std::vector<cudaGraphNode_t>& deps);
cudaGraphNode_t add_native(const EmptyOp&, const Node&, cudaGraph_t, const std::vector<cudaGraphNode_t>& deps);
cudaGraphNode_t add_native(const HostOp&, const Node&, cudaGraph_t, const std::vector<cudaGraphNode_t>& deps);

/// Result of an in-place update: the CUDA status and the call that produced it, or flowdsl's
/// own refusal (`reason`) where CUDA would accept an update that cannot work.
struct UpdateStatus {
  cudaError_t code = cudaSuccess;
  const char* call = "";
  const char* reason = nullptr;
};

/// Memory type of a pointer as CUDA sees it (pageable host memory: cudaMemoryTypeUnregistered).
cudaMemoryType memory_type(const void* ptr);

// Applies the node's current parameters to an executable.
UpdateStatus update_native(const KernelOp&, cudaGraphExec_t, cudaGraphNode_t);
UpdateStatus update_native(const MemcpyOp&, cudaGraphExec_t, cudaGraphNode_t);
UpdateStatus update_native(const MemsetOp&, cudaGraphExec_t, cudaGraphNode_t);
UpdateStatus update_native(const EmptyOp&, cudaGraphExec_t, cudaGraphNode_t);
UpdateStatus update_native(const HostOp&, cudaGraphExec_t, cudaGraphNode_t);

}  // namespace flowdsl::lowering
