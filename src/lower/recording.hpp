// SPDX-License-Identifier: Apache-2.0
// What a library call recorded: the native nodes of a recording (its kernels and other nodes),
// and the recordings of an executable's native nodes, for the update check, the profiler and DOT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/description.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/plan.hpp"

namespace flowdsl::lowering {

/// `graph`'s top-level nodes, in CUDA's order. \throws CudaError naming `path`
std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph, const std::string& path);

/// What `graph`'s top-level nodes are (a Recording, known). \throws CudaError naming `path`
Recording shape_of(cudaGraph_t graph, const std::string& path);

/// The type of the first node of `graph` (or of a child graph in it) that CUDA does not allow in
/// a conditional node's body; none when all are allowed (kernel, copy, memset, empty, child and
/// conditional nodes). \throws CudaError naming `path`
std::optional<cudaGraphNodeType> refused_in_conditional_body(cudaGraph_t graph, const std::string& path);

/// A node type as messages name it ("a host node", "an event record node").
std::string node_type_name(cudaGraphNodeType type);

/// The graphs recorded into an executable's native nodes (`natives`, by plan position): the
/// body of each native child node whose description node holds no body of its own (its work was
/// recorded from a library call, not declared); null elsewhere. \throws CudaError
std::vector<cudaGraph_t> recordings(const Description& description, const Plan& plan,
                                    const std::vector<cudaGraphNode_t>& natives);

}  // namespace flowdsl::lowering
