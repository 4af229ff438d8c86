// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/child.hpp
/// \brief Child-graph nodes: a graph run as one node of another (CUDA's child graph node).
///
/// \code
///   flowdsl::Graph encoder;                  // built once, used as a body (copied)
///   ...
///   flowdsl::Graph g;
///   auto up  = g.memcpy("upload", d_x, h_x, bytes);
///   auto enc = g.child("encoder", encoder).after(up);
///   auto k   = enc.body().kernel("extra", scale_kernel).launch(blocks, 256).args(d_x, 2.0f, n);
///   k.arg<1>(3.0f);                          // a node inside the body updates in place too
/// \endcode

#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/node_handle.hpp"

namespace flowdsl {

class Graph;

/// \brief A child graph: the node's one body runs, as a whole, after the node's predecessors
/// and before its successors. No fields of its own: the body holds its nodes.
struct ChildOp {
  static constexpr std::string_view kind = "child";
  static constexpr std::uint32_t body_count = 1;
  /// Its body becomes a CUDA child graph, which cannot hold a conditional node.
  static constexpr bool child_graph = true;
  template <class Builder>
  class Factory;
};

namespace detail {
/// Copies every node and edge of `from` into body `body` of node `parent` of `into`.
void append_graph(GraphState& into, NodeId parent, std::uint32_t body, const Graph& from);
}  // namespace detail

/// \brief `child(...)` on graphs and bodies.
template <class Builder>
class ChildOp::Factory {
 public:
  /// \brief Declares a child-graph node whose body is a copy of `body` (its nodes keep their
  /// names; later changes to `body` do not reach this copy). Declare more nodes in the copy
  /// through `.body()`.
  NodeHandle child(std::string name, const Graph& body) {
    NodeHandle node = child(std::move(name));
    detail::append_graph(static_cast<Builder&>(*this).state(), node.id(), 0, body);
    return node;
  }
  /// \brief Declares a child-graph node with an empty body, to fill through `.body()`.
  NodeHandle child(std::string name) {
    return static_cast<Builder&>(*this).template add<NodeHandle>(std::move(name), ChildOp{});
  }
};

}  // namespace flowdsl
