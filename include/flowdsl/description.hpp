// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file description.hpp
/// \brief The graph description: plain data that the builder produces and lowering reads.
///
/// Nothing here touches CUDA: a description can be built, inspected, validated and lowered
/// to a plan on a machine without a GPU. Each node holds its operation; the fields of an
/// operation are either *structure* (part of the topology hash: changing them selects another
/// executable) or *parameters* (changed in place by an update of the cached executable).
/// Each operation type (flowdsl/kinds/) documents which is which.
///
/// Graphs nest: a node whose kind holds bodies (a child graph) owns them, and the nodes of a
/// body name that node as their parent. All nodes of all bodies live in one array, so a node
/// has one id wherever it sits; names are unique within their body.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flowdsl/chunked_list.hpp"
#include "flowdsl/kind_traits.hpp"
#include "flowdsl/node_parts.hpp"

namespace flowdsl {

/// \brief One node: a user-given name (unique within its body), its operation, its declared
/// accesses and where it sits: top level, or body `body` of node `parent`.
struct Node {
  std::string name;
  Operation op;
  std::vector<Access> accesses;
  NodeId parent = no_node;  ///< the node whose body holds this one; no_node at the top level
  std::uint32_t body = 0;   ///< which body of `parent`
};

/// \brief A memory range the graph's user named (Graph::buffer; every buffer of a JSON file):
/// pointers into it are checked against its end, and messages name it.
struct NamedBuffer {
  std::string name;
  const void* ptr = nullptr;
  std::size_t bytes = 0;
  /// Read after launches (Graph::output, a graph file's `"output": true`): the fusion pass stores
  /// whatever a group writes there.
  bool output = false;
};

/// \brief The whole graph as data: the nodes of every body in declaration order, the edges as
/// declared (both ends of an edge lie in one body), the named buffers and validation options.
/// Nodes never move once declared (ChunkedList), so a graph of any size declares each node at
/// the same cost.
struct Description {
  ChunkedList<Node> nodes;
  ChunkedList<Edge> edges;
  /// The names edges give to nodes not declared when the edge was (EdgeEnd::name indexes this).
  std::vector<std::string> edge_names;
  std::vector<NamedBuffer> buffers;
  /// The nodes whose native values symbols stand for (symbol::index_of indexes this):
  /// conditional nodes whose condition() was taken, graph memory handed out. Not part of the
  /// topology: emission and updates resolve symbols through their node's plan position.
  std::vector<NodeId> symbols;
  /// Whether validation looks for nodes that touch the same bytes, one of them writing, with
  /// no path between them (docs/errors.md, "Hazards"). Not part of the topology.
  bool check_hazards = true;
  /// Whether the runtime gives this graph executables of its own, never shared with another Graph
  /// of equal topology (Graph::own_executable). Not part of the topology.
  bool own_executable = false;
  /// Whether every full edge between two kernels that wait for their producers
  /// (KernelInfo::waits_for_producers: the built-in kernels) is made programmatic
  /// (Graph::programmatic_edges). Changes the plan and the topology.
  bool programmatic_edges = false;
  /// Whether lowering merges runs of element-wise kernels into one generated kernel each
  /// (Graph::fuse, flowdsl/fusion.hpp). Changes the plan and the topology.
  bool fuse = false;
};

/// \brief The name an edge's end gives to its node, when it names one (end.id == no_node).
inline const std::string& edge_name(const Description& description, const EdgeEnd& end) {
  return description.edge_names[end.name];
}

/// \brief The path of node `id` from the top level: "outer/loop/step".
std::string node_path(const Description& description, NodeId id);

/// \brief The node allocating the graph memory that `value` (a pointer or a free's memory)
/// addresses, or no_node when it is no symbol or its symbol stands for no allocation.
inline NodeId allocation_of(const Description& description, std::uint64_t value) {
  if (!symbol::is_symbol(value)) return no_node;
  const std::uint32_t index = symbol::index_of(value);
  const NodeId owner = index < description.symbols.size() ? description.symbols[index] : no_node;
  return owner < description.nodes.size() && allocated_bytes(description.nodes[owner].op) ? owner : no_node;
}

/// \brief The longest node name, in bytes.
inline constexpr std::size_t max_node_name_bytes = 256;

/// \brief Why `name` cannot name a node, or "" when it can. A node's name holds 1 to
/// max_node_name_bytes printable ASCII characters (space to '~') other than '/', which
/// separates the names of a node's path. Validation reports a node whose name breaks the rule,
/// and a JSON graph file's reader the member holding it.
std::string node_name_problem(std::string_view name);

}  // namespace flowdsl
