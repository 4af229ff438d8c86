// Names of launch kinds.
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

}  // namespace flowdsl
