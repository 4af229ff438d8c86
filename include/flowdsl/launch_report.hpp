// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file launch_report.hpp
/// \brief What one Runtime::launch did; CUDA-free, so that dumps can show it without the runtime.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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
  LaunchReport() = default;
  LaunchReport(LaunchKind what, std::size_t updated, std::string why = {})
      : kind(what), nodes_updated(updated), reason(std::move(why)) {}

  LaunchKind kind = LaunchKind::hit;
  std::size_t nodes_updated = 0;
  /// For `reinstantiated`: the update refused and why, e.g. "node 'gemm': recorded body
  /// changed: 2 kernels → 3 kernels" (a library node whose call recorded other nodes).
  std::string reason;
};

/// \brief What a library node's call recorded into an executable (flowdsl::recordings): the
/// native nodes CUDA holds for it, as DOT shows them ("recorded: 1 kernel").
struct Recording {
  bool known = false;        ///< a library node of a cached executable; false for other nodes
  std::uint32_t kernels = 0;  ///< kernel nodes
  std::uint32_t others = 0;   ///< copies, memsets, event and other nodes
  /// The same native nodes (what an update in place needs; `known` aside).
  bool same_nodes(const Recording& o) const noexcept { return kernels == o.kernels && others == o.others; }
};

/// \brief "1 kernel", "2 kernels and 1 other node".
std::string to_string(const Recording& recording);

}  // namespace flowdsl
