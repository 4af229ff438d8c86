// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/memset.hpp
/// \brief Memset nodes: 1-D fills of 1-, 2- or 4-byte elements.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/node_handle.hpp"

namespace flowdsl {

/// \brief 1-D memset of `count` elements of `element_size` bytes (1, 2 or 4) to `value`.
/// Structure: element_size. Parameters: dst, value, count.
struct MemsetOp {
  static constexpr std::string_view kind = "memset";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool device_launchable = true;  ///< CUDA allows it in a graph made for device launch
  template <class Builder>
  class Factory;

  void* dst = nullptr;
  std::uint32_t value = 0;
  std::uint32_t element_size = 1;
  std::size_t count = 0;

  /// Passes `dst` through `f` (symbols of a copied graph).
  template <class F>
  void remap_symbols(const F& f) {
    dst = reinterpret_cast<void*>(static_cast<std::uintptr_t>(f(reinterpret_cast<std::uintptr_t>(dst))));
  }
  /// Calls `visit(value)` for `dst` when it holds a symbol (graph memory).
  template <class Visit>
  void for_each_symbol(Visit&& visit) const {
    if (symbol::is_symbol(reinterpret_cast<std::uintptr_t>(dst))) visit(std::uint64_t{reinterpret_cast<std::uintptr_t>(dst)});
  }
};

/// \brief Handle to a memset node.
class MemsetNode : public NodeHandleBase<MemsetNode> {
 public:
  using NodeHandleBase::NodeHandleBase;
  /// \brief New destination, value and element count. Parameters.
  MemsetNode& set(void* dst, std::uint32_t value, std::size_t count) {
    MemsetOp& op = detail::parameters<MemsetOp>(*state_, id_);
    op.dst = dst;
    op.value = value;
    op.count = count;
    return *this;
  }
};

/// \brief `memset(...)` on graphs and bodies.
template <class Builder>
class MemsetOp::Factory {
 public:
  /// \brief Declares a 1-D memset of `count` elements of `element_size` bytes (1, 2 or 4).
  MemsetNode memset(std::string name, void* dst, std::uint32_t value, std::size_t count,
                    std::uint32_t element_size = 1) {
    return static_cast<Builder&>(*this).template add<MemsetNode>(std::move(name),
                                                                 MemsetOp{dst, value, element_size, count});
  }
};

}  // namespace flowdsl
