// SPDX-License-Identifier: Apache-2.0
// What library nodes recorded into a cached executable, read from its native graph.
#include "flowdsl/runtime.hpp"
#include "lower/recording.hpp"

namespace flowdsl {

std::vector<Recording> recordings(const Runtime& runtime, const Graph& graph) {
  const Description& d = graph.description();
  std::vector<Recording> out(d.nodes.size());
  runtime.inspect_executable(graph, [&](const Executable& executable) {
    const std::vector<cudaGraphNode_t>* natives = executable.native_nodes();
    if (natives == nullptr) return;
    const Plan& plan = graph.plan();
    const std::vector<cudaGraph_t> recorded = lowering::recordings(d, plan, *natives);
    for (NodeId id = 0; id < d.nodes.size(); ++id) {
      const cudaGraph_t body = recorded[plan.position[id]];
      if (body == nullptr) continue;
      out[id] = lowering::shape_of(body, node_path(d, id));
    }
  });
  return out;
}

}  // namespace flowdsl
