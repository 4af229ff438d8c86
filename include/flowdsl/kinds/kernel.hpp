// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/kernel.hpp
/// \brief Kernel nodes: the operation, the typed and registered handles, and `Graph::kernel`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "flowdsl/node_handle.hpp"
#include "flowdsl/node_parts.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

/// \brief What a node that launches a kernel of its own holds: the function, its launch shape and
/// its arguments. Generic code (debug launches, the profiler's argument table, programmatic edges,
/// condition setters) reads a launch through launch_fields(), whatever the kind.
/// Structure: function, launch. Parameters: args.
struct LaunchFields {
  const void* function = nullptr;  ///< the kernel's host stub address (its identity)
  std::string kernel_name;         ///< for messages and dumps; empty: see kernel_name_of
  /// The registered kernel, for nodes declared from one (its parameter names and extents);
  /// null for typed nodes, which find theirs in KernelRegistry::global() by function.
  const KernelInfo* info = nullptr;
  LaunchShape launch;
  bool grid_set = false;           ///< grid() or launch() was called: there is no default grid
  bool block_set = false;          ///< block() or launch() was called: there is no default block
  /// The kernel waits for its producers before reading what they wrote (griddepcontrol.wait),
  /// so that Graph::programmatic_edges may make its edges programmatic; set by the built-in
  /// launchers (flowdsl/kernels.hpp) and by waits_for_producers(). Registered kernels say so
  /// in KernelInfo::waits_for_producers.
  bool waits_for_producers = false;
  ArgumentPack args;
  /// Parameters the kernel takes after its arguments, computed from them (structure).
  DerivedParameters derived;

  /// The registered entry describing the arguments: `info`, else the one `registry` holds for
  /// `function`; null when there is none or its parameter count differs from the arguments'.
  const KernelInfo* entry(const KernelRegistry& registry) const {
    const KernelInfo* found = info != nullptr ? info : registry.find_function(function);
    return found != nullptr && found->params.size() == args.size() ? found : nullptr;
  }
};

/// \brief Launch of a `__global__` function.
struct KernelOp : LaunchFields {
  static constexpr std::string_view kind = "kernel";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool device_launchable = true;  ///< CUDA allows it in a graph made for device launch
  template <class Builder>
  class Factory;

  /// Passes each pointer and Condition argument through `f` (symbols of a copied graph).
  template <class F>
  void remap_symbols(const F& f) {
    args.remap_symbols(f);
  }
  /// Calls `visit(value)` for each pointer or Condition argument that holds a symbol.
  template <class Visit>
  void for_each_symbol(Visit&& visit) const {
    args.for_each_symbol(visit);
  }
  /// The kernel and its arguments (kind_traits.hpp: registered_call).
  RegisteredCall registered_call() const { return {info, function, &args, "runs a kernel"}; }
};

/// \brief The kernel's name for messages and dumps: the one the node was given, else the name
/// its function is registered under in KernelRegistry::global() (looked up when asked, so that
/// declaring a node costs no lookup), else empty.
std::string kernel_name_of(const LaunchFields& op);

namespace detail {
/// Binds typed values to the slots of a pack laid out for `Params...` (the arguments of typed
/// kernel and library nodes), each converted to its parameter's type.
template <class... Params>
struct TypedSlots {
  template <class... Args>
  static void set_all(ArgumentPack& pack, Args&&... values) {
    set_each(pack, std::index_sequence_for<Params...>{}, std::forward<Args>(values)...);
  }
  template <std::size_t I, class Arg>
  static void set(ArgumentPack& pack, Arg&& value) {
    using Param = std::tuple_element_t<I, std::tuple<Params...>>;
    const Param converted = static_cast<Param>(std::forward<Arg>(value));
    pack.set(I, &converted, sizeof(Param));
  }

 private:
  template <std::size_t... I, class... Args>
  static void set_each(ArgumentPack& pack, std::index_sequence<I...>, Args&&... values) {
    (set<I>(pack, std::forward<Args>(values)), ...);
  }
};

/// The slot of the parameter called `param` of `entry` (a registered kernel or library call),
/// for node `node` to bind a value of `size` bytes to, of type `given` when known.
/// \throws UsageError naming the node and the parameter when there is no such parameter, or the
///         type or size differs.
std::size_t registered_slot(const KernelInfo& entry, const std::string& node, std::string_view param,
                            const ParamType* given, std::size_t size);
/// The index of the parameter called `param` of the kernel `function`, by the names it is
/// registered with in KernelRegistry::global() (the built-in kernels' are).
/// \throws UsageError naming the node when the kernel is not registered or has no such parameter.
std::size_t parameter_index(const void* function, std::size_t params, const std::string& node, std::string_view param);

/// args(...) and arg<I>(...) of the typed handles (KernelNode, LibraryNode): values checked
/// against the function's parameters `Params` at compile time, written into the slots of the
/// node's `Op`. Base is the handle's own base, which holds the node.
template <class Derived, class Op, class Base, class... Params>
class TypedArguments : public Base {
 public:
  using Base::Base;

