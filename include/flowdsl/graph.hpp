#pragma once
/// \file graph.hpp
/// \brief The fluent builder: declare nodes and edges, get a description, change parameters.
///
/// \code
///   flowdsl::Graph g;
///   auto up   = g.memcpy("upload", d_x, h_x, bytes);
///   auto k    = g.kernel("scale", scale_kernel).grid(blocks).block(256).args(d_x, 2.0f, n).after(up);
///   auto down = g.memcpy("download", h_y, d_x, bytes).after(k);
///   runtime.launch(g, stream);
///   k.arg<1>(3.0f);             // parameter-only change: the next launch updates one node
///   runtime.launch(g, stream);
/// \endcode
///
/// Thread-safety: a Graph is not synchronised. Modifying it concurrently with any other use
/// is a data race. Its plan is built lazily, on the first plan()/topology_hash()/launch after a
/// topology change, so even those const calls must not run concurrently on one Graph, except
/// through one Runtime, whose launches are serialised: launching one Graph from several
/// threads through one Runtime is safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

namespace detail {

/// The heap-allocated state behind a Graph; node handles point here, so they survive moves of
/// the Graph that owns it.
class GraphState {
 public:
  GraphState();
  GraphState(const GraphState& other);
  GraphState& operator=(const GraphState&) = delete;

  NodeId add_node(std::string name, Operation op);
  void add_edge(NodeRef from, NodeRef to);
  NodeRef resolve(std::string_view name) const;
  /// Operation of node `id`, for a change of its structure (invalidates the plan).
  Operation& structure(NodeId id);
  /// Operation of node `id`, for a change of its parameters (recorded for the next update).
  Operation& parameters(NodeId id);
  Node& node(NodeId id) { return description_.nodes[id]; }

  const Description& description() const noexcept { return description_; }
  const Plan& plan() const;
  std::uint64_t uid() const noexcept { return uid_; }
  std::uint64_t parameter_version() const noexcept { return version_; }
  void changes_since(std::uint64_t version, std::vector<NodeId>& out) const;
  std::size_t find(std::string_view name) const;  ///< no_node when absent

 private:
  struct Change {
    std::uint64_t version;
    NodeId node;
  };
  void compact_changes();

  Description description_;
  /// First node declared with each name, indexed lazily (up to names_indexed_) on the first
  /// lookup by name, so graphs wired by handles never pay for it.
  mutable std::unordered_map<std::string, NodeId> names_;
  mutable NodeId names_indexed_ = 0;
  std::uint64_t uid_;
  std::uint64_t version_ = 0;                    ///< bumped on every parameter change
  std::vector<std::uint64_t> node_version_;      ///< per node: version of its last change
  std::vector<Change> changes_;                  ///< ascending versions; compacted
  mutable std::unique_ptr<Plan> plan_;           ///< derived from topology, built on demand
};

template <class T>
struct always_false : std::false_type {};

}  // namespace detail

class NodeHandle;

/// \brief Something an edge can point at: a node handle of the same graph or a node name.
/// A name that is not declared yet is resolved when the graph is validated.
class Target {
 public:
  Target(const char* name) : name_(name) {}
  Target(std::string_view name) : name_(name) {}
  Target(const std::string& name) : name_(name) {}
  template <class Handle, class = decltype(std::declval<const Handle&>().id())>
  Target(const Handle& handle) : state_(handle.state_), id_(handle.id()) {}

 private:
  template <class>
  friend class NodeHandleBase;
  NodeRef ref(const detail::GraphState& graph) const;

  const detail::GraphState* state_ = nullptr;
  NodeId id_ = no_node;
  std::string_view name_;
};

/// \brief Operations every node handle has. Handles are cheap to copy and stay valid while
/// the Graph (or, after a move, its new owner) lives.
template <class Derived>
class NodeHandleBase {
 public:
  NodeId id() const noexcept { return id_; }
  const std::string& name() const { return state_->node(id_).name; }

