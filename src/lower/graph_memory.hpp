// SPDX-License-Identifier: Apache-2.0
// Graph memory (alloc and free nodes) across nodes: which free releases which alloc, whether every
// use of an allocation runs between its alloc and its free, and which allocations no free releases.
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "edges.hpp"
#include "flowdsl/plan.hpp"

namespace flowdsl::lowering {

/// Reports frees of memory no alloc node gave, allocations freed twice or from another body,
/// frees not ordered after their alloc, and nodes using an allocation (kernel arguments, copy and
/// fill pointers, declared accesses) that do not run after its alloc and before its free. A use
/// inside a body counts from the node of the alloc's body that holds it. `only`: the uses of these
/// nodes alone (an update); null: everything. Needs a complete order; its reachability searches
/// never pass the later node's position and stop, reporting so, after 32 steps per node and edge
/// plus 4 Mi. Checks nothing unless `ordering.graph_memory` says some node allocates or frees.
void check_graph_memory(const Description& description, const Ordering& ordering, Diagnostics& diag,
                        const std::vector<NodeId>* only = nullptr);

/// Whether one of `nodes` holds the address of an alloc's memory (an update of such a node checks
/// its order again).
bool uses_graph_memory(const Description& description, const std::vector<NodeId>& nodes);

/// The plan positions of the alloc nodes no free node frees: their memory lives until the next
/// launch of the executable frees it (cudaGraphInstantiateFlagAutoFreeOnLaunch), or until it is
/// freed outside the graph.
std::vector<std::uint32_t> unfreed_allocs(const Description& description, const Plan& plan);

/// Frees, on `stream`, what an eager run allocated and did not free: `values` by plan position as
/// EagerNode::value (an alloc's is its address, a free's the address it freed).
/// \throws CudaError
void release_eager_memory(const Description& description, const Plan& plan, const std::vector<std::uint64_t>& values,
                          cudaStream_t stream);

}  // namespace flowdsl::lowering
