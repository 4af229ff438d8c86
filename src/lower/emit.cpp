// Emission: device checks, then native nodes in plan order with canonical dependencies.
#include "emit.hpp"

namespace flowdsl::lowering {

DeviceLimits query_device_limits(int device) {
  DeviceLimits limits;
  limits.device = device;
  int value = 0;
  check(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  limits.shared_optin = static_cast<std::size_t>(value);
  const cudaDeviceAttr grid_attrs[3] = {cudaDevAttrMaxGridDimX, cudaDevAttrMaxGridDimY, cudaDevAttrMaxGridDimZ};
  for (int axis = 0; axis < 3; ++axis) {
    check(cudaDeviceGetAttribute(&value, grid_attrs[axis], device), "cudaDeviceGetAttribute");
    limits.max_grid[axis] = static_cast<unsigned>(value);
  }
  return limits;
}

Emitted emit(const Description& d, const Plan& plan, DeviceContext& device) {
  std::vector<Diagnostic> problems;
  Diagnostics diag(problems);
  for (const Node& node : d.nodes) {
    std::visit([&](const auto& op) { check_device(op, node, device, diag); }, node.op);
  }
  if (!problems.empty()) throw ValidationError(std::move(problems));

  Emitted out;
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  out.graph.reset(graph);
  out.nodes.reserve(plan.steps.size());
  std::vector<cudaGraphNode_t> deps;
  for (const PlanStep& step : plan.steps) {
    deps.clear();
    for (std::uint32_t pos : step.deps) deps.push_back(out.nodes[pos]);
    const Node& node = d.nodes[step.node];
    out.nodes.push_back(std::visit([&](const auto& op) { return add_native(op, node, graph, deps); }, node.op));
  }
  return out;
}

UpdateStatus update(const Description& d, NodeId id, cudaGraphExec_t exec, cudaGraphNode_t native) {
  return std::visit([&](const auto& op) { return update_native(op, exec, native); }, d.nodes[id].op);
}

}  // namespace flowdsl::lowering
