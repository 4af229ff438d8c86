// Kernel nodes: launch-shape and argument checks, hash of function and shape, native node.
#include <string>

#include "../node_kinds.hpp"

namespace flowdsl::lowering {
namespace {

constexpr std::uint32_t max_block_threads = 1024;
constexpr std::uint32_t max_block[3] = {1024, 1024, 64};
constexpr std::size_t default_shared_limit = 48 * 1024;  // above this a kernel must opt in

std::string dims(const Dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

cudaKernelNodeParams native_params(const KernelOp& op, std::vector<void*>& pointers) {
  op.args.pointers(pointers);
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(op.function);
  p.gridDim = dim3(op.launch.grid.x, op.launch.grid.y, op.launch.grid.z);
  p.blockDim = dim3(op.launch.block.x, op.launch.block.y, op.launch.block.z);
  p.sharedMemBytes = op.launch.shared_bytes;
  p.kernelParams = pointers.empty() ? nullptr : pointers.data();
  p.extra = nullptr;
  return p;
}

}  // namespace

void check_structure(const KernelOp& op, const Node& node, Diagnostics& diag) {
  if (op.function == nullptr) diag.report(node, "kernel function is null");
  const Dim3& g = op.launch.grid;
  const Dim3& b = op.launch.block;
  if (g.volume() == 0) diag.report(node, "grid " + dims(g) + " has a zero dimension");
  if (b.volume() == 0) diag.report(node, "block " + dims(b) + " has a zero dimension");
  if (b.volume() > max_block_threads) {
    diag.report(node, "block of " + std::to_string(b.volume()) + " threads (" + dims(b) + ") exceeds " +
                          std::to_string(max_block_threads));
  } else if (b.x > max_block[0] || b.y > max_block[1] || b.z > max_block[2]) {
    diag.report(node, "block " + dims(b) + " exceeds the per-axis limits 1024x1024x64");
  }
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (!op.args.bound(i)) diag.report(node, "argument " + std::to_string(i) + " was never set (call args(...))");
  }
}

void check_parameters(const KernelOp&, const Node&, Diagnostics&) {}

void hash_structure(const KernelOp& op, Hasher& h) {
  h.add(reinterpret_cast<std::uintptr_t>(op.function));
  for (const Dim3& d : {op.launch.grid, op.launch.block}) {
    h.add(d.x);
    h.add(d.y);
    h.add(d.z);
  }
  h.add(op.launch.shared_bytes);
  h.add(op.args.size());
}

void check_device(const KernelOp& op, const Node& node, DeviceContext& device, Diagnostics& diag) {
  if (op.function == nullptr) return;  // reported by validation
  const DeviceLimits& limits = device.limits;
  auto [it, added] = device.kernels.try_emplace(op.function);
  if (added) {
    it->second.status = cudaFuncGetAttributes(&it->second.attributes, op.function);
    if (it->second.status != cudaSuccess) (void)cudaGetLastError();
  }
  if (it->second.status != cudaSuccess) {
    diag.report(node, std::string("the function is not a kernel loadable on device ") + std::to_string(limits.device) +
                          " (" + cudaGetErrorName(it->second.status) + ")");
    return;
  }
  const cudaFuncAttributes& attr = it->second.attributes;
  const std::size_t shared = std::size_t{op.launch.shared_bytes} + attr.sharedSizeBytes;
  if (shared > limits.shared_optin) {
    diag.report(node, "dynamic shared memory of " + std::to_string(op.launch.shared_bytes) + " bytes (+" +
                          std::to_string(attr.sharedSizeBytes) + " static) exceeds the device's limit of " +
                          std::to_string(limits.shared_optin) + " bytes per block");
  }
  if (op.launch.block.volume() > static_cast<std::uint64_t>(attr.maxThreadsPerBlock)) {
    diag.report(node, "block of " + std::to_string(op.launch.block.volume()) + " threads exceeds this kernel's limit of " +
                          std::to_string(attr.maxThreadsPerBlock) + " (registers or launch bounds)");
  }
  const std::uint32_t grid[3] = {op.launch.grid.x, op.launch.grid.y, op.launch.grid.z};
  for (int axis = 0; axis < 3; ++axis) {
    if (grid[axis] > limits.max_grid[axis]) {
      diag.report(node, "grid " + dims(op.launch.grid) + " exceeds the device's limit of " +
                            std::to_string(limits.max_grid[axis]) + " blocks on axis " + "xyz"[axis]);
    }
  }
}

cudaGraphNode_t add_native(const KernelOp& op, const Node& node, cudaGraph_t graph,
                           const std::vector<cudaGraphNode_t>& deps) {
  if (op.launch.shared_bytes > default_shared_limit) {
    check(cudaFuncSetAttribute(op.function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(op.launch.shared_bytes)),
          "cudaFuncSetAttribute", node.name.c_str());
  }
  thread_local std::vector<void*> pointers;
  const cudaKernelNodeParams params = native_params(op, pointers);
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddKernelNode(&native, graph, deps.data(), deps.size(), &params), "cudaGraphAddKernelNode",
        node.name.c_str());
  return native;
}

UpdateStatus update_native(const KernelOp& op, cudaGraphExec_t exec, cudaGraphNode_t native) {
  thread_local std::vector<void*> pointers;
  const cudaKernelNodeParams params = native_params(op, pointers);
  return {cudaGraphExecKernelNodeSetParams(exec, native, &params), "cudaGraphExecKernelNodeSetParams"};
}

}  // namespace flowdsl::lowering
