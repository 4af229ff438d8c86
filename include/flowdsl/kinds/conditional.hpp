// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/conditional.hpp
/// \brief Conditional nodes: IF (with an optional ELSE), WHILE and SWITCH, decided on the device
/// (CUDA's conditional nodes, CUDA 12.8 and later).
///
/// A conditional node's value is set by a kernel of the graph through a flowdsl::Condition
/// argument (see condition.hpp), which the node hands out with `condition()`:
/// \code
///   flowdsl::Graph g;
///   auto loop = g.while_loop("solve", flowdsl::ConditionDefault{1});  // 1 at every launch: runs once at least
///   auto step = loop.body().kernel("step", heat_step).launch(grid, block).args(d_a, d_b, n);
///   loop.body().kernel("decide", keep_going).launch(1, 32).args(d_residual, tol, loop.condition()).after(step);
///
///   auto big = g.switch_cases("bucket", 4).after(count);        // body(i) runs when the value is i
///   auto fix = g.if_then("renormalise").after(stats);           // body(0) runs when the value is non-zero
///   auto two = g.if_else("choose");                             // body(0) if non-zero, body(1) otherwise
/// \endcode
///
/// CUDA's rules, checked by validation before any CUDA call: bodies hold kernel, memcpy, memset,
/// empty, child and conditional nodes only; a conditional node cannot sit inside a child graph;
/// the kernels setting a node's condition sit in the body that holds the node or below it (a
/// WHILE node's, in its own body).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flowdsl/condition.hpp"
#include "flowdsl/node_handle.hpp"

namespace flowdsl {

/// \brief What the three conditional kinds share. Structure, all of it: CUDA cannot update a
/// conditional node in place.
struct ConditionalFields {
  /// The value assigned at the start of every launch, if any (ConditionDefault).
  std::optional<unsigned> default_value;
};

/// \brief IF: body 0 runs when the value is non-zero; with an ELSE, body 1 runs when it is 0.
struct IfOp : ConditionalFields {
  static constexpr std::string_view kind = "if";
  template <class Builder>
  class Factory;

  bool has_else = false;
  std::uint32_t bodies() const noexcept { return has_else ? 2 : 1; }
};

/// \brief WHILE: the body runs as long as the value is non-zero, tested before each iteration
/// (so a value of 0 at the node runs it not at all).
struct WhileOp : ConditionalFields {
  static constexpr std::string_view kind = "while";
  static constexpr std::uint32_t body_count = 1;
  /// Runs its body again as long as a kernel of the body keeps the value non-zero.
  static constexpr bool repeats_body = true;
  template <class Builder>
  class Factory;
};

/// \brief SWITCH: body `value` runs; none when the value is not below `cases`.
struct SwitchOp : ConditionalFields {
  static constexpr std::string_view kind = "switch";
  template <class Builder>
  class Factory;

  std::uint32_t cases = 1;
  std::uint32_t bodies() const noexcept { return cases; }
};

namespace detail {
/// The Condition of conditional node `id` (a symbol standing for its native handle).
Condition condition_of(GraphState& state, NodeId id);
}  // namespace detail

/// \brief Handle to a conditional node: its bodies through `body(i)`, its value through `condition()`.
class ConditionalNode : public NodeHandleBase<ConditionalNode> {
 public:
  using NodeHandleBase::NodeHandleBase;
  /// \brief The node's condition, to pass to the kernels that set it.
  Condition condition() const { return detail::condition_of(*state_, id_); }
};

/// \brief `if_then(...)` and `if_else(...)` on graphs and bodies.
template <class Builder>
class IfOp::Factory {
 public:
  /// \brief Declares an IF node with one body (`body(0)`), run when the value is non-zero.
  ConditionalNode if_then(std::string name, std::optional<ConditionDefault> initial = std::nullopt) {
    return declare_if(std::move(name), false, initial);
  }
  /// \brief Declares an IF node with a THEN body (`body(0)`, run when the value is non-zero) and
  /// an ELSE body (`body(1)`, run when it is 0).
  ConditionalNode if_else(std::string name, std::optional<ConditionDefault> initial = std::nullopt) {
    return declare_if(std::move(name), true, initial);
  }

 private:
  ConditionalNode declare_if(std::string name, bool has_else, std::optional<ConditionDefault> initial) {
    IfOp op;
    op.has_else = has_else;
    if (initial) op.default_value = initial->value;
    return static_cast<Builder&>(*this).template add<ConditionalNode>(std::move(name), std::move(op));
  }
};

/// \brief `while_loop(...)` on graphs and bodies.
template <class Builder>
class WhileOp::Factory {
 public:
  /// \brief Declares a WHILE node; fill its body through `body()` and set its condition from a
  /// kernel in that body. With `initial` the value is assigned at every launch (give 1 to run the
  /// body at least once); without it, set it upstream.
  ConditionalNode while_loop(std::string name, std::optional<ConditionDefault> initial = std::nullopt) {
    WhileOp op;
    if (initial) op.default_value = initial->value;
    return static_cast<Builder&>(*this).template add<ConditionalNode>(std::move(name), std::move(op));
  }
};

/// \brief `switch_cases(...)` on graphs and bodies.
template <class Builder>
class SwitchOp::Factory {
 public:
  /// \brief Declares a SWITCH node of `cases` bodies (`body(0)` ... `body(cases - 1)`).
  ConditionalNode switch_cases(std::string name, std::uint32_t cases,
                               std::optional<ConditionDefault> initial = std::nullopt) {
    SwitchOp op;
    op.cases = cases;
    if (initial) op.default_value = initial->value;
    return static_cast<Builder&>(*this).template add<ConditionalNode>(std::move(name), std::move(op));
  }
};

}  // namespace flowdsl
