#pragma once
/// \file plan.hpp
/// \brief Validation and lowering of a description to a plan: pure data, no GPU needed.

#include <cstdint>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"

namespace flowdsl {

/// \brief One node of the plan, with the plan positions of the steps it depends on.
struct PlanStep {
  NodeId node;                       ///< index into Description::nodes
  std::vector<std::uint32_t> deps;   ///< positions of earlier steps, ascending, no duplicates
};

/// \brief A validated description in deterministic topological order.
///
/// Among nodes that are ready at the same time, the one declared first comes first, so a
/// description always lowers to the same plan. Emitting a plan adds native nodes in step order
/// with each step's dependencies in the order of `deps`.
struct Plan {
  std::vector<PlanStep> steps;
  std::vector<std::uint32_t> position;  ///< position[node id] = index of its step
  std::uint64_t topology_hash = 0;      ///< see topology_hash()
};

/// \brief Checks a description and returns every problem found (empty when valid).
///
/// Reports: empty graph, duplicate names, edges to unknown nodes, self-edges, cycles (as a path
/// of node names), zero grid/block dimensions, blocks over 1024 threads or over the per-axis
/// limits (1024, 1024, 64), null pointers where one is required, zero-byte copies and memsets,
/// unsupported memset element sizes. Device limits (shared memory) are checked when emitting.
std::vector<Diagnostic> validate(const Description& description);

/// \brief Checks only the parameters of the given nodes (the checks an update needs).
std::vector<Diagnostic> validate_parameters(const Description& description, const std::vector<NodeId>& nodes);
/// \brief Checks the parameters of every node (the checks an instantiation of a cached plan needs).
std::vector<Diagnostic> validate_parameters(const Description& description);

/// \brief Validates and lowers a description.
/// \throws ValidationError listing every problem when the description is invalid.
Plan lower(const Description& description);

/// \brief The 64-bit topology hash of a lowered description.
///
/// Covers: node count; per step in plan order its kind, its structure (kernel: function, launch
/// shape and argument count; memset: element size) and its dependencies as plan positions, each
/// with its edge kind (all edges are full dependencies today).
/// Excludes names, parameters (arguments, pointers, sizes, values, host data) and declared
/// accesses. Equal topology with other parameters hashes equal.
std::uint64_t topology_hash(const Description& description, const Plan& plan);

}  // namespace flowdsl
