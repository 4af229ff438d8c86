// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/empty.hpp
/// \brief Empty nodes: join points with no work and no parameters.

#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/node_handle.hpp"

namespace flowdsl {

/// \brief A node that does nothing: a join point. No fields.
struct EmptyOp {
  static constexpr std::string_view kind = "empty";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool device_launchable = true;  ///< CUDA allows it in a graph made for device launch
  template <class Builder>
  class Factory;
};

/// \brief `empty(...)` on graphs and bodies.
template <class Builder>
class EmptyOp::Factory {
 public:
  /// \brief Declares an empty node (a join point).
  NodeHandle empty(std::string name) {
    return static_cast<Builder&>(*this).template add<NodeHandle>(std::move(name), EmptyOp{});
  }
};

}  // namespace flowdsl
