// Eager launch: each node's own CUDA call, in plan order, bodies in place of their node.
#include "flowdsl/eager.hpp"

#include "flowdsl/plan.hpp"
#include "lowering_facets.hpp"

namespace flowdsl {
namespace {

using AfterNode = std::function<void(NodeId)>;

void run_steps(const Description& d, const Plan& plan, const std::vector<PlanStep>& steps, cudaStream_t stream,
               const AfterNode& after_node) {
  for (const PlanStep& step : steps) {
    const Node& n = d.nodes[step.node];
    const std::string nested = n.parent == no_node ? std::string() : node_path(d, step.node);
    lowering::EagerNode node{stream, n.parent == no_node ? n.name : nested,
                             [&](std::uint32_t index) {
                               run_steps(d, plan, plan.bodies[step.bodies[index]], stream, after_node);
                             }};
    std::visit([&](const auto& op) { lowering::launch_eager(op, node); }, d.nodes[step.node].op);
    if (after_node) after_node(step.node);
  }
}

}  // namespace

void launch_eagerly(const Graph& graph, cudaStream_t stream) { launch_eagerly(graph, stream, AfterNode()); }

void launch_eagerly(const Graph& graph, cudaStream_t stream, const AfterNode& after_node) {
  const Plan& plan = graph.plan();
  run_steps(graph.description(), plan, plan.steps, stream, after_node);
}

}  // namespace flowdsl
