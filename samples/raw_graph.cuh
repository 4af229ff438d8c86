// SPDX-License-Identifier: Apache-2.0
// What the samples' hand-written CUDA graphs are made of, so that they run the very kernels of
// the flowdsl graph they are compared with: a kernel node of a flowdsl graph as raw CUDA sees it
// (its function and launch shape), kernel and conditional nodes added with CUDA's graph API,
// and instantiation with upload.
#pragma once

#include <initializer_list>
#include <variant>
#include <vector>

#include <cuda_runtime.h>

#include "common.cuh"
#include "flowdsl/flowdsl.hpp"

namespace sample {

/// A kernel node of a flowdsl graph as a raw launch: the same function and launch shape. The
/// arguments are the caller's, one pointer per kernel parameter, as cudaLaunchKernel takes them.
struct RawKernel {
  template <class Handle>
  RawKernel(const flowdsl::Graph& g, const Handle& node) {
    const auto& op = std::get<flowdsl::KernelOp>(g.description().nodes[node.id()].op);
    function = op.function;
    grid = dim3(op.launch.grid.x, op.launch.grid.y, op.launch.grid.z);
    block = dim3(op.launch.block.x, op.launch.block.y, op.launch.block.z);
    shared_bytes = op.launch.shared_bytes;
    if (shared_bytes > 48 * 1024) {  // as flowdsl does for such a node: the kernel must opt in
      SAMPLE_CHECK(cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
    }
  }

  /// Launches it on `stream`.
  void launch(cudaStream_t stream, std::initializer_list<void*> args) const {
    SAMPLE_CHECK(cudaLaunchKernel(function, grid, block, const_cast<void**>(args.begin()), shared_bytes, stream));
  }

  /// Adds it to `graph` after `deps` (CUDA copies the arguments).
  cudaGraphNode_t add(cudaGraph_t graph, std::initializer_list<cudaGraphNode_t> deps,
                      std::initializer_list<void*> args) const {
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(function);
    p.gridDim = grid;
    p.blockDim = block;
    p.sharedMemBytes = shared_bytes;
    p.kernelParams = const_cast<void**>(args.begin());
    cudaGraphNode_t node = nullptr;
    SAMPLE_CHECK(cudaGraphAddKernelNode(&node, graph, deps.begin(), deps.size(), &p));
    return node;
  }

  const void* function = nullptr;
  dim3 grid, block;
  unsigned shared_bytes = 0;
};

/// Adds a conditional node (`type`, `size` bodies, steered by `handle`) to `graph` after `deps`;
/// `bodies` gets the graphs of its bodies, which the node owns, to add nodes to.
inline cudaGraphNode_t add_conditional(cudaGraph_t graph, std::initializer_list<cudaGraphNode_t> deps,
                                       cudaGraphConditionalHandle handle, cudaGraphConditionalNodeType type,
                                       unsigned size, std::vector<cudaGraph_t>& bodies) {
  cudaGraphNodeParams params{};  // every unused byte zero, as CUDA requires
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = type;
  params.conditional.size = size;
  cudaGraphNode_t node = nullptr;
  SAMPLE_CHECK(cudaGraphAddNode(&node, graph, deps.begin(), nullptr, deps.size(), &params));
  bodies.assign(params.conditional.phGraph_out, params.conditional.phGraph_out + size);
  return node;
}

/// Instantiates `graph` and uploads the executable on `stream`, as flowdsl's runtime does.
inline flowdsl::NativeExecutable instantiate(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphInstantiateParams params{};
  params.flags = cudaGraphInstantiateFlagUpload;
  params.uploadStream = stream;
  cudaGraphExec_t exec = nullptr;
  SAMPLE_CHECK(cudaGraphInstantiateWithParams(&exec, graph, &params));
  return flowdsl::NativeExecutable(exec);
}

/// A new, empty native graph.
inline flowdsl::NativeGraph make_graph() {
  cudaGraph_t graph = nullptr;
  SAMPLE_CHECK(cudaGraphCreate(&graph, 0));
  return flowdsl::NativeGraph(graph);
}

}  // namespace sample
