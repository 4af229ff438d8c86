// SPDX-License-Identifier: Apache-2.0
// DOT dumps: a rendering of the description (no plan needed), so that invalid graphs can be
// looked at too. Each kind labels and colours its own nodes (src/kinds/<kind>/dot.cpp).
#include "flowdsl/dot.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "dot_data_flow.hpp"
#include "flowdsl/fusion.hpp"
#include "flowdsl/plan.hpp"
#include "dot_text.hpp"
#include "dot_facets.hpp"

namespace flowdsl {
namespace {

using io::escape_into;

// The heat map (DotOptions::timings): what a node's timing adds to its label and attributes. The
// critical path is blue, to stand out on fills of any red.
constexpr const char* critical_style = "color=blue, penwidth=3";

struct Heat {
  std::string line;        ///< "median 12.3 µs (45%)", or "not measured"
  std::string fill;        ///< an HSV colour from white (no share) to red (the largest share)
  std::string attributes;  ///< the critical path's border, if the node is on it
};

// The largest share of a node that does GPU work itself (nodes holding bodies add their bodies' up).
double largest_share(const Description& d, const NodeTimings& timings) {
  double largest = 0;
  for (NodeId id = 0; id < d.nodes.size() && id < timings.nodes.size(); ++id) {
    if (body_count(d.nodes[id].op) == 0) largest = std::max(largest, timings.nodes[id].share);
  }
  return largest;
}

Heat heat_of(const NodeTiming& t, double largest_share) {
  const std::string attributes = t.critical ? std::string(", ") + critical_style : std::string();
  if (!t.measured) return {"not measured", "white", attributes};
  char line[64];
  std::snprintf(line, sizeof line, "median %.1f \u00b5s (%.0f%%)", t.median_us, 100.0 * t.share);
  const double saturation = largest_share > 0 ? std::min(1.0, t.share / largest_share) : 0.0;
  char fill[32];
  std::snprintf(fill, sizeof fill, "\"0.000 %.3f 1.000\"", saturation);
  return {line, fill, attributes};
}

std::string heat_edge(const NodeTimings* timings, NodeId from, NodeId to) {
  if (timings == nullptr || from == no_node || to >= timings->nodes.size()) return {};
  const bool on_path = timings->nodes[to].critical && timings->nodes[to].critical_after == from;
  return on_path ? std::string(" [") + critical_style + "]" : std::string();
}

class DotWriter {
 public:
  DotWriter(const Description& d, const DotOptions& options) : d_(d), options_(options), addresses_(d) {
    if (options.timings != nullptr && options.timings->nodes.size() != d.nodes.size()) {
      throw UsageError("flowdsl: to_dot: the timings cover " + std::to_string(options.timings->nodes.size()) +
                       " nodes, the graph has " + std::to_string(d.nodes.size()));
    }
    if (options.recordings != nullptr && options.recordings->size() != d.nodes.size()) {
      throw UsageError("flowdsl: to_dot: the recordings cover " + std::to_string(options.recordings->size()) +
                       " nodes, the graph has " + std::to_string(d.nodes.size()));
    }
    if (options.timings != nullptr) largest_share_ = largest_share(d, *options.timings);
    for (NodeId id = 0; id < d.nodes.size(); ++id) {
      const Node& n = d.nodes[id];
      members_[{n.parent, n.body}].push_back(id);
      names_.emplace(std::make_tuple(n.parent, n.body, std::string_view(n.name)), id);
    }
    if (d.fuse) {
      // A graph that fuses draws each group as a cluster of its members; one that does not
      // lower draws as declared.
      try {
        const Plan plan = lower(d);
        if (plan.fusion) fusion_ = plan.fusion;
      } catch (const Error&) {
      }
    }
  }

