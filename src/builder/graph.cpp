// SPDX-License-Identifier: Apache-2.0
// Graph and its state: node and edge declaration, bodies, parameter change tracking.
#include "graph_state.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace flowdsl {
namespace detail {
namespace {


std::uint64_t next_uid() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

// Kinds whose fields may hold symbols say so with a member `remap_symbols(f)` that passes each
// such field through f; the others hold none.
template <class Op, class = void>
struct holds_symbols : std::false_type {};
template <class Op>
struct holds_symbols<Op, std::void_t<decltype(std::declval<Op&>().remap_symbols(std::declval<std::uint64_t (*)(std::uint64_t)>()))>>
    : std::true_type {};

template <class Op, class F>
void remap_symbols(Op& op, const F& f) {
  if constexpr (holds_symbols<Op>::value) op.remap_symbols(f);
}

}  // namespace

GraphState::GraphState() : uid_(next_uid()), description_(std::make_shared<Description>()) {}

GraphState::GraphState(const GraphState& other)
    : uid_(next_uid()),
      version_(other.version_),
      plan_(other.plan_),
      description_(std::make_shared<Description>(*other.description_)),
      top_names_(other.top_names_),
      body_names_(other.body_names_),
      names_indexed_(other.names_indexed_),
      symbol_index_(other.symbol_index_),
      node_version_(other.node_version_),
      changes_(other.changes_),
      unlogged_from_(other.unlogged_from_),
      unlogged_version_(other.unlogged_version_) {}

NodeId GraphState::add_node(std::string&& name, Operation&& op, NodeId parent, std::uint32_t body) {
  const NewNode node = add_node(std::move(name), parent, body);
  node.op = std::move(op);
  return node.id;
}

NewNode GraphState::add_node(std::string&& name, NodeId parent, std::uint32_t body) {
  Description& d = edit();
  const auto id = static_cast<NodeId>(d.nodes.size());
  // Made where it stays (nodes never move): a Node is large, and moving it means visiting its
  // operation.
  // Every member of a Node has an initializer: no zero fill first. The name is moved in by
  // construction (a short name's characters copied in place) rather than by assignment.
  Node& node = d.nodes.emplace_back_default();
  node.name.~basic_string();
  ::new (static_cast<void*>(&node.name)) std::string(std::move(name));
  node.parent = parent;
  node.body = body;
  node_version_.push_back(0);
  if (plan_) plan_.reset();
  return NewNode{id, node.op};
}

void GraphState::add_edge(NodeRef&& from, NodeRef&& to, EdgeKind kind) {
  // Made in place; a name kept only for an end that has no id yet (most ends are ids).
  Description& d = edit();
  const auto end_of = [&d](NodeRef&& ref) {
    EdgeEnd end{ref.id, 0};
    if (ref.id == no_node) {
      end.name = static_cast<std::uint32_t>(d.edge_names.size());
      d.edge_names.push_back(std::move(ref.name));
    }
    return end;
  };
  const EdgeEnd from_end = end_of(std::move(from));
  const EdgeEnd to_end = end_of(std::move(to));
  d.edges.emplace_back_default() = Edge{from_end, to_end, kind};
  if (plan_) plan_.reset();
}

void GraphState::reserve(std::size_t nodes, std::size_t edges) {
  Description& d = edit();
  d.nodes.reserve(d.nodes.size() + nodes);
  node_version_.reserve(node_version_.size() + nodes);
  d.edges.reserve(d.edges.size() + edges);
}

void GraphState::set_edges(ChunkedList<Edge>&& edges) {
  edit().edges = std::move(edges);
  plan_.reset();
}

void GraphState::add_buffer(NamedBuffer&& buffer) {
  edit().buffers.push_back(std::move(buffer));
  plan_.reset();
}

void GraphState::mark_output() {
  edit().buffers.back().output = true;
  plan_.reset();
}

void GraphState::set_fuse(bool on) {
  if (description_->fuse == on) return;
  edit().fuse = on;
  if (plan_) plan_.reset();
}

void GraphState::set_programmatic_edges(bool on) {
  if (description_->programmatic_edges == on) return;
  edit().programmatic_edges = on;
  plan_.reset();
}

void GraphState::set_check_hazards(bool on) {
  if (description_->check_hazards == on) return;
  edit().check_hazards = on;
  plan_.reset();
}

void GraphState::set_own_executable(bool on) {
  if (description_->own_executable == on) return;
  edit().own_executable = on;
  plan_.reset();  // a launch that finds its plan unchanged reuses its executable (Runtime::launch)
}

std::uint64_t GraphState::symbol(NodeId id) {
  const auto [it, added] = symbol_index_.emplace(id, static_cast<std::uint32_t>(description_->symbols.size()));
  if (added) {
    if (description_->symbols.size() >= symbol::max_symbols) {
      symbol_index_.erase(it);
      throw UsageError("flowdsl: node " + quoted_name(node_path(*description_, id)) + ": a graph holds at most " +
                       std::to_string(symbol::max_symbols) + " conditions and graph allocations");
    }
    edit().symbols.push_back(id);
  }
  return symbol::make(it->second);
}

std::uint64_t GraphState::reserve_symbol() {
  if (description_->symbols.size() >= symbol::max_symbols) {
    throw UsageError("flowdsl: a graph holds at most " + std::to_string(symbol::max_symbols) +
                     " conditions and graph allocations");
  }
  Description& d = edit();
  d.symbols.push_back(no_node);
  return symbol::make(static_cast<std::uint32_t>(d.symbols.size() - 1));
}

void GraphState::bind_symbol(std::uint64_t value, NodeId id) {
  const std::uint32_t index = symbol::index_of(value);
  edit().symbols[index] = id;
  symbol_index_.emplace(id, index);
}

void GraphState::index_names() const {
  const auto& nodes = description_->nodes;
  for (; names_indexed_ < nodes.size(); ++names_indexed_) {
    // emplace keeps the first: duplicates are reported by validation
    const Node& n = nodes[names_indexed_];
    if (n.parent == no_node) {
      top_names_.emplace(n.name, names_indexed_);
    } else {
      body_names_.emplace(std::make_tuple(n.parent, n.body, n.name), names_indexed_);
    }
  }
}

NodeId GraphState::find(std::string_view name, NodeId parent, std::uint32_t body) const {
  index_names();
  if (parent == no_node) {
    const auto it = top_names_.find(std::string(name));
    return it == top_names_.end() ? no_node : it->second;
  }
  const auto it = body_names_.find(std::make_tuple(parent, body, std::string(name)));
  return it == body_names_.end() ? no_node : it->second;
}

void GraphState::compact_changes() {
  // Only each node's latest change matters to changes_since(); dropping the others keeps the
  // log within O(nodes) and the order (ascending versions) intact.
  changes_.erase(std::remove_if(changes_.begin(), changes_.end(),
                                [this](const Change& c) { return node_version_[c.node] != c.version; }),
                 changes_.end());
}

void GraphState::log_unlogged() const {
  const auto by_version = [](const Change& a, const Change& b) { return a.version < b.version; };
  const std::size_t logged = changes_.size();
  for (NodeId id = unlogged_from_; id < node_version_.size(); ++id) {
    if (node_version_[id] != 0) changes_.push_back(Change{node_version_[id], id});
  }
  const auto middle = changes_.begin() + static_cast<std::ptrdiff_t>(logged);
  // Nodes are mostly given their parameters in the order they are declared.
  if (!std::is_sorted(middle, changes_.end(), by_version)) std::sort(middle, changes_.end(), by_version);
  // Merged only when they interleave with the log: usually they all come after it.
  if (middle != changes_.begin() && middle != changes_.end() && by_version(*middle, *(middle - 1))) {
    std::inplace_merge(changes_.begin(), middle, changes_.end(), by_version);
  }
  unlogged_from_ = static_cast<NodeId>(node_version_.size());
  unlogged_version_ = 0;
}

void GraphState::changes_since(std::uint64_t version, std::vector<NodeId>& out) const {
  // The changes left out of the log all predate `version` for the runtime's queries (a version
  // it read after they were made), which then cost nothing more.
  if (version < unlogged_version_) log_unlogged();
  auto first = std::upper_bound(changes_.begin(), changes_.end(), version,
                                [](std::uint64_t v, const Change& c) { return v < c.version; });
  for (; first != changes_.end(); ++first) {
    if (node_version_[first->node] == first->version) out.push_back(first->node);
  }
}

// The free functions node handles and the kinds' factories go through.

void add_edge(GraphState& state, const Target& from, const Target& to, NodeId beside, EdgeKind kind) {
  if (from.state_ == &state && to.state_ == &state) {
    state.add_edge(from.id_, to.id_, kind);
  } else {
    state.add_edge(from.ref(state, beside), to.ref(state, beside), kind);
  }
}

NodeRef resolve(const GraphState& state, NodeId beside, std::string_view name) {
  const Node& near = state.description().nodes[beside];
  const NodeId id = state.find(name, near.parent, near.body);
  if (id != no_node) return NodeRef{id, {}};
  return NodeRef{no_node, std::string(name)};
}

const std::string& node_name(const GraphState& state, NodeId id) { return state.description().nodes[id].name; }

void add_access(GraphState& state, NodeId id, Access access) {
  state.node(id).accesses.push_back(access);
  state.plan().reset();  // the hazard check reads accesses
}

Body body_of(GraphState& state, NodeId id, std::uint32_t index) {
  const Node& node = state.description().nodes[id];
  if (index >= body_count(node.op)) {
    throw UsageError("flowdsl: node " + quoted_name(node_path(state.description(), id)) + " (" +
                     std::string(kind_name(node.op)) + ") has " + std::to_string(body_count(node.op)) +
                     " bodies; there is no body " + std::to_string(index));
  }
  return Body(&state, id, index);
}

Condition condition_of(GraphState& state, NodeId id) { return Condition{state.symbol(id)}; }
std::uint64_t symbol_of(GraphState& state, NodeId id) { return state.symbol(id); }
std::uint64_t reserve_symbol(GraphState& state) { return state.reserve_symbol(); }
void bind_symbol(GraphState& state, std::uint64_t symbol, NodeId id) { state.bind_symbol(symbol, id); }

Operation& structure_of(GraphState& state, NodeId id) { return state.structure(id); }
Operation& parameters_of(GraphState& state, NodeId id) { return state.parameters(id); }
const Operation& operation_of(const GraphState& state, NodeId id) { return state.description().nodes[id].op; }

NewNode add_node(GraphState& state, std::string&& name, NodeId parent, std::uint32_t body) {
  return state.add_node(std::move(name), parent, body);
}

NodeId find_node(const GraphState& state, std::string_view name, NodeId parent, std::uint32_t body) {
  return state.find(name, parent, body);
}

std::shared_ptr<const Plan>& plan_slot(const GraphState& state) { return state.plan(); }

std::shared_ptr<const Description> shared_description(const GraphState& state) {
  return state.shared_description();
}

void reserve(GraphState& state, std::size_t nodes, std::size_t edges) { state.reserve(nodes, edges); }

void set_edges(GraphState& state, ChunkedList<Edge>&& edges) { state.set_edges(std::move(edges)); }

void append_graph(GraphState& into, NodeId parent, std::uint32_t body, const Graph& from) {
  const Description& d = from.description();
  const auto base = static_cast<NodeId>(into.description().nodes.size());
  // Symbols of `from` become symbols of `into` for the copies of their nodes.
  const auto remap_symbol = [&](std::uint64_t value) {
    if (!symbol::is_symbol(value) || symbol::index_of(value) >= d.symbols.size()) return value;
    return into.symbol(base + d.symbols[symbol::index_of(value)]) + symbol::offset_of(value);
  };
  for (const Node& n : d.nodes) {
    const bool top = n.parent == no_node;
    Operation op(n.op);
    if (!d.symbols.empty()) {
      std::visit([&](auto& o) { remap_symbols(o, remap_symbol); }, op);
    }
    const NodeId id = into.add_node(std::string(n.name), std::move(op), top ? parent : base + n.parent, top ? body : n.body);
    into.node(id).accesses = n.accesses;
  }
  const auto remap = [&d, base](const EdgeEnd& end) {
    return end.id == no_node ? NodeRef{no_node, edge_name(d, end)} : NodeRef{base + end.id, {}};
  };
  for (const Edge& e : d.edges) into.add_edge(remap(e.from), remap(e.to), e.kind);  // temporaries: moved in
  for (const NamedBuffer& b : d.buffers) {
    const auto& known = into.description().buffers;
    const bool same = std::any_of(known.begin(), known.end(), [&](const NamedBuffer& k) {
      return k.name == b.name && k.ptr == b.ptr && k.bytes == b.bytes;
    });
    if (!same) into.add_buffer(NamedBuffer(b));
  }
}

}  // namespace detail

