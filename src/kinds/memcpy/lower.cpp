// SPDX-License-Identifier: Apache-2.0
// Memcpy nodes, lowering side: 1-D copies in any direction (cudaMemcpyDefault infers it from the
// pointers).
#include "lowering_facets.hpp"

namespace flowdsl::lowering {

void check_parameters(const MemcpyOp& op, NodeCheck& diag) {
  if (op.dst == nullptr) diag.report("destination pointer is null");
  if (op.src == nullptr) diag.report("source pointer is null");
  if (op.bytes == 0) diag.report("copies zero bytes");
  check_pointer(diag, reinterpret_cast<std::uintptr_t>(op.dst), "destination pointer", "dst");
  check_pointer(diag, reinterpret_cast<std::uintptr_t>(op.src), "source pointer", "src");
  check_range(diag, op.src, op.bytes, "reads", "src");
  check_range(diag, op.dst, op.bytes, "writes", "dst");
}

cudaMemoryType memory_type(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaMemoryTypeUnregistered;
  }
  return attributes.type;
}

void check_device(const MemcpyOp& op, NodeCheck& diag, DeviceContext& device) {
  check_same_device(diag, op.src, device.limits.device, "src");
  check_same_device(diag, op.dst, device.limits.device, "dst");
}

cudaGraphNode_t add_native(const MemcpyOp& op, NativeNode& node) {
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddMemcpyNode1D(&native, node.graph, node.deps.data(), node.deps.size(),
                                 const_cast<void*>(node.symbols.resolve(op.dst)), node.symbols.resolve(op.src), op.bytes,
                                 cudaMemcpyDefault),
        "cudaGraphAddMemcpyNode1D", node.path.c_str());
  return native;
}

UpdateStatus update_native(const MemcpyOp& op, const NativeUpdate& node) {
  // CUDA accepts a new operand of another memory type (seen on an H200, CUDA 13.0: a device
  // source rebound to pageable host memory updated fine, then the launch faulted with
  // cudaErrorIllegalAddress). Refuse such updates here so the runtime re-instantiates.
  cudaMemcpy3DParms emitted{};
  if (const cudaError_t e = cudaGraphMemcpyNodeGetParams(node.native, &emitted); e != cudaSuccess) {
    return {e, "cudaGraphMemcpyNodeGetParams"};
  }
  const void* src = node.symbols.resolve(op.src);
  void* dst = const_cast<void*>(node.symbols.resolve(op.dst));
  const bool src_moved = emitted.srcPtr.ptr != src && memory_type(emitted.srcPtr.ptr) != memory_type(src);
  const bool dst_moved = emitted.dstPtr.ptr != dst && memory_type(emitted.dstPtr.ptr) != memory_type(dst);
  if (src_moved || dst_moved) {
    return {cudaErrorInvalidValue, "cudaGraphExecMemcpyNodeSetParams1D",
            "a copy operand moved to another kind of memory (device, pinned host, pageable host, managed)"};
  }
  return {cudaGraphExecMemcpyNodeSetParams1D(node.exec, node.native, dst, src, op.bytes, cudaMemcpyDefault),
          "cudaGraphExecMemcpyNodeSetParams1D"};
}

void launch_eager(const MemcpyOp& op, EagerNode& node) {
  check(cudaMemcpyAsync(const_cast<void*>(node.symbols.resolve(op.dst)), node.symbols.resolve(op.src), op.bytes,
                        cudaMemcpyDefault, node.stream),
        "cudaMemcpyAsync", node.path.c_str());
}

void derived_accesses(const MemcpyOp& op, KernelInfos&, std::vector<Access>& out) {
  if (op.bytes == 0) return;
  if (op.src != nullptr) out.push_back(Access{op.src, op.bytes, AccessMode::read});
  if (op.dst != nullptr) out.push_back(Access{op.dst, op.bytes, AccessMode::write});
}

void save_parameters(const MemcpyOp& op, std::vector<unsigned char>& out) {
  put(out, op.dst);
  put(out, op.src);
  put(out, op.bytes);
}

bool same_parameters(const MemcpyOp& wanted, SavedParameters& held, const SymbolMatch& symbols) {
  return symbols.same(held.take<const void*>(), wanted.dst) && symbols.same(held.take<const void*>(), wanted.src) &&
         held.take<std::size_t>() == wanted.bytes;
}

FLOWDSL_LOWERING(MemcpyOp)

}  // namespace flowdsl::lowering
