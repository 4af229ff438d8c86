// SPDX-License-Identifier: Apache-2.0
// Conditional nodes (IF, WHILE, SWITCH), lowering side. The handle is made before the nodes of
// the body holding the node (kernels ahead of an IF take it), then the node is added through
// cudaGraphAddNode and CUDA hands back the graphs of its bodies, which are filled in place.
// Nothing of a conditional node can be updated: CUDA's cudaGraphExecUpdate cannot change it,
// so all of it is structure; the nodes in its bodies update like any other.
#include <string>

#include "lowering_facets.hpp"

namespace flowdsl::lowering {
namespace {

void hash_fields(const ConditionalFields& op, StructureWords& h) {
  h.add(op.default_value.has_value());
  h.add(op.default_value.value_or(0));
}

void describe_fields(const ConditionalFields& op, std::vector<StructureField>& out) {
  out.push_back({"default", op.default_value ? std::to_string(*op.default_value) : std::string("none")});
}

std::uint64_t make_handle(const ConditionalFields& op, cudaGraph_t graph, const Description& d, NodeId id) {
  cudaGraphConditionalHandle handle = 0;
  const cudaError_t status = cudaGraphConditionalHandleCreate(&handle, graph, op.default_value.value_or(0),
                                                              op.default_value ? cudaGraphCondAssignDefault : 0);
  if (status != cudaSuccess) check(status, "cudaGraphConditionalHandleCreate", node_path(d, id).c_str());
  return handle;
}

cudaGraphNode_t add_conditional(NativeNode& node, cudaGraphConditionalNodeType type, std::uint32_t size) {
  cudaGraphNodeParams params{};  // every unused byte zero, as CUDA requires
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = node.value;
  params.conditional.type = type;
  params.conditional.size = size;
  cudaGraphNode_t native = nullptr;
  check(cudaGraphAddNode(&native, node.graph, node.deps.data(), nullptr, node.deps.size(), &params), "cudaGraphAddNode",
        node.path.c_str());
  // CUDA made the bodies' graphs (owned by the node); emit into each in place.
  for (std::uint32_t b = 0; b < size; ++b) node.fill_body(b, params.conditional.phGraph_out[b]);
  return native;
}

[[noreturn]] void no_eager(const EagerNode& node) {
  throw UsageError("flowdsl: node " + quoted_name(node.path) +
                   " is a conditional node: its condition is set on the device while a graph runs, so it cannot "
                   "run node by node (launch_eagerly, debug mode); launch the graph through a Runtime");
}

}  // namespace

void check_structure(const SwitchOp& op, NodeCheck& diag) {
  if (op.cases == 0) diag.report("a switch needs at least one case");
}

void hash_structure(const IfOp& op, StructureWords& h) {
  hash_fields(op, h);
  h.add(op.has_else);
}
void hash_structure(const WhileOp& op, StructureWords& h) { hash_fields(op, h); }
void hash_structure(const SwitchOp& op, StructureWords& h) {
  hash_fields(op, h);
  h.add(op.cases);
}

void describe_structure(const IfOp& op, std::vector<StructureField>& out) {
  describe_fields(op, out);
  out.push_back({"else", op.has_else ? "yes" : "no"});
}
void describe_structure(const WhileOp& op, std::vector<StructureField>& out) { describe_fields(op, out); }
void describe_structure(const SwitchOp& op, std::vector<StructureField>& out) {
  describe_fields(op, out);
  out.push_back({"cases", std::to_string(op.cases)});
}

std::uint64_t prepare_native(const IfOp& op, cudaGraph_t graph, const Description& d, NodeId id) {
  return make_handle(op, graph, d, id);
}
std::uint64_t prepare_native(const WhileOp& op, cudaGraph_t graph, const Description& d, NodeId id) {
  return make_handle(op, graph, d, id);
}
std::uint64_t prepare_native(const SwitchOp& op, cudaGraph_t graph, const Description& d, NodeId id) {
  return make_handle(op, graph, d, id);
}

cudaGraphNode_t add_native(const IfOp& op, NativeNode& node) {
  return add_conditional(node, cudaGraphCondTypeIf, op.bodies());
}
cudaGraphNode_t add_native(const WhileOp&, NativeNode& node) { return add_conditional(node, cudaGraphCondTypeWhile, 1); }
cudaGraphNode_t add_native(const SwitchOp& op, NativeNode& node) {
  return add_conditional(node, cudaGraphCondTypeSwitch, op.cases);
}

void launch_eager(const IfOp&, EagerNode& node) { no_eager(node); }
void launch_eager(const WhileOp&, EagerNode& node) { no_eager(node); }
void launch_eager(const SwitchOp&, EagerNode& node) { no_eager(node); }

// The rest is the defaults: all of a conditional node is structure, with no parameters and no
// accesses of its own (its bodies' nodes have theirs).
FLOWDSL_LOWERING(IfOp)
FLOWDSL_LOWERING(WhileOp)
FLOWDSL_LOWERING(SwitchOp)

}  // namespace flowdsl::lowering