std::string node_path(const Description& d, NodeId id) {
  std::string path = d.nodes[id].name;
  for (NodeId at = d.nodes[id].parent; at != no_node; at = d.nodes[at].parent) path = d.nodes[at].name + "/" + path;
  return path;
}

std::string node_name_problem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > max_node_name_bytes) {
    return "it is " + std::to_string(name.size()) + " bytes long, over the limit of " +
           std::to_string(max_node_name_bytes);
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == '/') return "it holds '/' (at byte " + std::to_string(i) + "), which separates the names of a node's path";
    if (c < 0x20 || c > 0x7e) {
      return "it holds " +
             std::string(c < 0x20 || c == 0x7f ? "a control character" : "a byte outside printable ASCII") +
             " (at byte " + std::to_string(i) + "): a name holds printable ASCII characters only";
    }
  }
  return {};
}

NodeRef Target::ref(const detail::GraphState& graph, NodeId beside) const {
  if (state_ == nullptr) return detail::resolve(graph, beside, name_);
  if (state_ != &graph) {
    throw UsageError("flowdsl: an edge names a node handle of another graph (node #" + std::to_string(id_) + ")");
  }
  return NodeRef{id_, {}};
}

std::string Body::where() const {
  if (parent_ == no_node) return {};
  return " in body " + std::to_string(index_) + " of node " + quoted_name(node_path(state_->description(), parent_));
}

