// SPDX-License-Identifier: Apache-2.0
// Writing a C++-built graph as a graph spec: pointers become buffer names and offsets, each
// kind describes its own members (src/kinds/<kind>/json.cpp), bodies nest.
#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "flowdsl/json.hpp"
#include "json_facets.hpp"

namespace flowdsl {
namespace {

class Describer final : public io::NodeDescriber {
 public:
  Describer(const Graph& graph, std::vector<BufferSpec> buffers, const BufferAddresses& addresses,
            const KernelRegistry& registry, const Externals& externals)
      : graph_(graph), addresses_(addresses), registry_(registry), externals_(externals) {
    spec_.buffers = std::move(buffers);
  }

  GraphSpec run(std::string name) {
    spec_.name = std::move(name);
    const Description& d = graph_.description();
    spec_.check_hazards = d.check_hazards;
    spec_.programmatic_edges = d.programmatic_edges;
    spec_.fuse = d.fuse;
    // Each node's spec goes into the list of its body, found through its parent's spec.
    index_.resize(d.nodes.size(), 0);
    for (NodeId id = 0; id < d.nodes.size(); ++id) add_node(id);
    for (const Edge& e : d.edges) add_edge(e);
    if (!problems_.empty()) throw JsonError(std::move(problems_));
    return std::move(spec_);
  }

  // io::NodeDescriber, for the node being described.
  BufferRef locate(const void* ptr, const std::string& suffix) override {
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    if (symbol::is_symbol(p)) return locate_symbol(p, suffix);
    for (const BufferSpec& b : spec_.buffers) {
      const auto it = addresses_.find(b.name);
      if (it == addresses_.end()) continue;
      const auto base = reinterpret_cast<std::uintptr_t>(it->second);
      if (p >= base && p - base < b.bytes()) return BufferRef{b.name, p - base};
    }
    std::ostringstream text;
    text << "pointer " << ptr << " lies in no named buffer";
    problem(suffix, text.str());
    return {};
  }
  std::string condition_name(std::uint64_t word, const std::string& suffix) override {
    const Description& d = graph_.description();
    const NodeId owner = symbol::is_symbol(word) && symbol::index_of(word) < d.symbols.size() && symbol::offset_of(word) == 0
                             ? d.symbols[symbol::index_of(word)]
                             : no_node;
    if (owner == no_node || !is_conditional(d.nodes[owner].op)) {
      problem(suffix, "the argument is not the condition of a conditional node of this graph");
      return {};
    }
    const std::string& name = d.nodes[owner].name;
    const NodeId found = resolve(name, node_);
    if (found == owner) return name;
    problem(suffix, found == no_node ? "the argument sets the condition of node " + quoted_name(node_path(d, owner)) +
                                           ", which sits in no body holding this kernel, so a file cannot name it"
                                     : "the argument sets the condition of node " + quoted_name(node_path(d, owner)) +
                                           ", but from this kernel " + quoted_name(name) + " names node " +
                                           quoted_name(node_path(d, found)) + " (rename one of them)");
    return {};
  }
  void problem(const std::string& suffix, std::string message) override {
    problems_.push_back({pointer_ + suffix, std::move(message)});
  }
  const KernelRegistry& registry() const override { return registry_; }
  const HostFunctions& hosts() const override { return externals_.hosts; }
  const Events& events() const override { return externals_.events; }

 private:
  // A symbolic address: in the memory of an alloc, referenced by the alloc node's name, which must
  // then name nothing else a reference could mean.
  BufferRef locate_symbol(std::uint64_t value, const std::string& suffix) {
    const Description& d = graph_.description();
    const std::uint32_t index = symbol::index_of(value);
    const NodeId owner = index < d.symbols.size() ? d.symbols[index] : no_node;
    if (owner >= d.nodes.size() || !allocated_bytes(d.nodes[owner].op)) {
      problem(suffix, "the pointer holds a symbol that stands for no alloc's memory");
      return {};
    }
    const std::string& name = d.nodes[owner].name;
    const bool buffer = std::any_of(spec_.buffers.begin(), spec_.buffers.end(),
                                    [&](const BufferSpec& b) { return b.name == name; });
    if (alloc_names_.empty()) {
      for (const Node& n : d.nodes) {
        if (allocated_bytes(n.op)) ++alloc_names_[n.name];
      }
    }
    const bool shared = alloc_names_[name] > 1;
    if (buffer || shared) {
      problem(suffix, "alloc " + quoted_name(node_path(d, owner)) + " shares its name with another " +
                          (buffer ? "buffer" : "alloc") + ": a file references allocs and buffers by name alike");
      return {};
    }
    return BufferRef{name, symbol::offset_of(value)};
  }

