// Lowering: a valid description becomes a plan (canonical order) with its topology hash.
#include <algorithm>

#include "../runtime/log_internal.hpp"
#include "edges.hpp"
#include "flowdsl/plan.hpp"
#include "node_kinds.hpp"

namespace flowdsl {

Plan lower(const Description& d) {
  std::vector<Diagnostic> problems;
  lowering::Diagnostics diag(problems);
  const lowering::Ordering ordering = lowering::validate(d, diag);
  if (!problems.empty()) throw ValidationError(std::move(problems));
  const lowering::ResolvedEdges& edges = ordering.edges;
  const std::vector<NodeId>& order = ordering.order;

  Plan plan;
  plan.position.resize(d.nodes.size());
  for (std::uint32_t pos = 0; pos < order.size(); ++pos) plan.position[order[pos]] = pos;
  plan.steps.reserve(order.size());
  for (NodeId id : order) {
    PlanStep step{id, {}};
    step.deps.reserve(edges.predecessors.count(id));
    for (const NodeId* pred = edges.predecessors.begin(id); pred != edges.predecessors.end(id); ++pred) {
      step.deps.push_back(plan.position[*pred]);
    }
    std::sort(step.deps.begin(), step.deps.end());
    plan.steps.push_back(std::move(step));
  }
  plan.topology_hash = topology_hash(d, plan);
  FLOWDSL_DEBUG("lower {} nodes, {} edges: topology {:016x}", plan.steps.size(), d.edges.size(), plan.topology_hash);
  return plan;
}

std::uint64_t topology_hash(const Description& d, const Plan& plan) {
  lowering::Hasher h;
  h.add(plan.steps.size());
  for (const PlanStep& step : plan.steps) {
    const Operation& op = d.nodes[step.node].op;
    h.add(op.index());
    std::visit([&](const auto& o) { lowering::hash_structure(o, h); }, op);
    h.add(step.deps.size());
    for (std::uint32_t dep : step.deps) {
      h.add((std::uint64_t{dep} << 8) | static_cast<std::uint64_t>(EdgeKind::full));
    }
  }
  return h.finish();
}

}  // namespace flowdsl
