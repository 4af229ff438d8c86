// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/memory.hpp
/// \brief Memory nodes: scratch memory the graph allocates and frees itself (CUDA's memory alloc
/// and free nodes), at an address fixed for the life of the executable.
///
/// \code
///   flowdsl::Graph g;
///   auto tmp = g.alloc("tmp", n * sizeof(float));              // tmp.ptr<float>(): a symbolic address
///   auto produce = g.kernel("produce", square).launch(grid, block).args(d_x, tmp.ptr<float>(), n).after(tmp);
///   auto consume = g.kernel("consume", add_one).launch(grid, block).args(tmp.ptr<float>(), d_y, n).after(produce);
///   g.free("free_tmp", tmp).after(consume);                       // without it: freed by the next launch
/// \endcode
///
/// Every node that uses the memory (a kernel argument, a copy or fill operand, a declared access)
/// must run after the alloc and before its free; validation says which does not. A Graph holding
/// memory nodes gets executables of its own in a Runtime (addresses belong to an executable).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/error.hpp"
#include "flowdsl/node_handle.hpp"

namespace flowdsl {

class AllocNode;

/// \brief Allocates `bytes` bytes of device memory, of the device current when the executable
/// is made, each time the graph runs. Structure: bytes (CUDA cannot update an alloc node).
struct AllocOp {
  static constexpr std::string_view kind = "alloc";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool allowed_in_conditional_body = false;  ///< CUDA allows no memory nodes there
  static constexpr bool graph_memory = true;                  ///< its executables belong to one Graph
  template <class Builder>
  class Factory;

  std::size_t bytes = 0;

  /// What it allocates (graph code asks allocated_bytes()).
  std::size_t allocation() const noexcept { return bytes; }
};

/// \brief Frees the memory of an alloc node of the same body. `memory` is that alloc's symbolic
/// address (AllocNode::ptr()), fixed when the node is declared: CUDA cannot update a free node.
struct FreeOp {
  static constexpr std::string_view kind = "free";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool allowed_in_conditional_body = false;
  static constexpr bool graph_memory = true;
  template <class Builder>
  class Factory;

  std::uint64_t memory = 0;

  /// The memory it frees (graph code asks freed_memory()).
  std::uint64_t freed() const noexcept { return memory; }

  /// Passes `memory` through `f` (symbols of a copied graph).
  template <class F>
  void remap_symbols(const F& f) {
    memory = f(memory);
  }
  /// Calls `visit(memory)` when it is a symbol.
  template <class Visit>
  void for_each_symbol(Visit&& visit) const {
    if (symbol::is_symbol(memory)) visit(memory);
  }
};

namespace detail {
/// The symbol standing for node `id`'s native value (an alloc's address), made on first request.
std::uint64_t symbol_of(GraphState& state, NodeId id);
}  // namespace detail

/// \brief Handle to an alloc node: its memory through `ptr<T>()`.
class AllocNode : public NodeHandleBase<AllocNode> {
 public:
  using NodeHandleBase::NodeHandleBase;

  /// \brief The memory's address as a `T*`, to pass as a kernel argument, a copy or fill operand
  /// or a declared access; pointer arithmetic on it stays within the symbol (`ptr<float>() + 64`).
  /// On the host it is a stand-in (see `symbol`): launches replace it by the address CUDA gave the
  /// executable being launched. Never dereference it on the host.
  template <class T = void>
  T* ptr() const {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(detail::symbol_of(*state_, id_)));
  }

 private:
  template <class>
  friend class FreeOp::Factory;
};

/// \brief `alloc(...)` on graphs and bodies.
template <class Builder>
class AllocOp::Factory {
 public:
  /// \brief Declares an alloc node of `bytes` bytes. Nodes using its memory must run after it
  /// (declare the edges), and before its free if there is one; memory no free node frees is
  /// freed by the next launch of the executable (or when the executable is destroyed).
  AllocNode alloc(std::string name, std::size_t bytes) {
    return static_cast<Builder&>(*this).template add<AllocNode>(std::move(name), AllocOp{bytes});
  }
};

/// \brief `free(...)` on graphs and bodies.
template <class Builder>
class FreeOp::Factory {
 public:
  /// \brief Declares a free node releasing the memory of `alloc`, which must sit in the same body.
  /// Nodes using that memory must run before it.
  /// \throws UsageError when `alloc` is a handle of another graph.
  NodeHandle free(std::string name, const AllocNode& alloc) {
    Builder& builder = static_cast<Builder&>(*this);
    if (alloc.state_ != &builder.state()) {
      throw UsageError("flowdsl: free '" + name + "' is given an alloc node of another graph (node #" +
                       std::to_string(alloc.id()) + ")");
    }
    FreeOp op;
    op.memory = detail::symbol_of(builder.state(), alloc.id());
    return builder.template add<NodeHandle>(std::move(name), std::move(op));
  }
};

}  // namespace flowdsl
