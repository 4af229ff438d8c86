// SPDX-License-Identifier: Apache-2.0
// Names of launch kinds; recordings as text.
#include "flowdsl/launch_report.hpp"

namespace flowdsl {

const char* to_string(LaunchKind kind) noexcept {
  switch (kind) {
    case LaunchKind::hit: return "hit";
    case LaunchKind::updated: return "updated";
    case LaunchKind::instantiated: return "instantiated";
    case LaunchKind::reinstantiated: return "reinstantiated";
    case LaunchKind::debug: return "debug";
  }
  return "?";
}

std::string to_string(const Recording& r) {
  std::string text = std::to_string(r.kernels) + (r.kernels == 1 ? " kernel" : " kernels");
  if (r.others != 0) text += " and " + std::to_string(r.others) + (r.others == 1 ? " other node" : " other nodes");
  return text;
}

}  // namespace flowdsl