  std::string run() {
    out_ = "digraph flowdsl {\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n";
    std::string title;
    if (options_.last_launch) {
      title = std::string("last launch: ") + to_string(options_.last_launch->kind);
      if (options_.last_launch->kind == LaunchKind::updated) {
        title += " (" + std::to_string(options_.last_launch->nodes_updated) + " nodes)";
      }
    }
    if (options_.timings != nullptr) {
      title += std::string(title.empty() ? "" : "\n") + "GPU time per launch: red = largest share; bold blue = critical path";
    }
    if (!title.empty()) out_ += "  labelloc=t;\n  label=" + io::quoted(title) + ";\n";
    body(no_node, 0, "  ");
    edges();
    if (options_.data_flow) out_ += io::data_flow_dot(d_, addresses_);
    return out_ + extras_ + "}\n";
  }

 private:
  // The nodes of one body, each followed by the clusters of its own bodies.
  void body(NodeId parent, std::uint32_t index, const std::string& indent) {
    const auto it = members_.find({parent, index});
    if (it == members_.end()) return;
    for (NodeId id : it->second) {
      if (const FusedGroup* group = fusion_ ? fusion_->group(id) : nullptr) {
        if (id == *std::min_element(group->members.begin(), group->members.end())) fused(*group, indent);
        continue;
      }
      node(id, indent);
      const std::uint32_t bodies = body_count(d_.nodes[id].op);
      for (std::uint32_t b = 0; b < bodies; ++b) cluster(id, b, indent);
    }
  }

  // A fused group: its members in a cluster labelled with the generated kernel they run as.
  void fused(const FusedGroup& group, const std::string& indent) {
    std::size_t kept = 0;
    for (bool stored : group.stored) kept += stored ? 0 : 1;
    const std::string title = "fused kernel: " + std::to_string(group.members.size()) + " nodes, " +
                              std::to_string(kept) + " outputs not stored";
    out_ += indent + "subgraph cluster_fused_n" + std::to_string(group.members.front()) + " {\n" + indent +
            "  label=" + io::quoted(title) + ";\n" + indent + "  style=\"rounded,filled\";\n" + indent +
            "  fillcolor=\"#fff3d6\";\n" + indent + "  color=darkorange;\n";
    for (NodeId member : group.members) node(member, indent + "  ");
    out_ += indent + "}\n";
  }

  // An allocation's lifetime: a dashed edge from the alloc to the node freeing it (one whose kind
  // frees graph memory), labelled with the size.
  void lifetime(NodeId id) {
    const std::optional<std::uint64_t> memory = freed_memory(d_.nodes[id].op);
    const NodeId alloc = memory ? allocation_of(d_, *memory) : no_node;
    if (alloc == no_node) return;
    const std::size_t bytes = allocated_bytes(d_.nodes[alloc].op).value_or(0);
    extras_ += "  n" + std::to_string(alloc) + " -> n" + std::to_string(id) +
               " [style=dashed, color=firebrick, fontcolor=firebrick, fontname=\"Helvetica\", label=" +
               io::quoted(std::to_string(bytes) + " bytes") + "];\n";
  }

  void node(NodeId id, const std::string& indent) {
    const Node& n = d_.nodes[id];
    std::vector<std::string> lines{n.name};
    io::DotLabel label{options_, lines, d_, addresses_};
    io::DotStyle style{"white"};
    std::visit([&](const auto& op) {
      io::dot_label(op, label);
      style = io::dot_style(io::Tag<std::decay_t<decltype(op)>>{});
    }, n.op);
    lifetime(id);
    const char* colour = style.colour;
    const char* shape = style.shape;
    if (options_.recordings != nullptr && (*options_.recordings)[id].known) {
      lines.push_back("recorded: " + to_string((*options_.recordings)[id]));
    }
    std::string text = "\"";
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) text += "\\n";
      escape_into(text, lines[i]);
    }
    std::string fill = colour, attributes;
    if (options_.timings != nullptr) {
      Heat heat = heat_of(options_.timings->nodes[id], largest_share_);
      text += "\\n" + heat.line;  // made here, nothing to escape
      fill = std::move(heat.fill);
      attributes = std::move(heat.attributes);
    }
    out_ += indent + "n" + std::to_string(id) + " [label=" + text + "\", fillcolor=" + fill +
            (shape ? std::string(", shape=") + shape : std::string()) + attributes + "];\n";
  }

