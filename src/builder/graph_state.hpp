// SPDX-License-Identifier: Apache-2.0
// The state behind a Graph: its description, the index of names, the parameter change log and
// the slot of the derived plan.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "flowdsl/chunked_list.hpp"
#include "flowdsl/graph.hpp"

namespace flowdsl::detail {

class GraphState {
 public:
  GraphState();
  GraphState(const GraphState& other);
  GraphState& operator=(const GraphState&) = delete;

  NodeId add_node(std::string&& name, Operation&& op, NodeId parent, std::uint32_t body);
  /// Declares a node whose operation is the default one (the first kind's), for the caller to
  /// make in place.
  NewNode add_node(std::string&& name, NodeId parent, std::uint32_t body);
  void add_edge(NodeRef&& from, NodeRef&& to, EdgeKind kind = EdgeKind::full);
  /// An edge between two nodes by id: what handles declare, with no name to move.
  void add_edge(NodeId from, NodeId to, EdgeKind kind) {
    Edge& edge = edit().edges.emplace_back_default();
    edge.from.id = from;
    edge.to.id = to;
    edge.kind = kind;
    if (plan_) plan_.reset();
  }
  void reserve(std::size_t nodes, std::size_t edges);
  /// Replaces every edge (edge inference); a topology change.
  void set_edges(ChunkedList<Edge>&& edges);
  /// Names a memory range; validation reads it, so the plan is dropped.
  void add_buffer(NamedBuffer&& buffer);
  /// Marks the buffer named last as read after launches (Graph::output); the plan is dropped.
  void mark_output();
  void set_check_hazards(bool on);
  void set_own_executable(bool on);
  void set_programmatic_edges(bool on);
  void set_fuse(bool on);
  /// The symbol standing for node `id`'s native value (symbol::make), made on first request.
  /// \throws UsageError past symbol::max_symbols
  std::uint64_t symbol(NodeId id);
  /// A symbol whose node is not declared yet (a graph file naming an alloc before it), bound
  /// to its node by bind_symbol once it is.
  /// \throws UsageError past symbol::max_symbols
  std::uint64_t reserve_symbol();
  void bind_symbol(std::uint64_t symbol, NodeId id);
  /// Node `id`, for changes of its accesses (not part of the topology or the parameters, but
  /// validated with it: the caller drops the plan).
  Node& node(NodeId id) { return edit().nodes[id]; }
  /// Operation of node `id`, for a change of its structure (drops the plan).
  Operation& structure(NodeId id) {
    if (plan_) plan_.reset();
    return edit().nodes[id].op;
  }
  /// Operation of node `id`, for a change of its parameters (recorded for the next update).
  /// Changed in place even while a runtime shares the description (see shared_description()):
  /// a runtime reads only the structure of what it shares.
  Operation& parameters(NodeId id) {
    node_version_[id] = ++version_;
    if (id >= unlogged_from_) {
      unlogged_version_ = version_;
    } else {
      changes_.push_back(Change{version_, id});
      if (changes_.size() > 2 * description_->nodes.size() + 64) compact_changes();
    }
    return description_->nodes[id].op;
  }

  const Description& description() const noexcept { return *description_; }
  /// The description, for a runtime to keep the structure of what it instantiated without a
  /// copy: a change of anything but parameters copies it first, if it is shared (edit()).
  std::shared_ptr<const Description> shared_description() const noexcept { return description_; }
  std::shared_ptr<const Plan>& plan() const { return plan_; }
  std::uint64_t uid() const noexcept { return uid_; }
  std::uint64_t parameter_version() const noexcept { return version_; }
  void changes_since(std::uint64_t version, std::vector<NodeId>& out) const;
  /// The first node named `name` in body `body` of `parent`; no_node when absent.
  NodeId find(std::string_view name, NodeId parent, std::uint32_t body) const;

 private:
  struct Change {
    std::uint64_t version;
    NodeId node;
  };
  void compact_changes();
  void log_unlogged() const;
  void index_names() const;

  /// The description to change anything but parameters in: copied first when a runtime shares it.
  Description& edit() {
    if (description_.use_count() > 1) description_ = std::make_shared<Description>(*description_);
    return *description_;
  }

  // What a repeated launch reads (its caches may be cold), first and together.
  std::uint64_t uid_;
  std::uint64_t version_ = 0;                ///< bumped on every parameter change
  mutable std::shared_ptr<const Plan> plan_; ///< derived from the topology; dropped on changes
  /// Never shared with another Graph (a copy of a Graph copies it); shared with runtimes that
  /// instantiated it, to explain later misses.
  std::shared_ptr<Description> description_;
  /// First node declared with each name: at the top level, and within each body. Indexed lazily
  /// (up to names_indexed_) on the first lookup by name, so graphs wired by handles never pay.
  mutable std::unordered_map<std::string, NodeId> top_names_;
  mutable std::map<std::tuple<NodeId, std::uint32_t, std::string>, NodeId, std::less<>> body_names_;
  mutable NodeId names_indexed_ = 0;
  std::unordered_map<NodeId, std::uint32_t> symbol_index_;  ///< node -> index in description_.symbols
  /// Per node: version of its last change. In chunks, as the nodes are: a graph declared node by
  /// node does not copy it as it grows, and its memory serves the next graph.
  ChunkedList<std::uint64_t> node_version_;
  /// Ascending versions; compacted. Changes of the nodes from unlogged_from_ on are not in it
  /// until a query needs them (log_unlogged): node_version_ holds them, and a graph being
  /// declared then costs no log entry per node.
  mutable std::vector<Change> changes_;
  mutable NodeId unlogged_from_ = 0;
  mutable std::uint64_t unlogged_version_ = 0;  ///< the latest change not in changes_; 0: none
};

}  // namespace flowdsl::detail
