// SPDX-License-Identifier: Apache-2.0
// Memset nodes, lowering side: 1-D fills of 1-, 2- or 4-byte elements.
#include <string>

#include "lowering_facets.hpp"

namespace flowdsl::lowering {
namespace {

cudaMemsetParams native_params(const MemsetOp& op, const Symbols& symbols) {
  cudaMemsetParams p{};
  p.dst = const_cast<void*>(symbols.resolve(op.dst));
  p.value = op.value;
  p.elementSize = op.element_size;
  p.width = op.count;
  p.height = 1;
  p.pitch = 0;
  return p;
}

}  // namespace

void check_structure(const MemsetOp& op, NodeCheck& diag) {
  if (op.element_size != 1 && op.element_size != 2 && op.element_size != 4) {
    diag.report("element size " + std::to_string(op.element_size) + " is not 1, 2 or 4 bytes");
  }
}

void check_parameters(const MemsetOp& op, NodeCheck& diag) {
  if (op.dst == nullptr) diag.report("destination pointer is null");
  if (op.count == 0) diag.report("sets zero elements");
  check_pointer(diag, reinterpret_cast<std::uintptr_t>(op.dst), "destination pointer", "dst");
  check_range(diag, op.dst, op.count * op.element_size, "writes", "dst");
}

void hash_structure(const MemsetOp& op, StructureWords& h) { h.add(op.element_size); }
void describe_structure(const MemsetOp& op, std::vector<StructureField>& out) {
  out.push_back({"element size", std::to_string(op.element_size)});
}

void check_device(const MemsetOp& op, NodeCheck& diag, DeviceContext& device) {
  check_same_device(diag, op.dst, device.limits.device, "dst");
}

cudaGraphNode_t add_native(const MemsetOp& op, NativeNode& node) {
  const cudaMemsetParams params = native_params(op, node.symbols);
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddMemsetNode(&native, node.graph, node.deps.data(), node.deps.size(), &params),
        "cudaGraphAddMemsetNode", node.path.c_str());
  return native;
}

UpdateStatus update_native(const MemsetOp& op, const NativeUpdate& node) {
  // The new destination must be the same kind of allocation as the emitted one (CUDA's rule).
  cudaMemsetParams emitted{};
  if (const cudaError_t e = cudaGraphMemsetNodeGetParams(node.native, &emitted); e != cudaSuccess) {
    return {e, "cudaGraphMemsetNodeGetParams"};
  }
  const cudaMemsetParams params = native_params(op, node.symbols);
  if (emitted.dst != params.dst && memory_type(emitted.dst) != memory_type(params.dst)) {
    return {cudaErrorInvalidValue, "cudaGraphExecMemsetNodeSetParams",
            "the memset destination moved to another kind of memory"};
  }
  return {cudaGraphExecMemsetNodeSetParams(node.exec, node.native, &params), "cudaGraphExecMemsetNodeSetParams"};
}

void launch_eager(const MemsetOp& op, EagerNode& node) {
  // cudaMemsetAsync sets bytes: it serves wider elements whose bytes are all equal. Others run as
  // a graph of this one node (the runtime API has no 16- or 32-bit memset).
  const std::uint32_t byte = op.value & 0xffu;
  const std::uint32_t repeated = op.element_size == 1 ? byte : op.element_size == 2 ? byte * 0x0101u : byte * 0x01010101u;
  void* dst = const_cast<void*>(node.symbols.resolve(op.dst));
  if (op.value == repeated) {
    check(cudaMemsetAsync(dst, static_cast<int>(byte), op.count * op.element_size, node.stream), "cudaMemsetAsync",
          node.path.c_str());
    return;
  }
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate", node.path.c_str());
  const NativeGraph owned(graph);
  const std::vector<cudaGraphNode_t> none;
  std::uint64_t value = 0;
  NativeNode native{graph, none, node.path, nullptr, nullptr, node.symbols, value};
  (void)add_native(op, native);
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate", node.path.c_str());
  const NativeExecutable executable(exec);
  check(cudaGraphLaunch(exec, node.stream), "cudaGraphLaunch", node.path.c_str());
}

void derived_accesses(const MemsetOp& op, KernelInfos&, std::vector<Access>& out) {
  if (op.dst != nullptr && op.count != 0) out.push_back(Access{op.dst, op.count * op.element_size, AccessMode::write});
}

void save_parameters(const MemsetOp& op, std::vector<unsigned char>& out) {
  put(out, op.dst);
  put(out, op.value);
  put(out, op.count);
}

bool same_parameters(const MemsetOp& wanted, SavedParameters& held, const SymbolMatch& symbols) {
  return symbols.same(held.take<const void*>(), wanted.dst) && held.take<std::uint32_t>() == wanted.value &&
         held.take<std::size_t>() == wanted.count;
}

FLOWDSL_LOWERING(MemsetOp)

}  // namespace flowdsl::lowering
