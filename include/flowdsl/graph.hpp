// SPDX-License-Identifier: Apache-2.0
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
/// Each node kind contributes its own declaring call (`kernel`, `memcpy`, `memset`, `empty`,
/// `host`, `child`, `if_then`, `alloc`, `free`, `record_event`, ...; see flowdsl/kinds/) to Graph
/// and to Body, the builder of a node's body.
/// This header and what it includes need no CUDA header: a plain C++ program can build,
/// validate and hash a graph.
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
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/kinds.hpp"
#include "flowdsl/node_handle.hpp"

namespace flowdsl {

struct Plan;

namespace detail {
/// A node just declared, and its operation to make.
struct NewNode {
  NodeId id;
  Operation& op;
};
/// Declares a node in body `body` of `parent` (no_node: the top level) whose operation is the
/// default one (the first kind's), for the caller to make in place.
NewNode add_node(GraphState& state, std::string&& name, NodeId parent, std::uint32_t body);
/// The node named `name` in body `body` of `parent`, or no_node.
NodeId find_node(const GraphState& state, std::string_view name, NodeId parent, std::uint32_t body);
/// Makes room for `nodes` more nodes and `edges` more edges (a reader that knows its counts).
void reserve(GraphState& state, std::size_t nodes, std::size_t edges);
/// Replaces every edge (edge inference, flowdsl/hazards.hpp).
void set_edges(GraphState& state, ChunkedList<Edge>&& edges);
/// A symbol for a node not declared yet (a graph file's alloc named before it is declared); its
/// entry of Description::symbols is no_node until bind_symbol names the node.
/// \throws UsageError past symbol::max_symbols
std::uint64_t reserve_symbol(GraphState& state);
/// Makes node `id` the owner of a symbol reserve_symbol gave.
void bind_symbol(GraphState& state, std::uint64_t symbol, NodeId id);
/// The plan derived from the current topology, or null when there is none yet (the lowering
/// library fills it; the builder only drops it when the topology changes).
std::shared_ptr<const Plan>& plan_slot(const GraphState& state);
/// The description, shared rather than copied, for a runtime to keep the structure of what it
/// instantiated: the Graph copies it before changing anything but parameters while it is shared.
std::shared_ptr<const Description> shared_description(const GraphState& state);
}  // namespace detail

/// \brief Where nodes are declared: the top level of a Graph, or one body of a node. What the
/// kinds' declaring calls (Graph::kernel, Body::memcpy, ...) go through.
template <class Derived>
class Builder {
 public:
  /// \brief Declares a node of operation `op` and returns its handle `Handle(state, id,
  /// extra...)`. The kinds' declaring calls use this; applications call those.
  template <class Handle, class Op, class... Extra>
  Handle add(std::string name, Op&& op, Extra&&... extra) {
    using Kind = std::decay_t<Op>;
    if constexpr (std::is_nothrow_constructible_v<Kind, Op&&>) {
      const detail::NewNode node = detail::add_node(state(), std::move(name), parent(), body());
      node.op.template emplace<Kind>(std::forward<Op>(op));
      return Handle(&state(), node.id, std::forward<Extra>(extra)...);
    } else {
      // Copied before the node is declared: a copy that throws must leave no node behind.
      return add<Handle>(std::move(name), Kind(std::forward<Op>(op)), std::forward<Extra>(extra)...);
    }
  }

  /// \brief Declares a node of operation `Op` made in place by `make(Op&)`, which must not
  /// throw, from a default `Op`; returns its handle as add() does. Spares a large operation
  /// (a kernel's, with its arguments inside) the moves of add().
  template <class Handle, class Op, class Make, class... Extra>
  Handle add_in_place(std::string&& name, Make&& make, Extra&&... extra) {
    static_assert(std::is_nothrow_invocable_v<Make&, Op&>, "flowdsl: add_in_place: make(op) must be noexcept");
    const detail::NewNode node = detail::add_node(state(), std::move(name), parent(), body());
    Op* op = std::get_if<Op>(&node.op);
    make(op != nullptr ? *op : node.op.template emplace<Op>());
    return Handle(&state(), node.id, std::forward<Extra>(extra)...);
  }

  /// \brief Handle to the node declared here with `name`.
  /// \throws UsageError when there is none.
  NodeHandle node(std::string_view name) {
    const NodeId id = detail::find_node(state(), name, parent(), body());
    if (id == no_node) throw UsageError("flowdsl: no node named '" + std::string(name) + "'" + where());
    return NodeHandle(&state(), id);
  }
  /// \brief Typed handle to the node declared here with `name`, to change its arguments: a
  /// kernel (`KernelNode<Params...>`) or library node (`LibraryNode<Params...>`), e.g. one use's
  /// copy of a body, `enc.body().node<flowdsl::KernelNode<float*, float, int>>("scale").arg<1>(0.5f)`.
  /// The node's kind, argument count and argument sizes are checked (not the types themselves,
  /// which the node does not keep).
  /// \throws UsageError when there is no such node or it does not fit the handle.
  template <class Handle>
  Handle node(std::string_view name) {
    const NodeId id = node(name).id();
    const std::string why = detail::TypedLookup<Handle>::mismatch(detail::operation_of(state(), id));
    if (!why.empty()) {
      throw UsageError("flowdsl: node '" + std::string(name) + "'" + where() + " does not fit the handle asked for: " + why);
    }
    return Handle(&state(), id);
  }

  detail::GraphState& state() { return static_cast<Derived&>(*this).state(); }

