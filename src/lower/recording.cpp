// SPDX-License-Identifier: Apache-2.0
#include "recording.hpp"

#include "flowdsl/cuda_handles.hpp"

namespace flowdsl::lowering {

std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph, const std::string& path) {
  std::size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes", path.c_str());
  std::vector<cudaGraphNode_t> nodes(count);
  if (count != 0) check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes", path.c_str());
  nodes.resize(count);
  return nodes;
}

Recording shape_of(cudaGraph_t graph, const std::string& path) {
  Recording shape;
  shape.known = true;
  for (cudaGraphNode_t node : nodes_of(graph, path)) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType", path.c_str());
    ++(type == cudaGraphNodeTypeKernel ? shape.kernels : shape.others);
  }
  return shape;
}

std::string node_type_name(cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeHost: return "a host node";
    case cudaGraphNodeTypeWaitEvent: return "an event wait node";
    case cudaGraphNodeTypeEventRecord: return "an event record node";
    case cudaGraphNodeTypeExtSemaphoreSignal: return "an external semaphore signal node";
    case cudaGraphNodeTypeExtSemaphoreWait: return "an external semaphore wait node";
    case cudaGraphNodeTypeMemAlloc: return "a memory allocation node";
    case cudaGraphNodeTypeMemFree: return "a memory free node";
    default: return "a node of a type CUDA refuses there";
  }
}

std::optional<cudaGraphNodeType> refused_in_conditional_body(cudaGraph_t graph, const std::string& path) {
  for (cudaGraphNode_t node : nodes_of(graph, path)) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType", path.c_str());
    switch (type) {
      case cudaGraphNodeTypeKernel:
      case cudaGraphNodeTypeMemcpy:
      case cudaGraphNodeTypeMemset:
      case cudaGraphNodeTypeEmpty:
      case cudaGraphNodeTypeConditional:
        break;
      case cudaGraphNodeTypeGraph: {
        cudaGraph_t child = nullptr;
        check(cudaGraphChildGraphNodeGetGraph(node, &child), "cudaGraphChildGraphNodeGetGraph", path.c_str());
        if (const std::optional<cudaGraphNodeType> inner = refused_in_conditional_body(child, path)) return inner;
        break;
      }
      default:
        return type;
    }
  }
  return std::nullopt;
}

std::vector<cudaGraph_t> recordings(const Description& description, const Plan& plan,
                                    const std::vector<cudaGraphNode_t>& natives) {
  std::vector<cudaGraph_t> out(natives.size(), nullptr);
  if (natives.size() != plan.position.size()) return out;
  std::vector<bool> holds_body(natives.size(), false);
  for (const Node& n : description.nodes) {
    if (n.parent != no_node) holds_body[plan.position[n.parent]] = true;
  }
  for (std::size_t position = 0; position < natives.size(); ++position) {
    if (holds_body[position]) continue;
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(natives[position], &type), "cudaGraphNodeGetType");
    if (type != cudaGraphNodeTypeGraph) continue;
    check(cudaGraphChildGraphNodeGetGraph(natives[position], &out[position]), "cudaGraphChildGraphNodeGetGraph");
  }
  return out;
}

}  // namespace flowdsl::lowering
