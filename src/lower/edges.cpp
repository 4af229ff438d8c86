// Edge resolution (names to ids) and deterministic topological order.
#include "edges.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>

namespace flowdsl::lowering {

ResolvedEdges resolve_edges(const Description& d, Diagnostics& diag) {
  const auto count = static_cast<NodeId>(d.nodes.size());
  std::unordered_map<std::string_view, NodeId> by_name;
  const bool any_name = std::any_of(d.edges.begin(), d.edges.end(),
                                    [](const Edge& e) { return e.from.id == no_node || e.to.id == no_node; });
  if (any_name) {
    for (NodeId id = 0; id < count; ++id) by_name.emplace(d.nodes[id].name, id);
  }
  auto resolve = [&](const NodeRef& ref) -> NodeId {
    if (ref.id != no_node) return ref.id < count ? ref.id : no_node;
    const auto it = by_name.find(ref.name);
    return it == by_name.end() ? no_node : it->second;
  };
  auto label = [&](const NodeRef& ref) {
    return ref.id != no_node ? "#" + std::to_string(ref.id) : "'" + ref.name + "'";
  };

  ResolvedEdges out;
  out.predecessors.resize(count);
  for (const Edge& e : d.edges) {
    const NodeId from = resolve(e.from);
    const NodeId to = resolve(e.to);
    if (from == no_node && to == no_node) {
      diag.add({}, "edge between unknown nodes " + label(e.from) + " and " + label(e.to));
    } else if (from == no_node) {
      diag.report(d.nodes[to], "depends on unknown node " + label(e.from));
    } else if (to == no_node) {
      diag.report(d.nodes[from], "must run before unknown node " + label(e.to));
    } else if (from == to) {
      diag.report(d.nodes[to], "depends on itself");
    } else {
      out.predecessors[to].push_back(from);
    }
  }
  for (auto& preds : out.predecessors) {
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  }
  return out;
}

std::vector<NodeId> topological_order(const ResolvedEdges& edges, std::size_t count) {
  std::vector<std::uint32_t> waiting(count, 0);
  std::vector<std::vector<NodeId>> successors(count);
  for (NodeId to = 0; to < count; ++to) {
    waiting[to] = static_cast<std::uint32_t>(edges.predecessors[to].size());
    for (NodeId from : edges.predecessors[to]) successors[from].push_back(to);
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId id = 0; id < count; ++id) {
    if (waiting[id] == 0) ready.push(id);
  }
  std::vector<NodeId> order;
  order.reserve(count);
  while (!ready.empty()) {
    const NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (NodeId next : successors[id]) {
      if (--waiting[next] == 0) ready.push(next);
    }
  }
  return order;
}

}  // namespace flowdsl::lowering
