// SPDX-License-Identifier: Apache-2.0
// Lowering: a valid description becomes a plan (canonical order per body) with its topology hash.
#include <algorithm>
#include <utility>

#include "edges.hpp"
#include "flowdsl/plan.hpp"
#include "lowering_facets.hpp"
#include "fusion.hpp"
#include "log_internal.hpp"
#include "plan_storage.hpp"

namespace flowdsl {
namespace {

// Makes `step` the step of node `id`, its dependencies given by `index_of` each predecessor,
// ascending. Predecessors ascend by id, so their indices mostly ascend already.
template <class IndexOf>
void make_step(PlanStep& step, const lowering::ResolvedEdges& edges, NodeId id, IndexOf index_of) {
  step.node = id;
  const NodeId* first = edges.predecessors.begin(id);
  const NodeId* last = edges.predecessors.end(id);
  step.deps.reserve(static_cast<std::size_t>(last - first));
  for (const NodeId* pred = first; pred != last; ++pred) step.deps.push_back(index_of(*pred));
  if (step.deps.size() > 1 && !std::is_sorted(step.deps.begin(), step.deps.end())) {
    std::sort(step.deps.begin(), step.deps.end());
  }
  if (edges.programmatic.empty()) return;  // most graphs
  for (const NodeId* pred = first; pred != last; ++pred) {
    if (edges.is_programmatic(*pred, id)) step.programmatic.push_back(index_of(*pred));
  }
  std::sort(step.programmatic.begin(), step.programmatic.end());
}

// The words of a step's dependencies when some are programmatic: each with its edge kind.
void hash_programmatic_deps(const PlanStep& step, lowering::Hasher& h) {
  for (std::uint32_t dep : step.deps) {
    const bool programmatic = std::binary_search(step.programmatic.begin(), step.programmatic.end(), dep);
    h.add((std::uint64_t{dep} << 8) | static_cast<std::uint64_t>(programmatic ? EdgeKind::programmatic : EdgeKind::full));
  }
}

// A step's words of the topology hash: its node's structure_hash (`structure`) with its
// dependency count folded in, then its dependencies with their edge kinds.
inline void hash_step(const PlanStep& step, std::uint64_t structure, lowering::Hasher& h) {
  h.add(structure ^ step.deps.size());
  if (!step.programmatic.empty()) return hash_programmatic_deps(step, h);
  for (std::uint32_t dep : step.deps) h.add((std::uint64_t{dep} << 8) | static_cast<std::uint64_t>(EdgeKind::full));
}

// Splits the global order into bodies and numbers every node by position (each step, then its
// bodies' steps).
class PlanBuilder {
 public:
  PlanBuilder(const Description& d, const lowering::ResolvedEdges& edges, const std::vector<NodeId>& order)
      : d_(d), edges_(edges) {
    local_.resize(d.nodes.size());
    first_body_.resize(d.nodes.size(), 0);
    std::vector<std::vector<NodeId>> members(1);  // body 0: the top level
    for (NodeId id = 0; id < d.nodes.size(); ++id) {
      const std::uint32_t count = body_count(d.nodes[id].op);
      first_body_[id] = static_cast<std::uint32_t>(members.size());
      members.resize(members.size() + count);
    }
    for (NodeId id : order) {
      const Node& n = d.nodes[id];
      std::vector<NodeId>& body = members[n.parent == no_node ? 0 : first_body_[n.parent] + n.body];
      local_[id] = static_cast<std::uint32_t>(body.size());
      body.push_back(id);
    }
    members_ = std::move(members);
  }

  Plan build() {
    Plan plan;
    plan.position.resize(d_.nodes.size());
    plan.bodies.resize(members_.size() - 1);
    std::uint32_t next = 0;
    plan.steps = steps_of(0, plan, next);
    return plan;
  }

 private:
  std::vector<PlanStep> steps_of(std::uint32_t body, Plan& plan, std::uint32_t& next) {
    std::vector<PlanStep> steps(members_[body].size());
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const NodeId id = members_[body][k];
      plan.position[id] = next++;
      make_step(steps[k], edges_, id, [this](NodeId pred) { return local_[pred]; });
      const std::uint32_t count = body_count(d_.nodes[id].op);
      for (std::uint32_t b = 0; b < count; ++b) {
        const std::uint32_t index = first_body_[id] + b;
        steps[k].bodies.push_back(index - 1);
        plan.bodies[index - 1] = steps_of(index, plan, next);
      }
    }
    return steps;
  }

