// Emission: device checks, then native nodes in plan order with canonical dependencies.
#include "emit.hpp"

namespace flowdsl::lowering {
namespace {

class Emitter {
 public:
  Emitter(const Description& d, const Plan& plan, Emitted& out) : d_(d), plan_(plan), out_(out) {}

  void steps(const std::vector<PlanStep>& steps, cudaGraph_t graph) {
    std::vector<cudaGraphNode_t> natives;  // by step index within this body
    natives.reserve(steps.size());
    std::vector<cudaGraphNode_t> deps;
    for (const PlanStep& step : steps) {
      deps.clear();
      for (std::uint32_t dep : step.deps) deps.push_back(natives[dep]);
      const Node& node = d_.nodes[step.node];
      const std::string nested = node.parent == no_node ? std::string() : node_path(d_, step.node);
      NativeNode native{graph, deps, node.parent == no_node ? node.name : nested, [&](std::uint32_t index) {
                          cudaGraph_t body = nullptr;
                          check(cudaGraphCreate(&body, 0), "cudaGraphCreate", native_path(step).c_str());
                          NativeGraph owned(body);
                          this->steps(plan_.bodies[step.bodies[index]], body);
                          return owned;
                        }};
      natives.push_back(std::visit([&](const auto& op) { return add_native(op, native); }, node.op));
      out_.nodes[plan_.position[step.node]] = natives.back();
    }
  }

 private:
  std::string native_path(const PlanStep& step) const { return node_path(d_, step.node); }

  const Description& d_;
  const Plan& plan_;
  Emitted& out_;
};

}  // namespace

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
  BufferIndex buffers(d);
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    NodeCheck check(d, id, diag, buffers);
    std::visit([&](const auto& op) { check_device(op, check, device); }, d.nodes[id].op);
  }
  if (!problems.empty()) throw ValidationError(std::move(problems));

  Emitted out;
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  out.graph.reset(graph);
  out.nodes.resize(plan.position.size());
  Emitter(d, plan, out).steps(plan.steps, graph);
  return out;
}

UpdateStatus update(const Description& d, NodeId id, cudaGraphExec_t exec, cudaGraphNode_t native) {
  return std::visit([&](const auto& op) { return update_native(op, exec, native); }, d.nodes[id].op);
}

}  // namespace flowdsl::lowering
