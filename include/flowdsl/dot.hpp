// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file dot.hpp
/// \brief Graphviz DOT dumps of a graph's description.

#include <optional>
#include <string>
#include <vector>

#include "flowdsl/graph.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/node_timings.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

/// \brief What to_dot shows besides names, kinds, kernels, launch shapes and edges.
struct DotOptions {
  /// Show each node's bound parameters: kernel arguments (by parameter name and typed when
  /// `registry` knows the kernel, as bytes otherwise), copy and memset operands. Pointers are
  /// shown by the memory they point into: "input", "input+256" in a named buffer
  /// (Graph::buffer, a graph file's buffers), "scratch+64" in an alloc's memory; an address in
  /// neither is shown as the address.
  bool show_arguments = false;
  /// Draw the data flow too: every named buffer (Graph::buffer, a graph file's buffers), each
  /// alloc's memory and each other address the nodes touch as a parallelogram, with an edge
  /// from a buffer to each node that reads it and from each node that writes it to the buffer
  /// (flowdsl::accesses_of: declared and derived accesses), labelled with the byte ranges
  /// when they are not the whole buffer.
  bool data_flow = false;
  /// Registry used to name and type kernel arguments; may be null.
  const KernelRegistry* registry = nullptr;
  /// The report of the graph's last Runtime::launch: shown in the graph's title
  /// (hit, update of N nodes, instantiation, re-instantiation).
  std::optional<LaunchReport> last_launch;
  /// Measured times by NodeId (Profiler::timings, node_timings), drawn as a heat map: each
  /// measured node filled from white to red by its share of the GPU time (the node with the
  /// largest share red) and labelled with its median time and share, nodes not measured white,
  /// the critical path drawn bold and blue. Null: no heat map. Must cover every node.
  const NodeTimings* timings = nullptr;
  /// What library nodes recorded, by NodeId (flowdsl::recordings after a launch): each such
  /// node's label gains a line "recorded: 1 kernel". Null: not shown. Must cover every node.
  const std::vector<Recording>* recordings = nullptr;
};

/// \brief The graph as a DOT digraph: one DOT node per graph node, labelled with its name,
/// kind, kernel name and launch shape and coloured by kind; one edge per declared edge (an
/// edge to an undeclared name is drawn to a dashed red node of that name). A node's bodies
/// are drawn as clusters beside it, tied to it by dotted lines and labelled with what they are:
/// a child graph's body with the node's path, an IF's "then" and "else", a WHILE's
/// "body (while)", a SWITCH's "case 0", "case 1"... Conditional nodes show their default value,
/// and with `show_arguments` a kernel's Condition argument names its conditional node and
/// pointers name the buffer they point into. With `data_flow`, buffers are drawn too, with
/// their read and write edges.
///
/// Every user string is escaped: any node name (quotes, backslashes, newlines, control
/// characters, invalid UTF-8, which becomes U+FFFD) yields valid DOT. Needs no GPU and does
/// not validate the graph.
std::string to_dot(const Graph& graph, const DotOptions& options = {});

}  // namespace flowdsl
