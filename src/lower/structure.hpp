// SPDX-License-Identifier: Apache-2.0
// Structure summaries: the structure of a plan as comparable text (per node: path, kind, the
// kind's structural fields, dependencies), kept by the runtime to say why a launch missed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/plan.hpp"

namespace flowdsl::lowering {

/// One structural field of a node, as text: {"grid", "64x1x1"}.
struct StructureField {
  std::string_view name;
  std::string value;
  friend bool operator==(const StructureField& a, const StructureField& b) {
    return a.name == b.name && a.value == b.value;
  }
};

/// The structure of one node of a plan.
struct NodeStructure {
  std::string path;
  std::string_view kind;
  std::vector<StructureField> fields;
  std::vector<std::string> after;  ///< paths of the nodes it depends on, in plan order
};

/// Per plan position, the structure of the node there.
using StructureSummary = std::vector<NodeStructure>;

StructureSummary summarize_structure(const Description& description, const Plan& plan);

/// How `wanted` differs from `cached`, nodes matched by path.
struct StructureComparison {
  std::size_t equal_nodes = 0;           ///< nodes of `wanted` with the same structure in `cached`
  std::size_t difference_count = 0;      ///< all differences found
  std::vector<std::string> differences;  ///< the first few, e.g. "node 'gemm': grid 64x1x1 -> 128x1x1"
};

StructureComparison compare_structure(const StructureSummary& cached, const StructureSummary& wanted,
                                      std::size_t max_differences);

}  // namespace flowdsl::lowering
