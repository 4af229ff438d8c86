// SPDX-License-Identifier: Apache-2.0
// Emission: device checks, then native nodes in plan order with canonical dependencies.
#include "emit.hpp"

#include <algorithm>
#include <iterator>

#include "driver_calls.hpp"
#include "fusion.hpp"

namespace flowdsl::lowering {
namespace {

class Emitter {
 public:
  Emitter(const Description& d, const Plan& plan, const DeviceContext& device, Emitted& out)
      : d_(d), plan_(plan), device_(device), out_(out), context_(current_context()), symbols_(d, plan, out.values) {
    out.context = context_;
  }

  void steps(const std::vector<PlanStep>& steps, cudaGraph_t graph) {
    // Native values made before the body's nodes: kernels may take them (a conditional's
    // handle, set by a kernel ahead of the node).
    for (const PlanStep& step : steps) {
      out_.values[plan_.position[step.node]] = std::visit(
          [&](const auto& o) { return lowering_of(o).prepare_native(o, graph, d_, step.node); }, d_.nodes[step.node].op);
    }
    std::vector<cudaGraphNode_t> natives;  // by step index within this body
    natives.reserve(steps.size());
    std::vector<cudaGraphNode_t> deps;
    const FusionPlan* fusion = plan_.fusion.get();
    for (std::size_t index_in_body = 0; index_in_body < steps.size(); ++index_in_body) {
      const PlanStep& step = steps[index_in_body];
      if (const FusedGroup* group = fusion != nullptr ? fusion->group(step.node) : nullptr) {
        // A group's steps are consecutive: its kernel is added at its last member, standing for
        // all of them.
        natives.push_back(step.node == group->members.back() ? add_fused(steps, index_in_body, *group, graph, natives) : nullptr);
        continue;
      }
      deps.clear();
      for (std::uint32_t dep : step.deps) {  // full edges; programmatic ones follow the node
        if (step.programmatic.empty() || !std::binary_search(step.programmatic.begin(), step.programmatic.end(), dep)) {
          deps.push_back(natives[dep]);
        }
      }
      const Node& node = d_.nodes[step.node];
      const std::string nested = node.parent == no_node ? std::string() : node_path(d_, step.node);
      auto make_body = [&](std::uint32_t index) {
        cudaGraph_t body = nullptr;
        check(cudaGraphCreate(&body, 0), "cudaGraphCreate", native_path(step).c_str());
        NativeGraph owned(body);
        this->steps(plan_.bodies[step.bodies[index]], body);
        return owned;
      };
      auto fill_body = [&](std::uint32_t index, cudaGraph_t body) { this->steps(plan_.bodies[step.bodies[index]], body); };
      NativeNode native{graph, deps, node.parent == no_node ? node.name : nested, make_body, fill_body,
                        symbols_, out_.values[plan_.position[step.node]], &device_, context_};
      for (NodeId at = node.parent; at != no_node && !native.in_conditional_body; at = d_.nodes[at].parent) {
        native.in_conditional_body = is_conditional(d_.nodes[at].op);
      }
      natives.push_back(std::visit([&](const auto& op) { return lowering_of(op).add_native(op, native); }, node.op));
      out_.nodes[plan_.position[step.node]] = natives.back();
      out_.functions[plan_.position[step.node]] = native.function;
      for (std::uint32_t dep : step.programmatic) {
        // The consumer may launch once every block of the producer has started or signalled
        // (cudaTriggerProgrammaticLaunchCompletion); it waits for the results itself.
        cudaGraphEdgeData edge{};
        edge.type = cudaGraphDependencyTypeProgrammatic;
        edge.from_port = cudaGraphKernelNodePortProgrammatic;
        check(cudaGraphAddDependencies(graph, &natives[dep], &natives.back(), &edge, 1), "cudaGraphAddDependencies",
              native.path.c_str());
      }
    }
  }

 private:
  std::string native_path(const PlanStep& step) const { return node_path(d_, step.node); }

