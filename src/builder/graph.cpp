// Graph and its state: node and edge declaration, parameter change tracking, lazy lowering.
#include "flowdsl/graph.hpp"

#include <algorithm>
#include <atomic>

namespace flowdsl {
namespace detail {
namespace {

std::uint64_t next_uid() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

}  // namespace

GraphState::GraphState() : uid_(next_uid()) {}

GraphState::GraphState(const GraphState& other)
    : description_(other.description_),
      names_(other.names_),
      names_indexed_(other.names_indexed_),
      uid_(next_uid()),
      version_(other.version_),
      node_version_(other.node_version_),
      changes_(other.changes_),
      plan_(other.plan_ ? std::make_unique<Plan>(*other.plan_) : nullptr) {}

NodeId GraphState::add_node(std::string name, Operation op) {
  const auto id = static_cast<NodeId>(description_.nodes.size());
  description_.nodes.push_back(Node{std::move(name), std::move(op), {}});
  node_version_.push_back(0);
  plan_.reset();
  return id;
}

void GraphState::add_edge(NodeRef from, NodeRef to) {
  description_.edges.push_back(Edge{std::move(from), std::move(to), EdgeKind::full});
  plan_.reset();
}

NodeRef GraphState::resolve(std::string_view name) const {
  const std::size_t id = find(name);
  if (id != no_node) return NodeRef{static_cast<NodeId>(id), {}};
  return NodeRef{no_node, std::string(name)};
}

std::size_t GraphState::find(std::string_view name) const {
  const auto& nodes = description_.nodes;
  for (; names_indexed_ < nodes.size(); ++names_indexed_) {
    names_.emplace(nodes[names_indexed_].name, names_indexed_);  // keeps the first: duplicates are reported by validation
  }
  const auto it = names_.find(std::string(name));
  return it == names_.end() ? std::size_t{no_node} : it->second;
}

Operation& GraphState::structure(NodeId id) {
  plan_.reset();
  return description_.nodes[id].op;
}

Operation& GraphState::parameters(NodeId id) {
  node_version_[id] = ++version_;
  changes_.push_back(Change{version_, id});
  if (changes_.size() > 2 * description_.nodes.size() + 64) compact_changes();
  return description_.nodes[id].op;
}

void GraphState::compact_changes() {
  // Only each node's latest change matters to changes_since(); dropping the others keeps the
  // log within O(nodes) and the order (ascending versions) intact.
  changes_.erase(std::remove_if(changes_.begin(), changes_.end(),
                                [this](const Change& c) { return node_version_[c.node] != c.version; }),
                 changes_.end());
}

void GraphState::changes_since(std::uint64_t version, std::vector<NodeId>& out) const {
  auto first = std::upper_bound(changes_.begin(), changes_.end(), version,
                                [](std::uint64_t v, const Change& c) { return v < c.version; });
  for (; first != changes_.end(); ++first) {
    if (node_version_[first->node] == first->version) out.push_back(first->node);
  }
}

const Plan& GraphState::plan() const {
  if (!plan_) plan_ = std::make_unique<Plan>(lower(description_));
  return *plan_;
}

}  // namespace detail

NodeRef Target::ref(const detail::GraphState& graph) const {
  if (state_ == nullptr) return graph.resolve(name_);
  if (state_ != &graph) {
    throw UsageError("flowdsl: an edge names a node handle of another graph (node #" + std::to_string(id_) + ")");
  }
  return NodeRef{id_, {}};
}

MemcpyNode& MemcpyNode::set(void* dst, const void* src, std::size_t bytes) {
  std::get<MemcpyOp>(state_->parameters(id_)) = MemcpyOp{dst, src, bytes};
  return *this;
}

MemsetNode& MemsetNode::set(void* dst, std::uint32_t value, std::size_t count) {
  auto& op = std::get<MemsetOp>(state_->parameters(id_));
  op.dst = dst;
  op.value = value;
  op.count = count;
  return *this;
}

HostNode& HostNode::set(void (*fn)(void*), void* user_data) {
  std::get<HostOp>(state_->parameters(id_)) = HostOp{fn, user_data};
  return *this;
}

std::size_t RegisteredKernelNode::index_of(std::string_view param) const {
  const std::size_t index = kernel_->index_of(param);
  if (index == kernel_->params.size()) {
    std::string known;
    for (const KernelParam& p : kernel_->params) known += (known.empty() ? "" : ", ") + p.name;
    throw UsageError("flowdsl: node '" + name() + "' (kernel '" + kernel_->name + "'): no parameter named '" +
                     std::string(param) + "' (parameters: " + known + ")");
  }
  return index;
}

std::size_t RegisteredKernelNode::check_param(std::string_view param, const ParamType& given) const {
  const std::size_t index = index_of(param);
  const ParamType& want = kernel_->params[index].type;
  // A pointer to non-const converts to a pointer to const, as in C++.
  const bool ok = given.scalar == want.scalar && given.pointer == want.pointer && (!given.is_const || want.is_const);
  if (!ok) {
    throw UsageError("flowdsl: node '" + name() + "' (kernel '" + kernel_->name + "'): parameter '" +
                     std::string(param) + "' takes " + to_string(want) + ", not " + to_string(given));
  }
  return index;
}

RegisteredKernelNode& RegisteredKernelNode::set_bytes(std::string_view param, const void* value, std::size_t size) {
  const std::size_t index = index_of(param);
  const std::size_t want = kernel_->params[index].type.size();
  if (size != want) {
    throw UsageError("flowdsl: node '" + name() + "' (kernel '" + kernel_->name + "'): parameter '" +
                     std::string(param) + "' takes " + std::to_string(want) + " bytes, not " + std::to_string(size));
  }
  return set_slot(index, value, size);
}

RegisteredKernelNode& RegisteredKernelNode::set_slot(std::size_t index, const void* value, std::size_t size) {
  std::get<KernelOp>(state_->parameters(id_)).args.set(index, value, size);
  return *this;
}

LaunchShape& RegisteredKernelNode::shape() { return std::get<KernelOp>(state_->structure(id_)).launch; }

RegisteredKernelNode& RegisteredKernelNode::grid(Dim3 grid) {
  shape().grid = grid;
  return *this;
}
RegisteredKernelNode& RegisteredKernelNode::block(Dim3 block) {
  shape().block = block;
  return *this;
}
RegisteredKernelNode& RegisteredKernelNode::shared_memory(std::uint32_t bytes) {
  shape().shared_bytes = bytes;
  return *this;
}
RegisteredKernelNode& RegisteredKernelNode::launch(Dim3 grid, Dim3 block, std::uint32_t shared_bytes) {
  shape() = LaunchShape{grid, block, shared_bytes};
  return *this;
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

RegisteredKernelNode Graph::kernel(std::string name, const KernelInfo& kernel) {
  KernelOp op;
  op.function = kernel.function;
  op.kernel_name = kernel.name;
  for (const KernelParam& p : kernel.params) {
    const unsigned char zero[16] = {};
    op.args.append(zero, p.type.size(), p.type.align(), /*bound=*/false);
  }
  return RegisteredKernelNode(state_.get(), state_->add_node(std::move(name), std::move(op)), &kernel);
}

MemcpyNode Graph::memcpy(std::string name, void* dst, const void* src, std::size_t bytes) {
  return MemcpyNode(state_.get(), state_->add_node(std::move(name), MemcpyOp{dst, src, bytes}));
}

MemsetNode Graph::memset(std::string name, void* dst, std::uint32_t value, std::size_t count,
                         std::uint32_t element_size) {
  return MemsetNode(state_.get(), state_->add_node(std::move(name), MemsetOp{dst, value, element_size, count}));
}

NodeHandle Graph::empty(std::string name) {
  return NodeHandle(state_.get(), state_->add_node(std::move(name), EmptyOp{}));
}

HostNode Graph::host(std::string name, void (*fn)(void*), void* user_data) {
  return HostNode(state_.get(), state_->add_node(std::move(name), HostOp{fn, user_data}));
}

NodeHandle Graph::node(std::string_view name) {
  const std::size_t id = state_->find(name);
  if (id == no_node) throw UsageError("flowdsl: no node named '" + std::string(name) + "'");
  return NodeHandle(state_.get(), static_cast<NodeId>(id));
}

}  // namespace flowdsl