  /// \brief This node runs after every node given (handles or names).
  template <class... Ts>
  Derived& after(const Ts&... predecessors) {
    (state_->add_edge(Target(predecessors).ref(*state_), NodeRef{id_, {}}), ...);
    return self();
  }
  /// \brief Every node given (handles or names) runs after this one.
  template <class... Ts>
  Derived& before(const Ts&... successors) {
    (state_->add_edge(NodeRef{id_, {}}, Target(successors).ref(*state_)), ...);
    return self();
  }
  /// \brief Declares that this node reads [ptr, ptr + bytes) (bytes = 0: extent unknown).
  Derived& reads(const void* ptr, std::size_t bytes = 0) { return access(ptr, bytes, AccessMode::read); }
  /// \brief Declares that this node writes [ptr, ptr + bytes) (bytes = 0: extent unknown).
  Derived& writes(const void* ptr, std::size_t bytes = 0) { return access(ptr, bytes, AccessMode::write); }

 protected:
  NodeHandleBase(detail::GraphState* state, NodeId id) : state_(state), id_(id) {}
  Derived& self() { return static_cast<Derived&>(*this); }
  Derived& access(const void* ptr, std::size_t bytes, AccessMode mode) {
    state_->node(id_).accesses.push_back(Access{ptr, bytes, mode});
    return self();
  }

  detail::GraphState* state_;
  NodeId id_;

 private:
  friend class Target;
  friend class NodeHandle;
};

/// \brief Handle to any node (empty nodes, lookups by name).
class NodeHandle : public NodeHandleBase<NodeHandle> {
 public:
  NodeHandle(detail::GraphState* state, NodeId id) : NodeHandleBase(state, id) {}
  /// \brief Any typed handle converts to the plain one.
  template <class Derived>
  NodeHandle(const NodeHandleBase<Derived>& typed) : NodeHandleBase(typed.state_, typed.id_) {}
};

/// \brief Handle to a kernel node whose kernel takes `Params...`.
template <class... Params>
class KernelNode : public NodeHandleBase<KernelNode<Params...>> {
  using Base = NodeHandleBase<KernelNode<Params...>>;

 public:
  KernelNode(detail::GraphState* state, NodeId id) : Base(state, id) {}

  /// \brief Grid dimensions (blocks). Structure: a change selects another executable.
  KernelNode& grid(Dim3 grid) { return shape([&](LaunchShape& s) { s.grid = grid; }); }
  /// \brief Block dimensions (threads). Structure.
  KernelNode& block(Dim3 block) { return shape([&](LaunchShape& s) { s.block = block; }); }
  /// \brief Dynamic shared memory per block in bytes. Structure.
  KernelNode& shared_memory(std::uint32_t bytes) { return shape([&](LaunchShape& s) { s.shared_bytes = bytes; }); }
  /// \brief Grid, block and dynamic shared memory at once. Structure.
  KernelNode& launch(Dim3 grid, Dim3 block, std::uint32_t shared_bytes = 0) {
    return shape([&](LaunchShape& s) { s = LaunchShape{grid, block, shared_bytes}; });
  }

  /// \brief Binds every argument. Count and types are checked against the kernel's signature
  /// at compile time. Parameters: the next launch updates this node in place.
  template <class... Args>
  KernelNode& args(Args&&... values) {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "flowdsl: args(...) must be given exactly one value per kernel parameter");
    static_assert((std::is_convertible_v<Args&&, Params> && ...),
                  "flowdsl: an argument given to args(...) does not convert to the kernel's parameter type");
    KernelOp& op = std::get<KernelOp>(this->state_->parameters(this->id_));
    set_all(op.args, std::index_sequence_for<Params...>{}, std::forward<Args>(values)...);
    return *this;
  }

  /// \brief Binds argument `Index` alone, e.g. `k.arg<1>(alpha)`. Parameters.
  template <std::size_t Index, class Arg>
  KernelNode& arg(Arg&& value) {
    static_assert(Index < sizeof...(Params), "flowdsl: arg<Index>: the kernel has fewer parameters");
    using Param = std::tuple_element_t<Index, std::tuple<Params...>>;
    static_assert(std::is_convertible_v<Arg&&, Param>,
                  "flowdsl: the value given to arg<Index>(...) does not convert to that kernel parameter's type");
    const Param converted = static_cast<Param>(std::forward<Arg>(value));
    KernelOp& op = std::get<KernelOp>(this->state_->parameters(this->id_));
    op.args.set(Index, &converted, sizeof(Param));
    return *this;
  }

 private:
  template <class F>
  KernelNode& shape(F&& edit) {
    edit(std::get<KernelOp>(this->state_->structure(this->id_)).launch);
    return *this;
  }
  template <std::size_t... I, class... Args>
  static void set_all(ArgumentPack& pack, std::index_sequence<I...>, Args&&... values) {
    (set_one<I, Params...>(pack, std::forward<Args>(values)), ...);
  }
  template <std::size_t I, class... Ps, class Arg>
  static void set_one(ArgumentPack& pack, Arg&& value) {
    using Param = std::tuple_element_t<I, std::tuple<Ps...>>;
    const Param converted = static_cast<Param>(std::forward<Arg>(value));
    pack.set(I, &converted, sizeof(Param));
  }
};

