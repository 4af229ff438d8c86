// SPDX-License-Identifier: Apache-2.0
// Edge resolution (names to ids) and deterministic topological order.
#include "edges.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "builder/registered_name.hpp"
#include "scratch.hpp"

namespace flowdsl::lowering {
namespace {

/// Builds rows from (row, neighbour) pairs, given as rows[k] and neighbours[k]: counting sort by
/// row, then each row sorted and deduplicated. No allocation per node. Pairs that come ascending
/// and distinct (edges declared on each node in turn, as most graphs are built) are the rows as
/// they are: `neighbours` becomes the adjacency's nodes, not copied.
Adjacency make_adjacency(std::size_t count, const std::vector<NodeId>& rows, std::vector<NodeId>&& neighbours) {
  Adjacency a;
  take_scratch<ScratchUse::predecessor_offsets>(a.offsets);
  a.offsets.assign(count + 1, 0);
  bool ascending = true;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    ++a.offsets[rows[k] + 1];
    ascending = ascending && (k == 0 || rows[k - 1] < rows[k] || (rows[k - 1] == rows[k] && neighbours[k - 1] < neighbours[k]));
  }
  for (std::size_t i = 0; i < count; ++i) a.offsets[i + 1] += a.offsets[i];
  if (ascending) {
    a.nodes = std::move(neighbours);
    return a;
  }
  a.nodes.resize(rows.size());
  std::vector<std::uint32_t> fill(a.offsets.begin(), a.offsets.end() - 1);
  for (std::size_t k = 0; k < rows.size(); ++k) a.nodes[fill[rows[k]]++] = neighbours[k];
  // Sort and deduplicate each row, compacting in place.
  std::uint32_t write = 0;
  for (std::size_t i = 0; i < count; ++i) {
    auto first = a.nodes.begin() + a.offsets[i];
    auto last = a.nodes.begin() + a.offsets[i + 1];
    if (last - first > 1) std::sort(first, last);
    const auto unique_end = std::unique(first, last);
    a.offsets[i] = write;
    write = static_cast<std::uint32_t>(std::move(first, unique_end, a.nodes.begin() + write) - a.nodes.begin());
  }
  a.offsets[count] = write;
  a.nodes.resize(write);
  return a;
}

}  // namespace