 private:
  NodeId parent() const { return static_cast<const Derived&>(*this).parent(); }
  std::uint32_t body() const { return static_cast<const Derived&>(*this).body(); }
  std::string where() const { return static_cast<const Derived&>(*this).where(); }
};

/// \brief One body of a node (a child graph's), to declare nodes in. A non-owning reference:
/// valid while the Graph that holds the node lives. Get one from a handle's `body()`.
class Body : public Builder<Body>, public detail::Factories<Body, Operation> {
 public:
  Body(detail::GraphState* state, NodeId parent, std::uint32_t index) : state_(state), parent_(parent), index_(index) {}

  detail::GraphState& state() { return *state_; }
  NodeId parent() const noexcept { return parent_; }
  std::uint32_t body() const noexcept { return index_; }
  std::string where() const;

 private:
  detail::GraphState* state_;
  NodeId parent_;
  std::uint32_t index_;
};

/// \brief A graph under construction and its description; what a Runtime launches.
///
/// Declaring a node or an edge, or changing a launch shape, changes the topology; setting
/// arguments, pointers, sizes and values changes parameters only, and the Runtime then updates
/// the cached executable in place. Copies are independent graphs; moves keep handles valid.
/// Assigning to a Graph (copy or move) ends the graph it held: handles to that one dangle.
class Graph : public Builder<Graph>, public detail::Factories<Graph, Operation> {
 public:
  Graph();
  ~Graph();
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;

  /// \brief The description built so far.
  const Description& description() const noexcept;

  /// \brief Names the `bytes` bytes at `ptr` (device or host memory). Validation then checks
  /// every registered kernel's pointer into it against its end (extents, flowdsl/extent.hpp),
  /// takes an access of unknown extent inside it to end where it ends, and names it in
  /// messages and DOT dumps ("x+256"). Not part of the topology. JSON graphs name every buffer of their file.
  /// \throws UsageError for an empty name, a null or empty range, a name given twice or a
  ///         range overlapping another named buffer.
  Graph& buffer(std::string name, const void* ptr, std::size_t bytes);
  /// \brief Names a buffer as buffer() does, as one the program reads after launches: a graph
  /// that fuses (fuse()) then stores whatever a fused kernel writes into it, even where only
  /// later members of its group read it. Not part of the topology.
  /// \throws UsageError as buffer().
  Graph& output(std::string name, const void* ptr, std::size_t bytes);
  /// \brief Whether validation reports hazards: two nodes touching the same bytes, one of
  /// them writing, with no path between them (on by default; off for graphs that mean it,
  /// e.g. atomics into one buffer from parallel nodes). Not part of the topology.
  Graph& check_hazards(bool on);
  /// \brief Whether the runtime gives this graph executables of its own, cached by the Graph and
  /// never shared with another Graph of equal topology (off by default; graphs holding memory
  /// nodes always get their own). For graphs launched in turn whose parameters differ in many
  /// nodes, such as the batch buckets of a Family: sharing one executable would update those
  /// nodes at every turn (and re-instantiate where a library node's recorded body differs).
  /// Not part of the topology; graph files do not hold it.
  Graph& own_executable(bool on);
  /// \brief Makes every edge between two kernels that wait for their producers (the built-in
  /// kernels: KernelInfo::waits_for_producers) programmatic, as if declared with
  /// `after(k, flowdsl::programmatic)` (off by default). Bodies included. Changes the topology.
  Graph& programmatic_edges(bool on);
  /// \brief Runs each run of element-wise kernels (the built-in fill, iota, scale, axpy, add,
  /// multiply, silu_mul, clamp, cast and bias_activation, and registered kernels with an element function) as one kernel
  /// generated for the run and compiled with NVRTC when the graph is first instantiated (off by
  /// default; flowdsl/fusion.hpp). A member's output that only later members of its run read is
  /// kept in registers, not stored. Bodies included. Changes the topology.
  Graph& fuse(bool on);
  /// \brief Makes room for `nodes` more nodes and `edges` more edges, so that declaring a graph
  /// whose size is known up front moves no node. Changes nothing else.
  Graph& reserve(std::size_t nodes, std::size_t edges = 0) {
    detail::reserve(*state_, nodes, edges);
    return *this;
  }
  /// \brief Nodes declared, in every body.
  std::size_t size() const noexcept { return description().nodes.size(); }

  /// \brief The plan of the current topology, lowered on first use after a topology change.
  /// Defined by the lowering library (flowdsl/plan.hpp has the Plan type).
  /// \throws ValidationError listing every problem of the description.
  [[nodiscard]] const Plan& plan() const;
  /// \brief Topology hash of the current topology (see flowdsl::topology_hash).
  /// \throws ValidationError as plan().
  [[nodiscard]] std::uint64_t topology_hash() const;

  /// \brief Identity of this graph object (a copy gets a new one).
  std::uint64_t uid() const noexcept;
  /// \brief Counter bumped by every parameter change.
  std::uint64_t parameter_version() const noexcept;
  /// \brief Appends to `out` the nodes whose parameters changed after `version`, each once.
  /// Costs O(changes since `version`), not O(nodes).
  void changes_since(std::uint64_t version, std::vector<NodeId>& out) const;

  detail::GraphState& state() { return *state_; }
  const detail::GraphState& state() const { return *state_; }
  NodeId parent() const noexcept { return no_node; }
  std::uint32_t body() const noexcept { return 0; }
  std::string where() const { return {}; }

 private:
  std::unique_ptr<detail::GraphState> state_;
};

template <class Derived>
Body NodeHandleBase<Derived>::body(std::uint32_t index) const {
  return detail::body_of(*state_, id_, index);
}

}  // namespace flowdsl
