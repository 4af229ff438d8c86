// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/memcpy.hpp
/// \brief Memcpy nodes: 1-D copies between any two memories CUDA can address.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/node_handle.hpp"

namespace flowdsl {

/// \brief 1-D copy between any two memories CUDA can address (host↔device, device↔device);
/// the direction is inferred from the pointers (cudaMemcpyDefault).
/// Parameters: dst, src, bytes.
struct MemcpyOp {
  static constexpr std::string_view kind = "memcpy";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool device_launchable = true;  ///< CUDA allows it in a graph made for device launch
  template <class Builder>
  class Factory;

  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;

  /// Passes `dst` and `src` through `f` (symbols of a copied graph).
  template <class F>
  void remap_symbols(const F& f) {
    dst = reinterpret_cast<void*>(static_cast<std::uintptr_t>(f(reinterpret_cast<std::uintptr_t>(dst))));
    src = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(f(reinterpret_cast<std::uintptr_t>(src))));
  }
  /// Calls `visit(value)` for `dst` and `src` when they hold symbols (graph memory).
  template <class Visit>
  void for_each_symbol(Visit&& visit) const {
    for (const void* p : {static_cast<const void*>(dst), src}) {
      if (symbol::is_symbol(reinterpret_cast<std::uintptr_t>(p))) visit(std::uint64_t{reinterpret_cast<std::uintptr_t>(p)});
    }
  }
};

/// \brief Handle to a memcpy node.
class MemcpyNode : public NodeHandleBase<MemcpyNode> {
 public:
  using NodeHandleBase::NodeHandleBase;
  /// \brief New destination, source and size. Parameters.
  MemcpyNode& set(void* dst, const void* src, std::size_t bytes) {
    detail::parameters<MemcpyOp>(*state_, id_) = MemcpyOp{dst, src, bytes};
    return *this;
  }
};

/// \brief `memcpy(...)` on graphs and bodies.
template <class Builder>
class MemcpyOp::Factory {
 public:
  /// \brief Declares a 1-D copy of `bytes` bytes from `src` to `dst` (any direction).
  MemcpyNode memcpy(std::string name, void* dst, const void* src, std::size_t bytes) {
    return static_cast<Builder&>(*this).template add<MemcpyNode>(std::move(name), MemcpyOp{dst, src, bytes});
  }
};

}  // namespace flowdsl