ResolvedEdges resolve_edges(const Description& d, Diagnostics& diag, bool one_body) {
  const auto count = static_cast<NodeId>(d.nodes.size());
  // Names resolve within the body of the edge's other end (the node the edge was declared on).
  // Most graphs' edges name no node: the tables are made when the first edge does.
  std::unordered_map<std::string_view, NodeId> top_names;
  std::map<std::tuple<NodeId, std::uint32_t, std::string_view>, NodeId> body_names;
  bool names_made = false;
  auto make_names = [&] {
    NodeId id = 0;
    for (const Node& n : d.nodes) {
      if (n.parent == no_node) {
        top_names.emplace(n.name, id);
      } else {
        body_names.emplace(std::make_tuple(n.parent, n.body, std::string_view(n.name)), id);
      }
      ++id;
    }
    names_made = true;
  };
  auto resolve = [&](const EdgeEnd& end, NodeId beside) -> NodeId {
    if (end.id != no_node) return end.id < count ? end.id : no_node;
    if (!names_made) make_names();
    const std::string& name = edge_name(d, end);
    const NodeId parent = beside == no_node ? no_node : d.nodes[beside].parent;
    if (parent == no_node) {
      const auto it = top_names.find(name);
      return it == top_names.end() ? no_node : it->second;
    }
    const auto it = body_names.find(std::make_tuple(parent, d.nodes[beside].body, std::string_view(name)));
    return it == body_names.end() ? no_node : it->second;
  };
  auto label = [&](const EdgeEnd& end) {
    return end.id != no_node ? "#" + std::to_string(end.id) : quoted_name(edge_name(d, end));
  };

  // The resolved edges as pairs (tos[k], froms[k]): what make_adjacency wants.
  std::vector<NodeId> tos, froms;
  take_scratch<ScratchUse::edge_pairs>(tos);
  take_scratch<ScratchUse::predecessor_nodes>(froms);
  bool forward = true;
  // An edge makes at most one pair: written by index, trimmed to `pairs` at the end.
  tos.resize(d.edges.size());
  froms.resize(d.edges.size());
  std::size_t pairs = 0;
  // Keys (to << 32 | from) of the programmatic edges, and of the full ones to check them against,
  // kept once some edge may be programmatic: until then every edge in `pairs` is full.
  bool any_programmatic = d.programmatic_edges;
  std::vector<std::uint64_t> programmatic, full;
  // Graph::programmatic_edges: a full edge between two kernels that wait for their producers.
  std::unordered_map<const void*, bool> waits;  // by kernel function
  const auto waits_for_producers = [&](NodeId id) {
    const LaunchFields* op = launch_fields(d.nodes[id].op);
    if (op == nullptr) return false;
    if (op->waits_for_producers) return true;
    const auto [it, added] = waits.try_emplace(op->function, false);
    if (added) {
      const KernelInfo* info = detail::registered_entry(op->info, op->function, &KernelRegistry::global());
      it->second = info != nullptr && info->waits_for_producers;
    }
    return it->second;
  };
  for (const Edge& e : d.edges) {
    const NodeId from = resolve(e.from, e.to.id != no_node && e.to.id < count ? e.to.id : no_node);
    const NodeId to = resolve(e.to, from);
    if (from == no_node && to == no_node) {
      diag.add({}, "edge between unknown nodes " + label(e.from) + " and " + label(e.to));
    } else if (from == no_node) {
      diag.report(d, to, "depends on unknown node " + label(e.from));
    } else if (to == no_node) {
      diag.report(d, from, "must run before unknown node " + label(e.to));
    } else if (from == to) {
      diag.report(d, to, "depends on itself");
    } else if (!one_body && (d.nodes[from].parent != d.nodes[to].parent || d.nodes[from].body != d.nodes[to].body)) {
      diag.add({node_path(d, from), node_path(d, to)},
               "edge from " + quoted_name(node_path(d, from)) + " to " + quoted_name(node_path(d, to)) +
                   " crosses a body boundary: both ends of an edge must lie in one body");
    } else {
      if (!any_programmatic && e.kind == EdgeKind::programmatic) {
        any_programmatic = true;
        full.reserve(pairs);
        for (std::size_t k = 0; k < pairs; ++k) full.push_back((std::uint64_t{tos[k]} << 32) | froms[k]);
      }
      tos[pairs] = to;
      froms[pairs] = from;
      ++pairs;
      forward = forward && from < to;
      if (!any_programmatic) continue;
      const std::uint64_t key = (std::uint64_t{to} << 32) | from;
      if (e.kind == EdgeKind::full && d.programmatic_edges && waits_for_producers(from) && waits_for_producers(to)) {
        programmatic.push_back(key);
      } else if (e.kind == EdgeKind::full) {
        full.push_back(key);
      } else if (launch_fields(d.nodes[from].op) == nullptr || launch_fields(d.nodes[to].op) == nullptr) {
        // At the dependent node, whose `after` declares the edge.
        diag.add({node_path(d, to), node_path(d, from)},
                 "programmatic edge from " + quoted_name(node_path(d, from)) + " (" +
                     std::string(kind_name(d.nodes[from].op)) + ") to " + quoted_name(node_path(d, to)) + " (" +
                     std::string(kind_name(d.nodes[to].op)) + "): programmatic edges join two kernel nodes",
                 "after");
      } else {
        programmatic.push_back(key);
      }
    }
  }
  tos.resize(pairs);
  froms.resize(pairs);
  ResolvedEdges out{make_adjacency(count, tos, std::move(froms)), {}, forward};
  keep_scratch<ScratchUse::edge_pairs>(std::move(tos));
  if (!programmatic.empty()) {
    std::sort(programmatic.begin(), programmatic.end());
    programmatic.erase(std::unique(programmatic.begin(), programmatic.end()), programmatic.end());
    std::sort(full.begin(), full.end());
    for (std::uint64_t key : programmatic) {
      if (!std::binary_search(full.begin(), full.end(), key)) continue;
      const auto from = static_cast<NodeId>(key & 0xffffffffu), to = static_cast<NodeId>(key >> 32);
      diag.add({node_path(d, to), node_path(d, from)},
               "edge from " + quoted_name(node_path(d, from)) + " to " + quoted_name(node_path(d, to)) +
                   " is declared both full and programmatic: keep one",
               "after");
    }
    out.programmatic = std::move(programmatic);
  }
  return out;
}

std::vector<NodeId> topological_order(const ResolvedEdges& edges, std::size_t count) {
  const Adjacency& preds = edges.predecessors;
  // The common case: every edge goes from a node to one declared later. Then the declaration
  // order is the order Kahn's algorithm gives (the first node not yet taken has all its
  // predecessors taken, and no ready node comes before it), with no heap and no successor lists.
  // resolve_edges knows it already; other edges are looked at.
  bool forward = true;
  for (NodeId to = 0; to < count && forward && !edges.forward; ++to) {
    for (const NodeId* p = preds.begin(to); p != preds.end(to); ++p) forward = forward && *p < to;
  }
  std::vector<NodeId> order;
  take_scratch<ScratchUse::order>(order);
  if (forward) {
    order.resize(count);
    for (NodeId id = 0; id < count; ++id) order[id] = id;
    return order;
  }
  std::vector<NodeId> froms, tos;  // the edges reversed: (froms[k], tos[k])
  froms.reserve(preds.nodes.size());
  tos.reserve(preds.nodes.size());
  std::vector<std::uint32_t> waiting(count, 0);
  for (NodeId to = 0; to < count; ++to) {
    waiting[to] = static_cast<std::uint32_t>(preds.count(to));
    for (const NodeId* p = preds.begin(to); p != preds.end(to); ++p) {
      froms.push_back(*p);
      tos.push_back(to);
    }
  }
  const Adjacency successors = make_adjacency(count, froms, std::move(tos));

  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId id = 0; id < count; ++id) {
    if (waiting[id] == 0) ready.push(id);
  }
  order.reserve(count);
  while (!ready.empty()) {
    const NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (const NodeId* next = successors.begin(id); next != successors.end(id); ++next) {
      if (--waiting[*next] == 0) ready.push(*next);
    }
  }
  return order;
}

}  // namespace flowdsl::lowering
