// SPDX-License-Identifier: Apache-2.0
// Structure summaries of plans and their comparison, for explaining cache misses.
#include "structure.hpp"

#include <algorithm>
#include <unordered_map>
#include <variant>

#include "lowering_facets.hpp"

namespace flowdsl::lowering {
namespace {

void summarize(const Description& d, const Plan& plan, const std::vector<PlanStep>& steps, StructureSummary& out) {
  for (const PlanStep& step : steps) {
    NodeStructure& node = out[plan.position[step.node]];
    node.path = node_path(d, step.node);
    std::visit(
        [&](const auto& op) {
          node.kind = std::decay_t<decltype(op)>::kind;
          lowering_of(op).describe_structure(op, node.fields);
        },
        d.nodes[step.node].op);
    for (std::uint32_t dep : step.deps) {
      const bool programmatic = std::binary_search(step.programmatic.begin(), step.programmatic.end(), dep);
      node.after.push_back(node_path(d, steps[dep].node) + (programmatic ? " (programmatic)" : ""));
    }
    for (std::uint32_t body : step.bodies) summarize(d, plan, plan.bodies[body], out);
  }
}

std::string quoted_list(const std::vector<std::string>& paths) {
  if (paths.empty()) return "nothing";
  std::string text;
  for (const std::string& p : paths) text += (text.empty() ? "" : ", ") + quoted_name(p);
  return text;
}

const StructureField* field_named(const std::vector<StructureField>& fields, std::string_view name) {
  for (const StructureField& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Appends how `now` differs from `was` (same path); returns whether they are equal.
bool compare_node(const NodeStructure& was, const NodeStructure& now, std::vector<std::string>& out) {
  const std::string node = "node " + quoted_name(now.path) + ": ";
  const std::size_t before = out.size();
  if (was.kind != now.kind) {
    out.push_back(node + "kind " + std::string(was.kind) + " -> " + std::string(now.kind));
    return false;
  }
  for (const StructureField& f : now.fields) {
    const StructureField* old = field_named(was.fields, f.name);
    if (old == nullptr || old->value != f.value) {
      out.push_back(node + std::string(f.name) + " " + (old ? old->value : "unset") + " -> " + f.value);
    }
  }
  if (was.after != now.after) out.push_back(node + "after " + quoted_list(was.after) + " -> " + quoted_list(now.after));
  return out.size() == before;
}

}  // namespace

StructureSummary summarize_structure(const Description& d, const Plan& plan) {
  StructureSummary out(d.nodes.size());
  summarize(d, plan, plan.steps, out);
  return out;
}

StructureComparison compare_structure(const StructureSummary& cached, const StructureSummary& wanted,
                                      std::size_t max_differences) {
  std::unordered_map<std::string_view, const NodeStructure*> by_path;
  for (const NodeStructure& n : cached) by_path.emplace(n.path, &n);
  StructureComparison result;
  std::vector<std::string> all;
  for (const NodeStructure& n : wanted) {
    const auto it = by_path.find(n.path);
    if (it == by_path.end()) {
      all.push_back("node " + quoted_name(n.path) + " (" + std::string(n.kind) + ") added");
      continue;
    }
    if (compare_node(*it->second, n, all)) ++result.equal_nodes;
    by_path.erase(it);
  }
  for (const NodeStructure& n : cached) {
    if (by_path.count(n.path)) all.push_back("node " + quoted_name(n.path) + " (" + std::string(n.kind) + ") removed");
  }
  // Same nodes, fields and edges, yet another hash: the nodes were declared in another order.
  if (all.empty()) all.push_back("the nodes come in another plan order");
  result.difference_count = all.size();
  if (all.size() > max_differences) all.resize(max_differences);
  result.differences = std::move(all);
  return result;
}

}  // namespace flowdsl::lowering