  const Description& d_;
  const lowering::ResolvedEdges& edges_;
  std::vector<std::uint32_t> local_;       ///< per node: its step's index within its body
  std::vector<std::uint32_t> first_body_;  ///< per node: index of its first body in members_
  std::vector<std::vector<NodeId>> members_;
};

// A graph without bodies: one step per node in order, positions equal to step indices. Its
// topology hash is taken as the steps are made (the words hash_plan would add), so that they
// are not read again.
Plan flat_plan(const lowering::ResolvedEdges& edges, const std::vector<NodeId>& order,
               const std::vector<std::uint64_t>& structure) {
  Plan plan;
  plan.position = lowering::take_positions(order.size());
  plan.position.resize(order.size());
  for (std::uint32_t pos = 0; pos < order.size(); ++pos) plan.position[order[pos]] = pos;
  // Each step is made where it is appended, not made empty first and filled on a second visit.
  plan.steps = lowering::take_steps(order.size());
  lowering::Hasher h;
  h.add(order.size());
  for (std::uint32_t pos = 0; pos < order.size(); ++pos) {
    PlanStep& step = plan.steps.emplace_back();
    make_step(step, edges, order[pos], [&](NodeId pred) { return plan.position[pred]; });
    hash_step(step, structure[step.node], h);
  }
  plan.topology_hash = h.finish();
  return plan;
}

// The words of `steps` and of their bodies in the topology hash; `structure`: per node id, its
// structure_hash.
void hash_steps(const Plan& plan, const std::vector<PlanStep>& steps, const std::vector<std::uint64_t>& structure,
                lowering::Hasher& h) {
  for (const PlanStep& step : steps) {
    hash_step(step, structure[step.node], h);
    for (std::uint32_t body : step.bodies) {
      h.add(plan.bodies[body].size());
      hash_steps(plan, plan.bodies[body], structure, h);
    }
  }
}

std::uint64_t hash_plan(const Plan& plan, const std::vector<std::uint64_t>& structure) {
  lowering::Hasher h;
  h.add(plan.steps.size());
  hash_steps(plan, plan.steps, structure, h);
  return h.finish();
}

}  // namespace

Plan lower(const Description& d) {
  std::vector<Diagnostic> problems;
  lowering::Diagnostics diag(problems);
  lowering::Ordering ordering = lowering::validate(d, diag, /*structure_hashes=*/true);
  if (!problems.empty()) throw ValidationError(std::move(problems));
  Plan plan;
  if (ordering.nested) {
    plan = PlanBuilder(d, ordering.edges, ordering.order).build();
    plan.topology_hash = hash_plan(plan, ordering.structure);
  } else {
    plan = flat_plan(ordering.edges, ordering.order, ordering.structure);
  }
  plan.graph_memory = ordering.graph_memory;
  lowering::recycle(std::move(ordering));
  if (d.fuse) {
    FusionPlan fusion = plan_fusion(d, plan);
    if (!fusion.groups.empty()) {
      plan.topology_hash = lowering::hash_fusion(plan.topology_hash, d, plan, fusion);
      plan.fusion = std::make_shared<const FusionPlan>(std::move(fusion));
    }
  }
  FLOWDSL_DEBUG("lower {} nodes, {} edges: topology {:016x}", d.nodes.size(), d.edges.size(), plan.topology_hash);
  return plan;
}

std::uint64_t topology_hash(const Description& d, const Plan& plan) {
  std::vector<std::uint64_t> structure;
  structure.reserve(d.nodes.size());
  for (const Node& n : d.nodes) {
    structure.push_back(std::visit([&](const auto& op) { return lowering::structure_hash(op, n.op.index()); }, n.op));
  }
  const std::uint64_t h = hash_plan(plan, structure);
  return plan.fusion ? lowering::hash_fusion(h, d, plan, *plan.fusion) : h;
}

const Plan& Graph::plan() const {
  std::shared_ptr<const Plan>& slot = detail::plan_slot(state());
  if (slot && slot->fusion && slot->fusion_checked_version != parameter_version()) {
    // A change of a member's pointers or count may rewire or split its group, one of another
    // node's pointers reach an output kept in registers: then the plan is made again.
    thread_local std::vector<NodeId> changed;
    changed.clear();
    changes_since(slot->fusion_checked_version, changed);
    if (lowering::fusion_holds(description(), *slot->fusion, changed)) {
      slot->fusion_checked_version = parameter_version();
    } else {
      FLOWDSL_DEBUG("fusion: a parameter change regroups the graph; lowering it again");
      slot.reset();
    }
  }
  if (!slot) {
    Plan plan = lower(description());
    plan.checked_version = parameter_version();
    plan.fusion_checked_version = parameter_version();
    slot = lowering::share_plan(std::move(plan));
  }
  return *slot;
}

std::uint64_t Graph::topology_hash() const { return plan().topology_hash; }

}  // namespace flowdsl