  // The kernel of `group`, whose last member is steps[last], after the dependencies of its
  // members outside it (programmatic where every member depending on a node does so
  // programmatically); natives of the group's earlier steps become it too.
  cudaGraphNode_t add_fused(const std::vector<PlanStep>& steps, std::size_t last, const FusedGroup& group,
                            cudaGraph_t graph, std::vector<cudaGraphNode_t>& natives) {
    const std::size_t first = last + 1 - group.members.size();
    std::vector<std::uint32_t> full, programmatic;
    for (std::size_t i = first; i <= last; ++i) {
      for (std::uint32_t dep : steps[i].deps) {
        if (dep >= first) continue;  // within the group
        const bool is_programmatic = std::binary_search(steps[i].programmatic.begin(), steps[i].programmatic.end(), dep);
        (is_programmatic ? programmatic : full).push_back(dep);
      }
    }
    std::sort(full.begin(), full.end());
    full.erase(std::unique(full.begin(), full.end()), full.end());
    std::sort(programmatic.begin(), programmatic.end());
    programmatic.erase(std::unique(programmatic.begin(), programmatic.end()), programmatic.end());
    std::vector<std::uint32_t> only_programmatic;
    std::set_difference(programmatic.begin(), programmatic.end(), full.begin(), full.end(),
                        std::back_inserter(only_programmatic));
    std::vector<cudaGraphNode_t> deps;
    for (std::uint32_t dep : full) deps.push_back(natives[dep]);

    const std::string path = node_path(d_, group.members.front()) + " (fused with " +
                             std::to_string(group.members.size() - 1) + " more)";
    const void* kernel = fused_kernel(group.source, device_.limits.device, path);
    const Operation fused = fused_operation(d_, group, kernel);
    std::uint64_t value = reinterpret_cast<std::uintptr_t>(kernel);
    NativeNode native{graph, deps, path, nullptr, nullptr, symbols_, value, &device_, context_};
    const cudaGraphNode_t node =
        std::visit([&](const auto& op) { return lowering_of(op).add_native(op, native); }, fused);
    for (std::size_t i = first; i <= last; ++i) {
      const std::uint32_t position = plan_.position[steps[i].node];
      out_.nodes[position] = node;
      out_.functions[position] = native.function;
      out_.values[position] = value;  // updates of any member find the kernel here
      if (i < last) natives[i] = node;
    }
    for (std::uint32_t dep : only_programmatic) {
      cudaGraphEdgeData edge{};
      edge.type = cudaGraphDependencyTypeProgrammatic;
      edge.from_port = cudaGraphKernelNodePortProgrammatic;
      check(cudaGraphAddDependencies(graph, &natives[dep], &node, &edge, 1), "cudaGraphAddDependencies", path.c_str());
    }
    return node;
  }

  const Description& d_;
  const Plan& plan_;
  const DeviceContext& device_;
  Emitted& out_;
  const CUcontext context_;  // current on this thread while it emits
  Symbols symbols_;
};

}  // namespace

std::uint64_t Symbols::resolve(std::uint64_t value) const {
  if (!symbol::is_symbol(value)) return value;
  const std::uint32_t index = symbol::index_of(value);
  const NodeId owner = index < d_.symbols.size() ? d_.symbols[index] : no_node;
  const std::uint64_t native = owner < plan_.position.size() ? values_[plan_.position[owner]] : 0;
  if (native == 0) {  // validation rules these out
    throw UsageError("flowdsl: a symbol (#" + std::to_string(index) + ") has no native value" +
                     (owner == no_node ? std::string() : " yet: node " + quoted_name(node_path(d_, owner))));
  }
  return native + symbol::offset_of(value);
}

ArgumentPack Symbols::resolve(const ArgumentPack& args) const {
  ArgumentPack out = args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args.kind(i) == SlotKind::value || !symbol::is_symbol(args.word(i))) continue;
    const std::uint64_t value = resolve(args.word(i));
    out.set(i, &value, sizeof value);
  }
  return out;
}

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
  KernelInfos kernels;
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    NodeCheck check(d, id, diag, buffers, kernels);
    std::visit([&](const auto& op) { lowering_of(op).check_device(op, check, device); }, d.nodes[id].op);
  }
  if (!problems.empty()) throw ValidationError(std::move(problems));

  Emitted out;
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  out.graph.reset(graph);
  out.nodes.resize(plan.position.size());
  out.functions.assign(plan.position.size(), nullptr);
  out.values.assign(plan.position.size(), 0);
  Emitter(d, plan, device, out).steps(plan.steps, graph);
  return out;
}

UpdateStatus update(const Description& d, const Plan& plan, NodeId id, cudaGraphExec_t exec, cudaGraphNode_t native,
                    cudaFunction_t function, const std::vector<std::uint64_t>& values) {
  const Symbols symbols(d, plan, values);
  const NativeUpdate node{exec, native, symbols, function, &d, id};
  if (const FusedGroup* group = plan.fusion ? plan.fusion->group(id) : nullptr) {
    // A member: its group's kernel takes every member's arguments, the changed one among them.
    const Operation fused = fused_operation(d, *group, reinterpret_cast<const void*>(values[plan.position[id]]));
    return std::visit([&](const auto& op) { return lowering_of(op).update_native(op, node); }, fused);
  }
  return std::visit([&](const auto& op) { return lowering_of(op).update_native(op, node); }, d.nodes[id].op);
}

cudaGraphNode_t add_child_graph(NativeNode& node, NativeGraph body) {
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeGraph;
  params.graph.graph = body.get();
  params.graph.ownership = cudaGraphChildGraphOwnershipMove;
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddNode(&native, node.graph, node.deps.data(), nullptr, node.deps.size(), &params), "cudaGraphAddNode",
        node.path.c_str());
  (void)body.release();  // the parent graph owns it now
  return native;
}

}  // namespace flowdsl::lowering
