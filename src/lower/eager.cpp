// SPDX-License-Identifier: Apache-2.0
// Eager launch: each node's own CUDA call, in plan order, bodies in place of their node; graph
// memory left unfreed is freed at the end.
#include "flowdsl/eager.hpp"

#include "flowdsl/plan.hpp"
#include "graph_memory.hpp"
#include "lowering_facets.hpp"

namespace flowdsl {
namespace {

using AfterNode = std::function<void(NodeId)>;

struct EagerRun {
  const Description& d;
  const Plan& plan;
  cudaStream_t stream;
  const AfterNode& after_node;
  std::vector<std::uint64_t> values;  // what symbols stand for, by plan position
  lowering::Symbols symbols{d, plan, values};
};

void run_steps(EagerRun& run, const std::vector<PlanStep>& steps) {
  const Description& d = run.d;
  for (const PlanStep& step : steps) {
    const Node& n = d.nodes[step.node];
    const std::string nested = n.parent == no_node ? std::string() : node_path(d, step.node);
    lowering::EagerNode node{run.stream, n.parent == no_node ? n.name : nested,
                             [&](std::uint32_t index) { run_steps(run, run.plan.bodies[step.bodies[index]]); },
                             run.symbols, run.values[run.plan.position[step.node]]};
    std::visit([&](const auto& op) { lowering::lowering_of(op).launch_eager(op, node); }, d.nodes[step.node].op);
    if (run.after_node) run.after_node(step.node);
  }
}

}  // namespace

void launch_eagerly(const Graph& graph, cudaStream_t stream) { launch_eagerly(graph, stream, AfterNode()); }

void launch_eagerly(const Graph& graph, cudaStream_t stream, const AfterNode& after_node) {
  const Plan& plan = graph.plan();
  // Refused before anything runs: a kernel ahead of a conditional node would take its condition,
  // which exists only in a graph.
  const Description& d = graph.description();
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (is_conditional(d.nodes[id].op)) {
      throw UsageError("flowdsl: node " + quoted_name(node_path(d, id)) +
                       " is a conditional node: its condition is set on the device while a graph runs, so it cannot "
                       "run node by node (launch_eagerly, debug mode); launch the graph through a Runtime");
    }
  }
  EagerRun run{graph.description(), plan, stream, after_node, std::vector<std::uint64_t>(plan.position.size(), 0)};
  if (!plan.graph_memory) {
    run_steps(run, plan.steps);
    return;
  }
  // Memory no free node released goes at the end of the run, as a launch's would at the next one;
  // after a failed node too, so that the run leaks nothing.
  try {
    run_steps(run, plan.steps);
  } catch (...) {
    try {
      lowering::release_eager_memory(run.d, plan, run.values, stream);
    } catch (const CudaError&) {  // the first failure is the one to report
    }
    throw;
  }
  lowering::release_eager_memory(run.d, plan, run.values, stream);
}

}  // namespace flowdsl
