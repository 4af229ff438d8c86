// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file eager.hpp
/// \brief The graph's work launched node by node on a stream: the baseline that graph replay is
/// compared with (samples, benchmarks) and checked against (the differential test).

#include <functional>

#include <cuda_runtime_api.h>

#include "flowdsl/graph.hpp"

namespace flowdsl {

/// \brief Enqueues every node of `graph` in plan order on `stream`, one CUDA call per node
/// (cudaLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync, cudaLaunchHostFunc, cudaMallocAsync,
/// cudaFreeAsync, cudaEventRecord, cudaStreamWaitEvent); a node holding bodies runs them in its
/// place. A memset of 2- or 4-byte elements whose bytes differ runs as a one-node graph (the
/// runtime API has no such memset). Memory an alloc node allocated and no free node freed is
/// freed on `stream` at the end of the run (also when a node's call failed).
/// \throws ValidationError when the graph is invalid
/// \throws CudaError naming the node whose call failed
void launch_eagerly(const Graph& graph, cudaStream_t stream);

/// \brief As launch_eagerly(graph, stream), calling `after_node(id)` once each node's call is
/// enqueued (for a node holding bodies: after its bodies' nodes). Debug mode checks each node
/// there.
void launch_eagerly(const Graph& graph, cudaStream_t stream, const std::function<void(NodeId)>& after_node);

}  // namespace flowdsl
