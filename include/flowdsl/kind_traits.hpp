// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kind_traits.hpp
/// \brief What generic code may ask of a node kind. A kind states a trait in its own header, as a
/// member of its operation (`static constexpr bool repeats_body = true;`, `allocation()`) or a base
/// (ConditionalFields, LaunchFields); kinds that state nothing get the default. Generic code asks
/// the questions below and never names a kind.
///
/// | trait | kind states it with | default |
/// | --- | --- | --- |
/// | bodies | `body_count`, or `bodies()` when it varies per node | (required) |
/// | may sit in a conditional body | `allowed_in_conditional_body = false` | yes |
/// | its executables belong to one Graph | `graph_memory = true` | no |
/// | allocates graph memory | `allocation()`: its bytes | no |
/// | frees graph memory | `freed()`: the alloc's symbolic address | no |
/// | is conditional | base ConditionalFields | no |
/// | launches a kernel of its own | base LaunchFields | no |
/// | its body is a CUDA child graph | `child_graph = true` | no |
/// | repeats its body | `repeats_body = true` | no |
/// | may be in a graph made for device launch | `device_launchable = true` | no |
/// | holds symbols | `for_each_symbol(visit)` (and `remap_symbols(f)`) | none |
/// | calls a registered function on its arguments | `registered_call()`: a RegisteredCall | none |
/// | may read or write any memory (its reach is unknown) | `reaches_any_memory = true` | no |

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "flowdsl/kinds.hpp"

namespace flowdsl {

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
template <class Op, class = void>
struct allocates_memory : std::false_type {};
template <class Op>
struct allocates_memory<Op, std::void_t<decltype(std::declval<const Op&>().allocation())>> : std::true_type {};
template <class Op, class = void>
struct frees_memory : std::false_type {};
template <class Op>
struct frees_memory<Op, std::void_t<decltype(std::declval<const Op&>().freed())>> : std::true_type {};
template <class Op, class = void>
struct child_graph_rule : std::false_type {};
template <class Op>
struct child_graph_rule<Op, std::void_t<decltype(Op::child_graph)>> : std::bool_constant<Op::child_graph> {};
template <class Op, class = void>
struct device_launch_rule : std::false_type {};
template <class Op>
struct device_launch_rule<Op, std::void_t<decltype(Op::device_launchable)>> : std::bool_constant<Op::device_launchable> {};
template <class Op, class = void>
struct repeats_body_rule : std::false_type {};
template <class Op>
struct repeats_body_rule<Op, std::void_t<decltype(Op::repeats_body)>> : std::bool_constant<Op::repeats_body> {};
template <class Op, class = void>
struct has_registered_call : std::false_type {};
template <class Op>
struct has_registered_call<Op, std::void_t<decltype(std::declval<const Op&>().registered_call())>> : std::true_type {};
template <class Op, class = void>
struct reaches_any_memory_rule : std::false_type {};
template <class Op>
struct reaches_any_memory_rule<Op, std::void_t<decltype(Op::reaches_any_memory)>>
    : std::bool_constant<Op::reaches_any_memory> {};
}  // namespace detail

/// \brief Whether nodes of kind `Op` allocate graph memory (the alloc kind).
template <class Op>
inline constexpr bool allocates_graph_memory = detail::allocates_memory<Op>::value;

/// \brief The bytes an operation allocates as graph memory; nothing when it allocates none.
inline std::optional<std::size_t> allocated_bytes(const Operation& op) noexcept {
  return std::visit(
      [](const auto& o) -> std::optional<std::size_t> {
        if constexpr (allocates_graph_memory<std::decay_t<decltype(o)>>) {
          return o.allocation();
        } else {
          return std::nullopt;
        }
      },
      op);
}

/// \brief The memory an operation frees (the symbolic address its alloc gave); nothing when it
/// frees none.
inline std::optional<std::uint64_t> freed_memory(const Operation& op) noexcept {
  return std::visit(
      [](const auto& o) -> std::optional<std::uint64_t> {
        if constexpr (detail::frees_memory<std::decay_t<decltype(o)>>::value) {
          return o.freed();
        } else {
          return std::nullopt;
        }
      },
      op);
}

/// \brief The launch of an operation that launches a kernel of its own (its kind derives from
/// LaunchFields); null for other nodes.
inline const LaunchFields* launch_fields(const Operation& op) noexcept {
  return std::visit(
      [](const auto& o) -> const LaunchFields* {
        if constexpr (std::is_base_of_v<LaunchFields, std::decay_t<decltype(o)>>) {
          return &o;
        } else {
          return nullptr;
        }
      },
      op);
}
inline LaunchFields* launch_fields(Operation& op) noexcept {
  return const_cast<LaunchFields*>(launch_fields(static_cast<const Operation&>(op)));
}

/// \brief The registered function an operation calls on its arguments (kinds with a member
/// `registered_call()`); nothing for other nodes.
inline std::optional<RegisteredCall> registered_call(const Operation& op) {
  return std::visit(
      [](const auto& o) -> std::optional<RegisteredCall> {
        if constexpr (detail::has_registered_call<std::decay_t<decltype(o)>>::value) {
          return o.registered_call();
        } else {
          return std::nullopt;
        }
      },
      op);
}

/// \brief Whether an operation may read or write any memory, so that nothing can be known of its
/// reach (host nodes: a host function): a kind says so with `static constexpr bool
/// reaches_any_memory = true;`.
inline bool reaches_any_memory(const Operation& op) noexcept {
  return std::visit(
      [](const auto& o) {
        return detail::reaches_any_memory_rule<std::decay_t<decltype(o)>>::value;
      },
      op);
}

/// \brief Whether an operation's body becomes a CUDA child graph (which cannot hold a
/// conditional node).
inline bool is_child_graph(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return detail::child_graph_rule<std::decay_t<decltype(o)>>::value; }, op);
}

/// \brief Whether an operation runs its body again for as long as its condition holds (WHILE):
/// a kernel inside the body must set the condition, or the loop never ends.
inline bool repeats_body(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return detail::repeats_body_rule<std::decay_t<decltype(o)>>::value; }, op);
}

/// \brief Whether CUDA allows an operation in a graph instantiated for device launch
/// (cudaGraphInstantiateFlagDeviceLaunch: kernel, memcpy, memset and empty nodes). Such an
/// executable can be launched from the host too, where its launch costs less for large graphs.
inline bool is_device_launchable(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return detail::device_launch_rule<std::decay_t<decltype(o)>>::value; }, op);
}

}  // namespace flowdsl
