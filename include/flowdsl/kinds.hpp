// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds.hpp
/// \brief The list of node kinds. Generic code (builder, validation, plan, hash, emitter,
/// runtime, JSON, DOT, CLI) iterates over `Operation`'s alternatives and never names a kind: it
/// asks what a kind does through the traits of kind_traits.hpp.
///
/// Adding a kind: its header in flowdsl/kinds/, its folder in src/kinds/ (one file per layer
/// that has something to say about it), its include and its line in FLOWDSL_NODE_KINDS here,
/// its tests and its section in the docs. docs/architecture.md ("Adding a node kind") walks
/// through one. Each layer declares the facets it needs of every kind from this list, so a
/// kind that lacks one fails the build (at link time, naming the facet and the kind).

#include <string_view>
#include <type_traits>
#include <variant>

#include "flowdsl/kinds/child.hpp"
#include "flowdsl/kinds/conditional.hpp"
#include "flowdsl/kinds/empty.hpp"
#include "flowdsl/kinds/event.hpp"
#include "flowdsl/kinds/host.hpp"
#include "flowdsl/kinds/kernel.hpp"
#include "flowdsl/kinds/library.hpp"
#include "flowdsl/kinds/memcpy.hpp"
#include "flowdsl/kinds/memory.hpp"
#include "flowdsl/kinds/memset.hpp"

namespace flowdsl {

/// \brief The node kinds, by operation type: one line each. `X(Op)` is expanded once per kind
/// where a declaration per kind is needed (each layer's facets).
#define FLOWDSL_NODE_KINDS(X) \
  X(KernelOp)                 \
  X(MemcpyOp)                 \
  X(MemsetOp)                 \
  X(EmptyOp)                  \
  X(HostOp)                   \
  X(ChildOp)                  \
  X(IfOp)                     \
  X(WhileOp)                  \
  X(SwitchOp)                 \
  X(AllocOp)                  \
  X(FreeOp)                   \
  X(EventRecordOp)            \
  X(EventWaitOp)              \
  X(LibraryOp)

namespace detail {
template <class Ignored, class... Ops>
struct variant_of_kinds {
  using type = std::variant<Ops...>;
};
#define FLOWDSL_KIND_ALTERNATIVE(Op) , Op
}  // namespace detail

/// \brief The operation of a node: one alternative per node kind, in the order of the list.
using Operation = detail::variant_of_kinds<void FLOWDSL_NODE_KINDS(FLOWDSL_KIND_ALTERNATIVE)>::type;
#undef FLOWDSL_KIND_ALTERNATIVE

/// \brief The kind's name ("kernel", "memcpy", ...) of an operation.
inline std::string_view kind_name(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return std::decay_t<decltype(o)>::kind; }, op);
}

namespace detail {

Operation& structure_of(GraphState& state, NodeId id);
Operation& parameters_of(GraphState& state, NodeId id);
/// The operation of node `id`, to read (nothing is marked changed).
const Operation& operation_of(const GraphState& state, NodeId id);

template <class Op>
Op& structure(GraphState& state, NodeId id) {
  return std::get<Op>(structure_of(state, id));
}
template <class Op>
Op& parameters(GraphState& state, NodeId id) {
  return std::get<Op>(parameters_of(state, id));
}

/// The factories of every kind, as bases of a builder (Graph, Body).
template <class Builder, class Variant>
struct Factories;
template <class Builder, class... Ops>
struct Factories<Builder, std::variant<Ops...>> : Ops::template Factory<Builder>... {};

}  // namespace detail

}  // namespace flowdsl