/// \brief Handle to a kernel node of a registered kernel (KernelInfo): the launch shape as for
/// KernelNode, arguments set by parameter name and checked against the registered types at run
/// time. This is how graphs read from JSON are built.
class RegisteredKernelNode : public NodeHandleBase<RegisteredKernelNode> {
 public:
  RegisteredKernelNode(detail::GraphState* state, NodeId id, const KernelInfo* kernel)
      : NodeHandleBase(state, id), kernel_(kernel) {}

  /// \brief The registered kernel this node launches.
  const KernelInfo& kernel() const noexcept { return *kernel_; }

  /// \brief Grid dimensions (blocks). Structure.
  RegisteredKernelNode& grid(Dim3 grid);
  /// \brief Block dimensions (threads). Structure.
  RegisteredKernelNode& block(Dim3 block);
  /// \brief Dynamic shared memory per block in bytes. Structure.
  RegisteredKernelNode& shared_memory(std::uint32_t bytes);
  /// \brief Grid, block and dynamic shared memory at once. Structure.
  RegisteredKernelNode& launch(Dim3 grid, Dim3 block, std::uint32_t shared_bytes = 0);

  /// \brief Binds the parameter called `param` to `value`. Parameters.
  ///
  /// `T` must be exactly the parameter's type (i32 is `std::int32_t`, f16 is `__half`, ...);
  /// a pointer parameter takes a pointer to its element type (a `const` parameter also takes
  /// a pointer to non-const).
  /// \throws UsageError naming the node and the parameter when there is no such parameter or
  ///         the type differs.
  template <class T>
  RegisteredKernelNode& set(std::string_view param, T value) {
    static_assert(std::is_trivially_copyable_v<T>, "flowdsl: kernel arguments must be trivially copyable");
    const std::size_t index = check_param(param, param_type_of<T>());
    return set_slot(index, &value, sizeof(T));
  }

  /// \brief Binds the parameter called `param` to the `size` bytes at `value` (its
  /// representation: a device address for pointers, the little-endian scalar otherwise).
  /// Parameters.
  /// \throws UsageError naming the node and the parameter when there is no such parameter or
  ///         `size` is not the parameter's size.
  RegisteredKernelNode& set_bytes(std::string_view param, const void* value, std::size_t size);

 private:
  std::size_t index_of(std::string_view param) const;
  std::size_t check_param(std::string_view param, const ParamType& given) const;
  RegisteredKernelNode& set_slot(std::size_t index, const void* value, std::size_t size);
  LaunchShape& shape();

  const KernelInfo* kernel_;
};

/// \brief Handle to a memcpy node.
class MemcpyNode : public NodeHandleBase<MemcpyNode> {
 public:
  MemcpyNode(detail::GraphState* state, NodeId id) : NodeHandleBase(state, id) {}
  /// \brief New destination, source and size. Parameters.
  MemcpyNode& set(void* dst, const void* src, std::size_t bytes);
};

/// \brief Handle to a memset node.
class MemsetNode : public NodeHandleBase<MemsetNode> {
 public:
  MemsetNode(detail::GraphState* state, NodeId id) : NodeHandleBase(state, id) {}
  /// \brief New destination, value and element count. Parameters.
  MemsetNode& set(void* dst, std::uint32_t value, std::size_t count);
};

