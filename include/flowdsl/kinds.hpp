#pragma once
/// \file kinds.hpp
/// \brief The list of node kinds. Generic code (builder, validation, plan, hash, emitter,
/// runtime, JSON, DOT, CLI) iterates over `Operation`'s alternatives and never names a kind.
///
/// Adding a kind: its header in flowdsl/kinds/, its folder in src/kinds/ (one file per layer
/// that has something to say about it), its include and its line in FLOWDSL_NODE_KINDS here,
/// its tests and its section in the docs. docs/architecture.md ("Adding a node kind") walks
/// through one. Each layer declares the facets it needs of every kind from this list, so a
/// kind that lacks one fails the build (at link time, naming the facet and the kind).

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
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
template <class Op, class = void>
struct has_variable_bodies : std::false_type {};
template <class Op>
struct has_variable_bodies<Op, std::void_t<decltype(std::declval<const Op&>().bodies())>> : std::true_type {};
template <class Op, class = void>
struct conditional_body_rule : std::true_type {};
template <class Op>
struct conditional_body_rule<Op, std::void_t<decltype(Op::allowed_in_conditional_body)>>
    : std::bool_constant<Op::allowed_in_conditional_body> {};
template <class Op, class = void>
struct graph_memory_rule : std::false_type {};
template <class Op>
struct graph_memory_rule<Op, std::void_t<decltype(Op::graph_memory)>> : std::bool_constant<Op::graph_memory> {};
template <class Op, class = void>
struct visits_symbols : std::false_type {};
template <class Op>
struct visits_symbols<Op, std::void_t<decltype(std::declval<const Op&>().for_each_symbol(
                              std::declval<void (*)(std::uint64_t)>()))>> : std::true_type {};
}  // namespace detail

/// \brief How many bodies a node of this operation holds: a kind's `body_count`, or for kinds
/// whose count is set per node (IF with ELSE, SWITCH), its `bodies()`.
template <class Op>
std::uint32_t bodies_of(const Op& op) noexcept {
  if constexpr (detail::has_variable_bodies<Op>::value) {
    return op.bodies();
  } else {
    return Op::body_count;
  }
}

/// \brief How many bodies a node of this operation's kind holds (child graphs: one).
inline std::uint32_t body_count(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return bodies_of(o); }, op);
}

/// \brief Whether nodes of kind `Op` may sit in a conditional node's body (CUDA allows kernel,
/// memcpy, memset, empty, child and conditional nodes there). A kind says no with
/// `static constexpr bool allowed_in_conditional_body = false;`.
template <class Op>
inline constexpr bool allowed_in_conditional_body = detail::conditional_body_rule<Op>::value;

/// \brief Whether nodes of kind `Op` allocate or free graph memory (alloc, free): a graph holding
/// one gets executables of its own, since CUDA gives its memory addresses per executable. A kind
/// says so with `static constexpr bool graph_memory = true;`.
template <class Op>
inline constexpr bool is_graph_memory = detail::graph_memory_rule<Op>::value;

/// \brief Whether an operation allocates or frees graph memory.
inline bool is_graph_memory_op(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return is_graph_memory<std::decay_t<decltype(o)>>; }, op);
}

/// \brief Calls `visit(value)` for every symbol (see `symbol`) the fields of `op` hold: kernel
/// pointer and Condition arguments, copy and fill pointers, a free's memory. Kinds whose fields
/// may hold symbols say so with a member `for_each_symbol(visit)`; the others hold none.
template <class Visit>
void for_each_symbol(const Operation& op, Visit&& visit) {
  std::visit(
      [&](const auto& o) {
        if constexpr (detail::visits_symbols<std::decay_t<decltype(o)>>::value) o.for_each_symbol(visit);
      },
      op);
}

/// \brief Whether nodes of kind `Op` are conditional: a kernel sets their condition on the device
/// (IF, WHILE, SWITCH: their operations derive from ConditionalFields).
template <class Op>
inline constexpr bool conditional_kind = std::is_base_of_v<ConditionalFields, Op>;

/// \brief The fields a conditional node has (its default value); null for other nodes. With
/// is_conditional, the one answer to "is this node conditional?".
inline const ConditionalFields* conditional_fields(const Operation& op) noexcept {
  return std::visit(
      [](const auto& o) -> const ConditionalFields* {
        if constexpr (conditional_kind<std::decay_t<decltype(o)>>) {
          return &o;
        } else {
          return nullptr;
        }
      },
      op);
}

/// \brief Whether an operation is a conditional node (IF, WHILE, SWITCH).
inline bool is_conditional(const Operation& op) noexcept { return conditional_fields(op) != nullptr; }

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
