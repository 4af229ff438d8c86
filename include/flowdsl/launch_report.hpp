#pragma once
/// \file launch_report.hpp
/// \brief What one Runtime::launch did; CUDA-free, so that dumps can show it without the runtime.

#include <cstddef>
#include <cstdint>

namespace flowdsl {

/// \brief What one launch did.
enum class LaunchKind : std::uint8_t {
  hit,             ///< cached, nothing changed
  updated,         ///< cached, some nodes updated in place
  instantiated,    ///< not cached: emitted and instantiated
  reinstantiated,  ///< cached, but an update was refused: instantiated again
  debug,           ///< debug mode: run node by node with a check after each, the cache unused
};

/// \brief "hit", "updated", "instantiated", "reinstantiated" or "debug".
const char* to_string(LaunchKind kind) noexcept;

struct LaunchReport {
  LaunchKind kind = LaunchKind::hit;
  std::size_t nodes_updated = 0;
};

}  // namespace flowdsl
