// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/host.hpp
/// \brief Host nodes: a host function called in stream order with its user data.

#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/node_handle.hpp"

namespace flowdsl {

/// \brief Host function called in stream order: `fn(user_data)`. It must not call CUDA.
/// Parameters: fn, user_data.
struct HostOp {
  static constexpr std::string_view kind = "host";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool allowed_in_conditional_body = false;  ///< CUDA has no host nodes there
  static constexpr bool reaches_any_memory = true;            ///< a host function may touch anything
  template <class Builder>
  class Factory;

  void (*fn)(void*) = nullptr;
  void* user_data = nullptr;
};

/// \brief Handle to a host-callback node.
class HostNode : public NodeHandleBase<HostNode> {
 public:
  using NodeHandleBase::NodeHandleBase;
  /// \brief New function and user data. Parameters.
  HostNode& set(void (*fn)(void*), void* user_data) {
    detail::parameters<HostOp>(*state_, id_) = HostOp{fn, user_data};
    return *this;
  }
};

/// \brief `host(...)` on graphs and bodies.
template <class Builder>
class HostOp::Factory {
 public:
  /// \brief Declares a host node calling `fn(user_data)` in stream order.
  HostNode host(std::string name, void (*fn)(void*), void* user_data = nullptr) {
    return static_cast<Builder&>(*this).template add<HostNode>(std::move(name), HostOp{fn, user_data});
  }
};

}  // namespace flowdsl
