// Validation: every problem of a description, each attached to the node(s) it is about.
#include <algorithm>
#include <functional>
#include <string>

#include "edges.hpp"
#include "node_kinds.hpp"

namespace flowdsl {
namespace lowering {

void Diagnostics::report(const Node& node, const std::string& message) {
  out_.push_back(Diagnostic{{node.name}, "node '" + node.name + "' (" + std::string(kind_name(node.op)) + "): " + message});
}

void Diagnostics::add(std::vector<std::string> nodes, std::string message) {
  out_.push_back(Diagnostic{std::move(nodes), std::move(message)});
}

namespace {

void check_names(const Description& d, Diagnostics& diag) {
  // Sorting (hash of name, id) finds every duplicate without a hash-table node per name;
  // names are compared only within runs of equal hashes.
  std::vector<std::pair<std::size_t, NodeId>> names;
  names.reserve(d.nodes.size());
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (d.nodes[id].name.empty()) {
      diag.add({}, "node #" + std::to_string(id) + " (" + std::string(kind_name(d.nodes[id].op)) +
                       ") has an empty name");
    } else {
      names.emplace_back(std::hash<std::string_view>{}(d.nodes[id].name), id);
    }
  }
  std::sort(names.begin(), names.end());
  std::vector<std::pair<NodeId, std::string>> duplicates;  // (first id, message), reported in id order
  std::vector<char> reported(d.nodes.size(), 0);
  for (std::size_t i = 0; i < names.size();) {
    std::size_t j = i + 1;
    while (j < names.size() && names[j].first == names[i].first) ++j;
    for (std::size_t a = i; j - i > 1 && a < j; ++a) {  // a run of equal hashes: compare names
      const NodeId first = names[a].second;
      if (reported[first]) continue;
      const std::string& name = d.nodes[first].name;
      std::string where = "#" + std::to_string(first);
      std::size_t count = 1;
      for (std::size_t b = a + 1; b < j; ++b) {
        if (d.nodes[names[b].second].name != name) continue;
        reported[names[b].second] = 1;
        where += ", #" + std::to_string(names[b].second);
        ++count;
      }
      if (count > 1) {
        duplicates.emplace_back(first, "node '" + name + "' is declared " + std::to_string(count) + " times (nodes " +
                                           where + "): names must be unique");
      }
    }
    i = j;
  }
  std::sort(duplicates.begin(), duplicates.end());
  for (auto& [id, message] : duplicates) diag.add({d.nodes[id].name}, std::move(message));
}

// Reports each cycle once, as a path of names, among the nodes a topological sort left over.
void check_cycles(const Description& d, const ResolvedEdges& edges, const std::vector<NodeId>& order,
                  Diagnostics& diag) {
  if (order.size() == d.nodes.size()) return;
  std::vector<char> sorted(d.nodes.size(), 0);
  for (NodeId id : order) sorted[id] = 1;
  std::vector<char> visited(d.nodes.size(), 0);
  std::vector<int> seen_at(d.nodes.size(), -1);
  for (NodeId start = 0; start < d.nodes.size(); ++start) {
    if (sorted[start] || visited[start]) continue;
    // Every unsorted node has an unsorted predecessor, so walking predecessors must repeat:
    // either within this walk (a new cycle) or into an earlier walk (a cycle already reported).
    std::vector<NodeId> path;
    NodeId at = start;
    while (seen_at[at] < 0 && !visited[at]) {
      seen_at[at] = static_cast<int>(path.size());
      path.push_back(at);
      at = *std::find_if(edges.predecessors.begin(at), edges.predecessors.end(at), [&](NodeId p) { return !sorted[p]; });
    }
    if (!visited[at]) {
      std::vector<NodeId> cycle(path.begin() + seen_at[at], path.end());
      std::reverse(cycle.begin(), cycle.end());  // walked backwards: print in edge order
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());  // first declared first
      std::vector<std::string> names;
      std::string text;
      for (NodeId id : cycle) {
        names.push_back(d.nodes[id].name);
        text += "'" + d.nodes[id].name + "' -> ";
      }
      text += "'" + d.nodes[cycle.front()].name + "'";
      diag.add(std::move(names), "cycle: " + text);
    }
    for (NodeId id : path) {
      visited[id] = 1;
      seen_at[id] = -1;
    }
  }
}

}  // namespace

Ordering validate(const Description& d, Diagnostics& diag) {
  Ordering ordering;
  if (d.nodes.empty()) {
    diag.add({}, "graph is empty: declare at least one node");
    return ordering;
  }
  check_names(d, diag);
  ordering.edges = resolve_edges(d, diag);
  for (const Node& node : d.nodes) {
    std::visit([&](const auto& op) {
      check_structure(op, node, diag);
      check_parameters(op, node, diag);
    }, node.op);
  }
  ordering.order = topological_order(ordering.edges, d.nodes.size());
  check_cycles(d, ordering.edges, ordering.order, diag);
  return ordering;
}

}  // namespace lowering

std::vector<Diagnostic> validate(const Description& d) {
  std::vector<Diagnostic> out;
  lowering::Diagnostics diag(out);
  lowering::validate(d, diag);
  return out;
}

namespace {

void check_parameters_of(const Node& node, lowering::Diagnostics& diag) {
  std::visit([&](const auto& op) { lowering::check_parameters(op, node, diag); }, node.op);
}

}  // namespace

std::vector<Diagnostic> validate_parameters(const Description& d, const std::vector<NodeId>& nodes) {
  std::vector<Diagnostic> out;
  lowering::Diagnostics diag(out);
  for (NodeId id : nodes) check_parameters_of(d.nodes[id], diag);
  return out;
}

std::vector<Diagnostic> validate_parameters(const Description& d) {
  std::vector<Diagnostic> out;
  lowering::Diagnostics diag(out);
  for (const Node& node : d.nodes) check_parameters_of(node, diag);
  return out;
}

}  // namespace flowdsl