  /// \brief Binds every argument. Count and types are checked against the function's signature
  /// at compile time. Parameters: the next launch updates this node in place.
  template <class... Args>
  Derived& args(Args&&... values) {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "flowdsl: args(...) must be given exactly one value per parameter of the kernel or call");
    static_assert((std::is_convertible_v<Args&&, Params> && ...),
                  "flowdsl: an argument given to args(...) does not convert to its parameter's type");
    TypedSlots<Params...>::set_all(slots(), std::forward<Args>(values)...);
    return static_cast<Derived&>(*this);
  }

  /// \brief Binds argument `Index` alone, e.g. `k.arg<1>(alpha)` (a library call's 0 is the first
  /// after its stream). Parameters.
  template <std::size_t Index, class Arg>
  Derived& arg(Arg&& value) {
    static_assert(Index < sizeof...(Params), "flowdsl: arg<Index>: the kernel or call has fewer parameters");
    static_assert(std::is_convertible_v<Arg&&, std::tuple_element_t<Index, std::tuple<Params...>>>,
                  "flowdsl: the value given to arg<Index>(...) does not convert to that parameter's type");
    TypedSlots<Params...>::template set<Index>(slots(), std::forward<Arg>(value));
    return static_cast<Derived&>(*this);
  }

 private:
  ArgumentPack& slots() { return parameters<Op>(*this->state_, this->id_).args; }
};

/// set(param, value) and set_bytes(param, bytes, size) of the registered handles
/// (RegisteredKernelNode, RegisteredLibraryNode): arguments by parameter name, checked against the
/// registered entry at run time, written into the slots of the node's `Op`.
template <class Derived, class Op, class Base>
class RegisteredArguments : public Base {
 public:
  RegisteredArguments(GraphState* state, NodeId id, const KernelInfo* entry) : Base(state, id), entry_(entry) {}

  /// \brief Binds the parameter called `param` to `value`. Parameters.
  ///
  /// `T` must be exactly the parameter's type (i32 is `std::int32_t`, f16 is `__half` or
  /// `flowdsl::half`, ...); a pointer parameter takes a pointer to its element type (a `const`
  /// parameter also takes a pointer to non-const).
  /// \throws UsageError naming the node and the parameter when there is no such parameter or
  ///         the type differs.
  template <class T>
  Derived& set(std::string_view param, T value) {
    static_assert(std::is_trivially_copyable_v<T>, "flowdsl: arguments must be trivially copyable");
    const ParamType given = param_type_of<T>();
    return set_slot(registered_slot(*entry_, this->name(), param, &given, sizeof(T)), &value, sizeof(T));
  }

  /// \brief Binds the parameter called `param` to the `size` bytes at `value` (its
  /// representation: a device address for pointers, the little-endian scalar otherwise).
  /// Parameters.
  /// \throws UsageError naming the node and the parameter when there is no such parameter or
  ///         `size` is not the parameter's size.
  Derived& set_bytes(std::string_view param, const void* value, std::size_t size) {
    return set_slot(registered_slot(*entry_, this->name(), param, nullptr, size), value, size);
  }

 protected:
  const KernelInfo* entry_;

 private:
  Derived& set_slot(std::size_t index, const void* value, std::size_t size) {
    parameters<Op>(*this->state_, this->id_).args.set(index, value, size);
    return static_cast<Derived&>(*this);
  }
};
}  // namespace detail

/// \brief The arguments of a new node of the registered kernel or call `entry`: one unbound,
/// zero slot a parameter, laid out as the node's own (what a graph's validation reports as
/// unset until bound).
ArgumentPack unbound_arguments(const KernelInfo& entry);

/// \brief What the two kernel handles share: the launch shape (structure).
template <class Derived>
class KernelHandleBase : public NodeHandleBase<Derived> {
 public:
  using NodeHandleBase<Derived>::NodeHandleBase;

