// SPDX-License-Identifier: Apache-2.0
// Debug launches: a graph run node by node, the stream synchronised and checked after each
// node, declared floating-point outputs scanned for NaN.
#pragma once

#include <cuda_runtime_api.h>

#include "flowdsl/graph.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl::detail {

/// Runs `graph` on `stream` node by node; returns once the stream has drained.
/// Throws DebugError naming the first node at fault, ValidationError for an invalid graph,
/// CudaError for a failure that precedes the graph's first node.
void launch_debug(const Graph& graph, cudaStream_t stream, const KernelRegistry& registry);

}  // namespace flowdsl::detail
