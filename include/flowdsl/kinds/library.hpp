// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/library.hpp
/// \brief Library nodes: a call that enqueues work on a stream (cuBLASLt, NCCL, cuDNN, ...),
/// recorded into the node when the native graph is built.
///
/// \code
///   cublasStatus_t gemm(cudaStream_t s, const bf16* a, const bf16* b, bf16* c, int m, int n, int k);
///   ...
///   auto mm = g.library("gemm", gemm).args(d_a, d_b, d_c, m, n, k)
///                .reads(d_a, a_bytes).reads(d_b, b_bytes).writes(d_c, c_bytes).after(upload);
///   runtime.launch(g, stream);  // miss: gemm is called once, on a stream flowdsl records
///   mm.arg<2>(d_c2);            // a parameter: the next launch records gemm again and
///   runtime.launch(g, stream);  // updates the executable in place when it recorded the same nodes
/// \endcode
///
/// Only the call of this one node is recorded (stream capture into the node's own child graph):
/// the rest of the pipeline stays declared. The call must enqueue work on the stream it is given
/// and nothing else: a call that synchronises, allocates with cudaMalloc, uses the legacy stream
/// or forks to a stream it does not join back fails the build of the graph, naming the node.

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "flowdsl/kinds/kernel.hpp"

namespace flowdsl {

/// \brief A library call recorded from a stream: `function(stream, args...)`.
/// Structure: function, argument count. Parameters: args (a change records the call again).
struct LibraryOp {
  static constexpr std::string_view kind = "library";
  static constexpr std::uint32_t body_count = 0;
  template <class Builder>
  class Factory;

  const void* function = nullptr;  ///< the call's address (its identity)
  StreamInvoker invoke = nullptr;  ///< calls `function` with the arguments
  std::string call_name;           ///< for messages and dumps; empty: see call_name_of
  /// The registered entry, for nodes declared from one (its parameter names and extents); null
  /// for typed nodes, which find theirs in KernelRegistry::global() by function.
  const KernelInfo* info = nullptr;
  ArgumentPack args;

  /// Passes each pointer argument through `f` (symbols of a copied graph).
  template <class F>
  void remap_symbols(const F& f) {
    args.remap_symbols(f);
  }
  /// Calls `visit(value)` for each pointer argument that holds a symbol.
  template <class Visit>
  void for_each_symbol(Visit&& visit) const {
    args.for_each_symbol(visit);
  }
  /// The call and its arguments (kind_traits.hpp: registered_call).
  RegisteredCall registered_call() const { return {info, function, &args, "calls a library function"}; }
};

/// \brief The call's name for messages and dumps: the one the node was given, else the name
/// its function is registered under in KernelRegistry::global(), else empty.
std::string call_name_of(const LibraryOp& op);

/// \brief Handle to a library node whose call takes `Params...` after its stream: args(...) and
/// arg<Index>(...) bind its arguments (0: the first after the stream); a change records the call
/// again at the next launch.
template <class... Params>
class LibraryNode
    : public detail::TypedArguments<LibraryNode<Params...>, LibraryOp, NodeHandleBase<LibraryNode<Params...>>, Params...> {
 public:
  using detail::TypedArguments<LibraryNode<Params...>, LibraryOp, NodeHandleBase<LibraryNode<Params...>>,
                               Params...>::TypedArguments;
};

namespace detail {
template <class... Params>
struct TypedLookup<LibraryNode<Params...>> {
  template <class Operation>
  static std::string mismatch(const Operation& op) {
    return typed_mismatch<LibraryOp, Params...>(op);
  }
};
}  // namespace detail

/// \brief Handle to a library node of a registered library call (KernelRegistry::add_call):
/// arguments set by parameter name (set, set_bytes), checked against the registered types at run
/// time. This is how graphs read from JSON are built.
class RegisteredLibraryNode
    : public detail::RegisteredArguments<RegisteredLibraryNode, LibraryOp, NodeHandleBase<RegisteredLibraryNode>> {
 public:
  using RegisteredArguments::RegisteredArguments;

  /// \brief The registered call this node makes.
  const KernelInfo& entry() const noexcept { return *entry_; }
};

/// \brief `library(...)` on graphs and bodies.
template <class Builder>
class LibraryOp::Factory {
 public:
  /// \brief Declares a library node calling `call(stream, args...)` when the native graph is
  /// built (and on its own stream in eager and debug launches). Bind its arguments with args().
  /// \param name unique node name within its body
  /// \param call a function (or captureless lambda, `+[](cudaStream_t s, ...) {...}`) returning
  ///        void, a status (cudaError_t, cublasStatus_t, ...; 0: success) or bool (true: success)
  /// \param call_name for messages and dumps; by default the name it is registered under, if any
  template <class R, class... Params>
  LibraryNode<Params...> library(std::string name, R (*call)(CUstream_st*, Params...), std::string call_name = {}) {
    static_assert((std::is_trivially_copyable_v<Params> && ...),
                  "flowdsl: library call parameters must be trivially copyable (flowdsl keeps a copy of each)");
    LibraryOp op;
    op.function = reinterpret_cast<const void*>(call);
    op.invoke = &detail::invoke<R, Params...>;
    op.call_name = std::move(call_name);
    (append_slot<Params>(op.args), ...);
    return static_cast<Builder&>(*this).template add<LibraryNode<Params...>>(std::move(name), std::move(op));
  }

  /// \brief Declares a library node making the registered call `entry` (KernelRegistry::add_call),
  /// whose parameters start unset. `entry` must outlive the graph (registry entries do).
  /// \throws UsageError when `entry` is a kernel rather than a library call.
  RegisteredLibraryNode library(std::string name, const KernelInfo& entry) {
    if (!entry.is_call()) {
      throw UsageError("flowdsl: node '" + name + "': '" + entry.name + "' is a kernel, not a library call (use kernel())");
    }
    LibraryOp op;
    op.function = entry.function;
    op.invoke = entry.call;
    op.call_name = entry.name;
    op.info = &entry;
    op.args = unbound_arguments(entry);
    return static_cast<Builder&>(*this).template add<RegisteredLibraryNode>(std::move(name), std::move(op), &entry);
  }

 private:
  template <class T>
  static void append_slot(ArgumentPack& pack) {
    const T zero{};
    pack.append(&zero, sizeof(T), alignof(T), /*bound=*/false, std::is_pointer_v<T> ? SlotKind::pointer : SlotKind::value);
  }
};

}  // namespace flowdsl