  /// \brief Grid dimensions (blocks). Structure: a change selects another executable.
  Derived& grid(Dim3 grid) {
    KernelOp& o = op();
    o.launch.grid = grid;
    o.grid_set = true;
    return this->self();
  }
  /// \brief Block dimensions (threads). Structure.
  Derived& block(Dim3 block) {
    KernelOp& o = op();
    o.launch.block = block;
    o.block_set = true;
    return this->self();
  }
  /// \brief Dynamic shared memory per block in bytes. Structure.
  Derived& shared_memory(std::uint32_t bytes) {
    op().launch.shared_bytes = bytes;
    return this->self();
  }
  /// \brief Declares that the kernel waits for its producers before reading what they wrote
  /// (griddepcontrol.wait, cudaGridDependencySynchronize()), so that Graph::programmatic_edges
  /// may make its edges to other such kernels programmatic. Not hashed by itself.
  Derived& waits_for_producers(bool on = true) {
    op().waits_for_producers = on;
    return this->self();
  }
  /// \brief Declares that the kernel takes one parameter after its arguments, computed from them
  /// by `derived.compute` whenever they reach CUDA (see DerivedParameters). The node's function
  /// then has one parameter more than the node has arguments. Structure.
  Derived& derived(DerivedParameters derived) {
    op().derived = derived;
    return this->self();
  }
  /// \brief Thread-block cluster dimensions (LaunchShape::cluster): the grid must be a multiple
  /// of them. Structure.
  Derived& cluster(Dim3 cluster) {
    op().launch.cluster = cluster;
    return this->self();
  }
  /// \brief Grid, block and dynamic shared memory at once (no clusters). Structure.
  Derived& launch(Dim3 grid, Dim3 block, std::uint32_t shared_bytes = 0) {
    return launch(LaunchShape{grid, block, shared_bytes, Dim3()});
  }
  /// \brief The whole launch shape, clusters included. Structure.
  Derived& launch(const LaunchShape& shape) {
    KernelOp& o = op();
    o.launch = shape;
    o.grid_set = o.block_set = true;
    return this->self();
  }

 protected:
  KernelOp& op() { return detail::structure<KernelOp>(*this->state_, this->id_); }
};

/// \brief Handle to a kernel node whose kernel takes `Params...`.
template <class... Params>
class KernelNode : public detail::TypedArguments<KernelNode<Params...>, KernelOp, KernelHandleBase<KernelNode<Params...>>,
                                                 Params...> {
  using Base =
      detail::TypedArguments<KernelNode<Params...>, KernelOp, KernelHandleBase<KernelNode<Params...>>, Params...>;

 public:
  using Base::Base;

  /// \brief Binds the argument of the parameter called `param`, by the names the kernel is
  /// registered with in KernelRegistry::global() (the built-in kernels': `flowdsl info` lists
  /// them): for `scale`, `k.set("a", 3.0f)` is `k.arg<1>(3.0f)`. Parameters.
  /// \throws UsageError when the kernel is not registered, has no such parameter, or `value`
  ///         does not convert to that parameter's type.
  template <class Arg>
  KernelNode& set(std::string_view param, const Arg& value) {
    const std::size_t index =
        detail::parameter_index(detail::structure<KernelOp>(*this->state_, this->id_).function, sizeof...(Params),
                                this->name(), param);
    set_at(index, param, value, std::index_sequence_for<Params...>{});
    return *this;
  }

 private:
  template <class Arg, std::size_t... I>
  void set_at(std::size_t index, std::string_view param, const Arg& value, std::index_sequence<I...>) {
    (void)((index == I && (assign<I>(param, value), true)) || ...);
  }
  template <std::size_t I, class Arg>
  void assign(std::string_view param, const Arg& value) {
    using Param = std::tuple_element_t<I, std::tuple<Params...>>;
    if constexpr (std::is_convertible_v<const Arg&, Param>) {
      this->template arg<I>(value);
    } else {
      throw UsageError("flowdsl: node " + quoted_name(this->name()) + ": the value given for parameter " +
                       quoted_name(param) + " does not convert to its type");
    }
  }
};

namespace detail {
template <class... Params>
struct TypedLookup<KernelNode<Params...>> {
  template <class Operation>
  static std::string mismatch(const Operation& op) {
    return typed_mismatch<KernelOp, Params...>(op);
  }
};
}  // namespace detail

/// \brief Handle to a kernel node of a registered kernel (KernelInfo): the launch shape as for
/// KernelNode, arguments set by parameter name and checked against the registered types at run
/// time. This is how graphs read from JSON are built.
class RegisteredKernelNode
    : public detail::RegisteredArguments<RegisteredKernelNode, KernelOp, KernelHandleBase<RegisteredKernelNode>> {
 public:
  using RegisteredArguments::RegisteredArguments;

  /// \brief The registered kernel this node launches.
  const KernelInfo& kernel() const noexcept { return *entry_; }
};