Graph::Graph() : state_(std::make_unique<detail::GraphState>()) {}
Graph::~Graph() = default;
Graph::Graph(const Graph& other) : state_(std::make_unique<detail::GraphState>(*other.state_)) {}
Graph& Graph::operator=(const Graph& other) {
  if (this != &other) state_ = std::make_unique<detail::GraphState>(*other.state_);
  return *this;
}
Graph::Graph(Graph&& other) noexcept = default;
Graph& Graph::operator=(Graph&& other) noexcept = default;

const Description& Graph::description() const noexcept { return state_->description(); }

Graph& Graph::buffer(std::string name, const void* ptr, std::size_t bytes) {
  if (name.empty()) throw UsageError("flowdsl: a named buffer needs a non-empty name");
  if (ptr == nullptr || bytes == 0) {
    throw UsageError("flowdsl: buffer " + quoted_name(name) + " needs a non-null address and a non-zero size");
  }
  const auto start = reinterpret_cast<std::uintptr_t>(ptr);
  if (bytes - 1 > UINTPTR_MAX - start)
    throw UsageError("flowdsl: buffer " + quoted_name(name) + " runs past the end of memory");
  for (const NamedBuffer& b : state_->description().buffers) {
    const auto other = reinterpret_cast<std::uintptr_t>(b.ptr);
    if (b.name == name) throw UsageError("flowdsl: buffer " + quoted_name(name) + " is named twice");
    if (start < other + b.bytes && other < start + bytes) {
      throw UsageError("flowdsl: buffer " + quoted_name(name) + " overlaps buffer " + quoted_name(b.name));
    }
  }
  state_->add_buffer(NamedBuffer{std::move(name), ptr, bytes, false});
  return *this;
}

Graph& Graph::output(std::string name, const void* ptr, std::size_t bytes) {
  buffer(std::move(name), ptr, bytes);
  state_->mark_output();
  return *this;
}

Graph& Graph::check_hazards(bool on) {
  state_->set_check_hazards(on);
  return *this;
}

Graph& Graph::own_executable(bool on) {
  state_->set_own_executable(on);
  return *this;
}

Graph& Graph::fuse(bool on) {
  state_->set_fuse(on);
  return *this;
}

Graph& Graph::programmatic_edges(bool on) {
  state_->set_programmatic_edges(on);
  return *this;
}
std::uint64_t Graph::uid() const noexcept { return state_->uid(); }
std::uint64_t Graph::parameter_version() const noexcept { return state_->parameter_version(); }
void Graph::changes_since(std::uint64_t version, std::vector<NodeId>& out) const { state_->changes_since(version, out); }

}  // namespace flowdsl
