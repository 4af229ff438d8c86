// SPDX-License-Identifier: Apache-2.0
// The profiler's picture of a graph, taken once per topology (and a kernel's arguments again
// when they change), so that outputs need neither the Graph nor CUDA.
#include "profile_graph.hpp"

#include <cstdio>
#include <cstring>

#include "flowdsl/fusion.hpp"
#include "lower/structure.hpp"
#include "value_text.hpp"

namespace flowdsl::profiling {
namespace {

// A pointer or condition argument: what it stands for where the description knows.
std::string pointer_text(const Description& d, std::uint64_t value) {
  if (symbol::is_symbol(value)) {
    const std::uint32_t index = symbol::index_of(value);
    if (index < d.symbols.size() && d.symbols[index] < d.nodes.size()) {
      const NodeId owner = d.symbols[index];
      const std::string name = quoted_name(node_path(d, owner));
      if (is_conditional(d.nodes[owner].op)) return "condition of " + name;
      const std::uint64_t offset = symbol::offset_of(value);
      return offset == 0 ? name : name + " + " + std::to_string(offset);
    }
    return detail::hex(value);
  }
  for (const NamedBuffer& b : d.buffers) {
    const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b.ptr));
    if (value >= begin && value - begin < b.bytes) {
      return value == begin ? b.name : b.name + "+" + std::to_string(value - begin);
    }
  }
  return detail::hex(value);
}

std::string value_text(const LaunchFields& op, std::size_t i, const KernelInfo* info) {
  if (info == nullptr || info->params[i].type.pointer) return detail::hex_bytes(op.args.data(i), op.args.slot_size(i));
  const std::string_view name = info->params[i].enumerator_at(op.args.data(i));  // an enumerated value by name
  if (!name.empty()) return std::string(name);
  return detail::scalar_text(info->params[i].type.scalar, op.args.data(i));
}

}  // namespace

NamedValues kernel_arguments(const Description& d, NodeId id, const KernelRegistry& registry) {
  const LaunchFields* op = launch_fields(d.nodes[id].op);
  if (op == nullptr) return {};
  const KernelInfo* info = op->entry(registry);
  NamedValues out;
  for (std::size_t i = 0; i < op->args.size(); ++i) {
    std::string name = info ? info->params[i].name : "#" + std::to_string(i);
    if (!op->args.bound(i)) {
      out.emplace_back(std::move(name), "(unset)");
    } else if (op->args.kind(i) != SlotKind::value) {
      out.emplace_back(std::move(name), pointer_text(d, op->args.word(i)));
    } else {
      out.emplace_back(std::move(name), value_text(*op, i, info));
    }
  }
  return out;
}

std::vector<ProfiledNode> profiled_nodes(const Description& d, const Plan& plan, const KernelRegistry& registry) {
  const lowering::StructureSummary summary = lowering::summarize_structure(d, plan);
  std::vector<ProfiledNode> nodes(plan.position.size());
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const std::uint32_t position = plan.position[id];
    ProfiledNode& node = nodes[position];
    const lowering::NodeStructure& s = summary[position];
    node.path = s.path;
    node.kind = std::string(s.kind);
    for (const lowering::StructureField& field : s.fields)
      node.structure.emplace_back(std::string(field.name), field.value);
    node.arguments = kernel_arguments(d, id, registry);
    node.parent = d.nodes[id].parent == no_node ? no_position : plan.position[d.nodes[id].parent];
    node.body = d.nodes[id].body;
    node.id = id;
  }
  // Dependencies: a step's deps index the steps of its own body.
  const auto add_after = [&](const std::vector<PlanStep>& steps) {
    for (const PlanStep& step : steps) {
      ProfiledNode& node = nodes[plan.position[step.node]];
      for (std::uint32_t dep : step.deps) node.after.push_back(plan.position[steps[dep].node]);
    }
  };
  add_after(plan.steps);
  for (const std::vector<PlanStep>& body : plan.bodies) add_after(body);
  // A fused group runs as one kernel, whose time lands on its last member: that row names them
  // all, the others say where their work went.
  if (plan.fusion) {
    for (const FusedGroup& group : plan.fusion->groups) {
      std::string members;
      for (NodeId member : group.members) members += (members.empty() ? "" : " > ") + d.nodes[member].name;
      const NodeId last = group.members.back();
      for (NodeId member : group.members) {
        nodes[plan.position[member]].kind =
            member == last ? "fused: " + members : "fused into " + quoted_name(d.nodes[last].name);
      }
    }
  }
  return nodes;
}

}  // namespace flowdsl::profiling