/// \brief Handle to a host-callback node.
class HostNode : public NodeHandleBase<HostNode> {
 public:
  HostNode(detail::GraphState* state, NodeId id) : NodeHandleBase(state, id) {}
  /// \brief New function and user data. Parameters.
  HostNode& set(void (*fn)(void*), void* user_data);
};

/// \brief A graph under construction and its description; what a Runtime launches.
///
/// Declaring a node or an edge, or changing a launch shape, changes the topology; setting
/// arguments, pointers, sizes and values changes parameters only, and the Runtime then updates
/// the cached executable in place. Copies are independent graphs; moves keep handles valid.
/// Assigning to a Graph (copy or move) ends the graph it held: handles to that one dangle.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;

  /// \brief Declares a kernel node launching `function` (a `__global__` function).
  /// Launch shape defaults to one block of one thread; bind arguments with args().
  /// \param name unique node name
  /// \param function the kernel
  /// \param kernel_name the kernel's name, for messages and dumps (optional)
  template <class... Params>
  KernelNode<Params...> kernel(std::string name, void (*function)(Params...), std::string kernel_name = {}) {
    static_assert((std::is_trivially_copyable_v<Params> && ...),
                  "flowdsl: kernel parameters must be trivially copyable (CUDA copies them by value)");
    KernelOp op;
    op.function = reinterpret_cast<const void*>(function);
    op.kernel_name = std::move(kernel_name);
    (append_slot<Params>(op.args), ...);
    return KernelNode<Params...>(state_.get(), state_->add_node(std::move(name), std::move(op)));
  }

  /// \brief Declares a kernel node launching the registered kernel `kernel`, whose parameters
  /// start unset. The node's kernel_name is the registered name. `kernel` must outlive the
  /// graph (entries of a KernelRegistry do).
  /// \param name unique node name
  /// \param kernel the registered kernel
  /// \throws UsageError when a parameter's type has an alignment over 16 bytes (none does)
  RegisteredKernelNode kernel(std::string name, const KernelInfo& kernel);

  /// \brief Declares a 1-D copy of `bytes` bytes from `src` to `dst` (any direction).
  MemcpyNode memcpy(std::string name, void* dst, const void* src, std::size_t bytes);

  /// \brief Declares a 1-D memset of `count` elements of `element_size` bytes (1, 2 or 4).
  MemsetNode memset(std::string name, void* dst, std::uint32_t value, std::size_t count,
                    std::uint32_t element_size = 1);

  /// \brief Declares an empty node (a join point).
  NodeHandle empty(std::string name);

  /// \brief Declares a host node calling `fn(user_data)` in stream order.
  HostNode host(std::string name, void (*fn)(void*), void* user_data = nullptr);

  /// \brief Handle to the node declared with `name`.
  /// \throws UsageError when there is none.
  NodeHandle node(std::string_view name);

  /// \brief The description built so far.
  const Description& description() const noexcept { return state_->description(); }
  std::size_t size() const noexcept { return state_->description().nodes.size(); }

  /// \brief The plan of the current topology, lowered on first use after a topology change.
  /// \throws ValidationError listing every problem of the description.
  const Plan& plan() const { return state_->plan(); }
  /// \brief Topology hash of the current topology (see flowdsl::topology_hash).
  /// \throws ValidationError as plan().
  std::uint64_t topology_hash() const { return plan().topology_hash; }

  /// \brief Identity of this graph object (a copy gets a new one).
  std::uint64_t uid() const noexcept { return state_->uid(); }
  /// \brief Counter bumped by every parameter change.
  std::uint64_t parameter_version() const noexcept { return state_->parameter_version(); }
  /// \brief Appends to `out` the nodes whose parameters changed after `version`, each once.
  /// Costs O(changes since `version`), not O(nodes).
  void changes_since(std::uint64_t version, std::vector<NodeId>& out) const {
    state_->changes_since(version, out);
  }

 private:
  template <class T>
  static void append_slot(ArgumentPack& pack) {
    const T zero{};
    pack.append(&zero, sizeof(T), alignof(T), /*bound=*/false);
  }

  std::unique_ptr<detail::GraphState> state_;
};

}  // namespace flowdsl