  // A node's spec, found through its parent's: the lists of bodies move as specs are added.
  NodeSpec& spec_of(NodeId id) { return list_of(graph_.description().nodes[id])[index_[id]]; }
  std::vector<NodeSpec>& list_of(const Node& node) {
    return node.parent == no_node ? spec_.nodes : spec_of(node.parent).bodies[node.body].nodes;
  }

  // The node `name` finds from node `from`, as the reader resolves a condition argument: the
  // first node of that name in its body, else in the body holding that one, and so on.
  NodeId resolve(const std::string& name, NodeId from) {
    const Description& d = graph_.description();
    if (names_.empty()) {
      for (NodeId id = 0; id < d.nodes.size(); ++id) names_.emplace(std::make_tuple(d.nodes[id].parent, d.nodes[id].body, std::string_view(d.nodes[id].name)), id);
    }
    for (NodeId at = from; at != no_node; at = d.nodes[at].parent) {
      const auto it = names_.find({d.nodes[at].parent, d.nodes[at].body, name});
      if (it != names_.end()) return it->second;
    }
    return no_node;
  }

  void add_node(NodeId id) {
    node_ = id;
    const Node& node = graph_.description().nodes[id];
    std::vector<NodeSpec>& list = list_of(node);
    pointer_ = pointer_of(node) + "/" + std::to_string(list.size());
    NodeSpec out;
    out.name = node.name;
    out.kind = std::string(kind_name(node.op));
    std::visit([&](const auto& op) { out.fields = CompactJson::from_json(io::describe_json(op, *this)); }, node.op);
    out.bodies.resize(body_count(node.op));
    for (std::size_t j = 0; j < node.accesses.size(); ++j) {
      const Access& a = node.accesses[j];
      const AccessSpec spec{locate(a.ptr, ""), a.bytes};
      if (a.mode == AccessMode::read) {
        out.reads.push_back(spec);
      } else if (a.mode == AccessMode::write) {
        out.writes.push_back(spec);
      } else {
        problem("", "declared read-write accesses have no JSON form (declare a read and a write)");
      }
    }
    pointers_.push_back(pointer_);
    index_[id] = list.size();
    list.push_back(std::move(out));
  }

  // The JSON pointer of the array holding `node`'s body.
  std::string pointer_of(const Node& node) const {
    if (node.parent == no_node) return "/nodes";
    const Node& parent = graph_.description().nodes[node.parent];
    std::string member;
    std::visit([&](const auto& op) {
      member = io::body_place(io::json_bodies(io::Tag<std::decay_t<decltype(op)>>{}), node.body).pointer();
    }, parent.op);
    return pointers_[node.parent] + member;
  }

  void add_edge(const Edge& e) {
    const Description& d = graph_.description();
    const NodeId to = e.to.id != no_node ? e.to.id : find(edge_name(d, e.to), e.from.id);
    if (to == no_node) {
      problems_.push_back(
          {"/nodes", "an edge leads to node " + quoted_name(edge_name(d, e.to)) + ", which is not declared"});
      return;
    }
    NodeSpec& spec = spec_of(to);
    spec.after.push_back(e.from.id == no_node ? edge_name(d, e.from) : d.nodes[e.from.id].name);
    if (e.kind == EdgeKind::programmatic) spec.programmatic.push_back(static_cast<std::uint32_t>(spec.after.size() - 1));
  }

  // The node named `name` in the body of `beside` (the top level when unknown).
  NodeId find(const std::string& name, NodeId beside) const {
    const Description& d = graph_.description();
    const NodeId parent = beside == no_node ? no_node : d.nodes[beside].parent;
    for (NodeId id = 0; id < d.nodes.size(); ++id) {
      if (d.nodes[id].name == name && d.nodes[id].parent == parent) return id;
    }
    return no_node;
  }

  const Graph& graph_;
  const BufferAddresses& addresses_;
  const KernelRegistry& registry_;
  const Externals& externals_;
  std::unordered_map<std::string_view, int> alloc_names_;  ///< allocs per name, counted on first need
  GraphSpec spec_;
  std::vector<std::size_t> index_;     ///< per node: its index in the list of its body
  std::vector<std::string> pointers_;  ///< per node: its JSON pointer
  std::vector<JsonProblem> problems_;
  std::string pointer_;                ///< the node being described
  NodeId node_ = no_node;              ///< the node being described
  /// (parent, body, name) -> the first node of that name in that body; built on first use.
  std::map<std::tuple<NodeId, std::uint32_t, std::string_view>, NodeId> names_;
};

}  // namespace

GraphSpec describe_graph(const Graph& graph, std::string name, std::vector<BufferSpec> buffers,
                         const BufferAddresses& addresses, const KernelRegistry& registry, const Externals& externals) {
  return Describer(graph, std::move(buffers), addresses, registry, externals).run(std::move(name));
}

}  // namespace flowdsl