  // Body `b` of node `id` as a cluster, tied to the node by dotted lines to the body's nodes,
  // and labelled with what the body is to its node ("then", "case 2"; a child graph's, the
  // node's path).
  void cluster(NodeId id, std::uint32_t b, const std::string& indent) {
    const std::string name = "cluster_n" + std::to_string(id) + "_" + std::to_string(b);
    std::string title;
    std::visit([&](const auto& op) {
      title = io::body_place(io::json_bodies(io::Tag<std::decay_t<decltype(op)>>{}), b).title();
    }, d_.nodes[id].op);
    if (title.empty()) title = node_path(d_, id);
    out_ += indent + "subgraph " + name + " {\n" + indent + "  label=" + io::quoted(title) + ";\n" + indent +
            "  style=\"rounded,dashed\";\n";
    body(id, b, indent + "  ");
    out_ += indent + "}\n";
    const auto it = members_.find({id, b});
    if (it == members_.end()) return;
    for (NodeId inner : it->second) {
      out_ += indent + "n" + std::to_string(id) + " -> n" + std::to_string(inner) +
              " [style=dotted, arrowhead=none, color=gray];\n";
    }
  }

  void edges() {
    std::unordered_map<std::string, std::string> missing;  // undeclared name -> DOT id
    const auto resolve = [&](const EdgeEnd& end, NodeId beside) -> NodeId {
      if (end.id != no_node) return end.id;
      const NodeId parent = beside == no_node ? no_node : d_.nodes[beside].parent;
      const std::uint32_t index = beside == no_node ? 0 : d_.nodes[beside].body;
      const auto it = names_.find(std::make_tuple(parent, index, std::string_view(edge_name(d_, end))));
      return it != names_.end() ? it->second : no_node;
    };
    const auto endpoint = [&](const EdgeEnd& end, NodeId beside) -> std::string {
      if (const NodeId id = resolve(end, beside); id != no_node) return "n" + std::to_string(id);
      const std::string& name = edge_name(d_, end);
      auto [it, added] = missing.emplace(name, "missing" + std::to_string(missing.size()));
      if (added) {
        out_ += "  " + it->second + " [label=" + io::quoted(name + "\n(undeclared)") +
                ", style=dashed, color=red, fillcolor=white];\n";
      }
      return it->second;
    };
    for (const Edge& e : d_.edges) {
      const std::string from = endpoint(e.from, e.to.id);
      const std::string to = endpoint(e.to, e.from.id);
      out_ += "  " + from + " -> " + to +
              (e.kind == EdgeKind::programmatic ? " [style=dashed, label=\"programmatic\", fontsize=9]" : "") +
              heat_edge(options_.timings, resolve(e.from, e.to.id), resolve(e.to, e.from.id)) + ";\n";
    }
  }

  const Description& d_;
  const DotOptions& options_;
  io::AddressNames addresses_;  ///< operands by the buffer they point into
  std::map<std::pair<NodeId, std::uint32_t>, std::vector<NodeId>> members_;  ///< per body, in declaration order
  std::map<std::tuple<NodeId, std::uint32_t, std::string_view>, NodeId> names_;  ///< first node of each name, per body
  std::string out_;
  std::shared_ptr<const FusionPlan> fusion_;  // the groups of a graph that fuses
  std::string extras_;  ///< the allocations' lifetimes (lifetime), after the declared edges
  double largest_share_ = 0;  ///< heat map: the share drawn reddest
};

}  // namespace

std::string to_dot(const Graph& graph, const DotOptions& options) {
  return DotWriter(graph.description(), options).run();
}

}  // namespace flowdsl