/// \brief `kernel(...)` on graphs and bodies.
template <class Builder>
class KernelOp::Factory {
 public:
  /// \brief Declares a kernel node launching `function` (a `__global__` function). Set its launch
  /// shape (grid() and block(), or launch()) and bind its arguments with args().
  /// \param name unique node name within its body
  /// \param function the kernel
  /// \param kernel_name the kernel's name, for messages and dumps; by default the name it is
  ///        registered under in KernelRegistry::global(), if any (see kernel_name_of)
  template <class... Params>
  KernelNode<Params...> kernel(std::string name, void (*function)(Params...), std::string kernel_name = {}) {
    static_assert((std::is_trivially_copyable_v<Params> && ...),
                  "flowdsl: kernel parameters must be trivially copyable (CUDA copies them by value)");
    return declare<KernelNode<Params...>, Params...>(std::move(name), reinterpret_cast<const void*>(function),
                                                     DerivedParameters{}, std::move(kernel_name));
  }

  /// \brief Declares a kernel node launching `function`, whose last parameter is derived from
  /// the others by `derived` (see DerivedParameters): the node's arguments are the parameters
  /// before it, bound with args().
  /// \throws UsageError when `derived` computes nothing or is not the size of the last parameter.
  template <class... Params>
  auto kernel(std::string name, void (*function)(Params...), DerivedParameters derived, std::string kernel_name = {}) {
    static_assert(sizeof...(Params) > 0, "flowdsl: a kernel with derived parameters takes them as its last parameter");
    static_assert((std::is_trivially_copyable_v<Params> && ...),
                  "flowdsl: kernel parameters must be trivially copyable (CUDA copies them by value)");
    using Last = std::tuple_element_t<sizeof...(Params) - 1, std::tuple<Params...>>;
    if (!derived || derived.bytes != sizeof(Last)) {
      throw UsageError("flowdsl: kernel node '" + name + "': its derived parameters must be computed (compute set) and be " +
                       std::to_string(sizeof(Last)) + " bytes, the size of the kernel's last parameter");
    }
    return with_derived<std::tuple<Params...>>(std::move(name), reinterpret_cast<const void*>(function), derived,
                                               std::move(kernel_name),
                                               std::make_index_sequence<sizeof...(Params) - 1>{});
  }

  /// \brief Declares a kernel node launching the registered kernel `kernel`, whose parameters
  /// start unset. The node's kernel_name is the registered name. `kernel` must outlive the
  /// graph (entries of a KernelRegistry do).
  RegisteredKernelNode kernel(std::string name, const KernelInfo& kernel) {
    KernelOp op;
    op.function = kernel.function;
    op.kernel_name = kernel.name;
    op.info = &kernel;
    op.derived = kernel.derived;
    op.args = unbound_arguments(kernel);
    return builder().template add<RegisteredKernelNode>(std::move(name), std::move(op), &kernel);
  }

 private:
  Builder& builder() { return static_cast<Builder&>(*this); }
  template <class Tuple, std::size_t... I>
  KernelNode<std::tuple_element_t<I, Tuple>...> with_derived(std::string name, const void* function,
                                                             DerivedParameters derived, std::string kernel_name,
                                                             std::index_sequence<I...>) {
    return declare<KernelNode<std::tuple_element_t<I, Tuple>...>, std::tuple_element_t<I, Tuple>...>(
        std::move(name), function, derived, std::move(kernel_name));
  }
  // A node of a typed kernel taking `Args...` as its arguments. Their slots are laid out at
  // compile time and the operation made in place, unless they do not fit in the pack (or are
  // not valid, which append reports).
  template <class Handle, class... Args>
  Handle declare(std::string&& name, const void* function, DerivedParameters derived, std::string&& kernel_name) {
    if constexpr (fits_inline<Args...>()) {
      return builder().template add_in_place<Handle, KernelOp>(std::move(name), [&](KernelOp& op) noexcept {
        op.function = function;
        op.kernel_name = std::move(kernel_name);
        op.derived = derived;
        if constexpr (sizeof...(Args) > 0) op.args.lay_out(layout<Args...>);
      });
    } else {
      KernelOp op;
      op.function = function;
      op.kernel_name = std::move(kernel_name);
      op.derived = derived;
      (append_slot<Args>(op.args), ...);
      return builder().template add<Handle>(std::move(name), std::move(op));
    }
  }
  template <class T>
  static constexpr SlotKind slot_kind = std::is_same_v<std::remove_cv_t<T>, Condition> ? SlotKind::condition
                                        : std::is_pointer_v<T>                          ? SlotKind::pointer
                                                                                        : SlotKind::value;
  template <class... Args>
  static constexpr ArgumentPack::Layout<sizeof...(Args)> layout{{{sizeof(Args), alignof(Args), slot_kind<Args>}...}};
  template <class... Args>
  static constexpr bool fits_inline() {
    if constexpr (sizeof...(Args) == 0) {
      return true;
    } else {
      return layout<Args...>.fits();
    }
  }
  template <class T>
  static void append_slot(ArgumentPack& pack) {
    const T zero{};
    pack.append(&zero, sizeof(T), alignof(T), /*bound=*/false, slot_kind<T>);
  }
};

}  // namespace flowdsl
