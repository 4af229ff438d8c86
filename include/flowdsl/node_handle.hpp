// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file node_handle.hpp
/// \brief Node handles: cheap, copyable references to a node of a Graph, through which edges,
/// declared accesses and (in each kind's own handle) parameters are set.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "flowdsl/node_parts.hpp"

namespace flowdsl {

class Body;
class Target;

namespace detail {

/// The state behind a Graph (src/builder/graph_state.hpp). Handles point at it, so they survive
/// moves of the Graph that owns it.
class GraphState;

/// Declares an edge between two targets of the body that holds node `beside`.
/// \throws UsageError for a handle of another graph.
void add_edge(GraphState& state, const Target& from, const Target& to, NodeId beside, EdgeKind kind = EdgeKind::full);
/// Resolves `name` among the nodes of the body that holds node `beside`.
NodeRef resolve(const GraphState& state, NodeId beside, std::string_view name);
const std::string& node_name(const GraphState& state, NodeId id);
void add_access(GraphState& state, NodeId id, Access access);
/// Body `index` of node `id`, for declaring nodes in it.
/// \throws UsageError naming the node when it has no such body.
Body body_of(GraphState& state, NodeId id, std::uint32_t index);

/// The operation of node `id`, for a change of its structure (a new topology). Defined in
/// kinds.hpp, once every kind is known.
template <class Op>
Op& structure(GraphState& state, NodeId id);
/// The operation of node `id`, for a change of its parameters (updated in place by the next
/// launch).
template <class Op>
Op& parameters(GraphState& state, NodeId id);

template <class T>
struct always_false : std::false_type {};

/// What Builder::node<Handle>(name) checks before it hands out a typed handle to a declared
/// node: `mismatch(op)` (the node's Operation) says why the node cannot have such a handle,
/// empty when it can. The kinds whose handles carry the types of their arguments specialise it
/// (KernelNode, LibraryNode).
template <class Handle>
struct TypedLookup {
  static_assert(always_false<Handle>::value,
                "flowdsl: node<Handle>(name) gives KernelNode<...> and LibraryNode<...> handles; use node(name) for others");
};

/// "" when `args` holds exactly one slot of each of `Params`' sizes; else why not.
template <class... Params>
std::string argument_mismatch(const ArgumentPack& args) {
  constexpr std::size_t sizes[] = {sizeof(Params)..., 0};
  if (args.size() != sizeof...(Params)) {
    return "it takes " + std::to_string(args.size()) + " arguments, the handle " + std::to_string(sizeof...(Params));
  }
  for (std::size_t i = 0; i < sizeof...(Params); ++i) {
    if (args.slot_size(i) != sizes[i]) {
      return "its argument " + std::to_string(i) + " has " + std::to_string(args.slot_size(i)) + " bytes, the handle's " +
             std::to_string(sizes[i]);
    }
  }
  return {};
}

/// "" when `op` (an Operation) holds an `Op` whose arguments fit `Params...`; else why not.
template <class Op, class... Params, class Operation>
std::string typed_mismatch(const Operation& op) {
  const Op* typed = std::get_if<Op>(&op);
  if (typed == nullptr) return "it is not a " + std::string(Op::kind) + " node";
  return argument_mismatch<Params...>(typed->args);
}

}  // namespace detail

/// \brief Something an edge can point at: a node handle of the same graph or a node name.
/// A name that is not declared yet is resolved when the graph is validated.
class Target {
 public:
  Target(const char* name) : name_(name) {}
  Target(std::string_view name) : name_(name) {}
  Target(const std::string& name) : name_(name) {}
  template <class Handle, class = decltype(std::declval<const Handle&>().id())>
  Target(const Handle& handle) : state_(handle.state_), id_(handle.id()) {}

  /// \brief The reference this target makes from node `beside` of `graph`.
  /// \throws UsageError for a handle of another graph.
  NodeRef ref(const detail::GraphState& graph, NodeId beside) const;

 private:
  friend void detail::add_edge(detail::GraphState&, const Target&, const Target&, NodeId, EdgeKind);
  const detail::GraphState* state_ = nullptr;
  NodeId id_ = no_node;
  std::string_view name_;
};

/// \brief Operations every node handle has. Handles are cheap to copy and stay valid while
/// the Graph (or, after a move, its new owner) lives.
template <class Derived>
class NodeHandleBase {
 public:
  NodeId id() const noexcept { return id_; }
  const std::string& name() const { return detail::node_name(*state_, id_); }

  /// \brief This node runs after every node given (handles or names of the same body).
  template <class... Ts>
  Derived& after(const Ts&... predecessors) {
    (detail::add_edge(*state_, Target(predecessors), Target(*this), id_), ...);
    return self();
  }
  /// \brief A programmatic edge from `predecessor` (EdgeKind::programmatic): both must be
  /// kernel nodes, and this kernel must wait for the predecessor's results before reading them
  /// (every built-in kernel does).
  template <class T>
  Derived& after(const T& predecessor, Programmatic) {
    detail::add_edge(*state_, Target(predecessor), Target(*this), id_, EdgeKind::programmatic);
    return self();
  }
  /// \brief Every node given (handles or names of the same body) runs after this one.
  template <class... Ts>
  Derived& before(const Ts&... successors) {
    (detail::add_edge(*state_, Target(*this), Target(successors), id_), ...);
    return self();
  }
  /// \brief Declares that this node reads [ptr, ptr + bytes) (bytes = 0: extent unknown).
  Derived& reads(const void* ptr, std::size_t bytes = 0) { return access(ptr, bytes, AccessMode::read); }
  /// \brief Declares that this node writes [ptr, ptr + bytes) (bytes = 0: extent unknown).
  Derived& writes(const void* ptr, std::size_t bytes = 0) { return access(ptr, bytes, AccessMode::write); }

  /// \brief Body `index` of this node (child graphs have one), to declare nodes in it.
  /// \throws UsageError when the node's kind has no such body.
  Body body(std::uint32_t index = 0) const;

  NodeHandleBase(detail::GraphState* state, NodeId id) : state_(state), id_(id) {}

 protected:
  Derived& self() { return static_cast<Derived&>(*this); }
  Derived& access(const void* ptr, std::size_t bytes, AccessMode mode) {
    detail::add_access(*state_, id_, Access{ptr, bytes, mode});
    return self();
  }

  detail::GraphState* state_;
  NodeId id_;

 private:
  friend class Target;
  template <class>
  friend class NodeHandleBase;
  friend class NodeHandle;
};

/// \brief Handle to any node (empty nodes, lookups by name).
class NodeHandle : public NodeHandleBase<NodeHandle> {
 public:
  NodeHandle(detail::GraphState* state, NodeId id) : NodeHandleBase(state, id) {}
  /// \brief Any typed handle converts to the plain one.
  template <class Derived>
  NodeHandle(const NodeHandleBase<Derived>& typed) : NodeHandleBase(typed.state_, typed.id_) {}
};

}  // namespace flowdsl
