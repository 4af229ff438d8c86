// SPDX-License-Identifier: Apache-2.0
// Compiled by the C++ compiler, so that spdlog's headers stay out of the CUDA sources.
#include "debug_log.hpp"

#include <spdlog/spdlog.h>

#include "flowdsl/log.hpp"

namespace flowdsl_test {

DebugLog::DebugLog() : previous_(static_cast<int>(flowdsl::logger()->level())) {
  flowdsl::logger()->set_level(spdlog::level::debug);
}

DebugLog::~DebugLog() { flowdsl::logger()->set_level(static_cast<spdlog::level::level_enum>(previous_)); }

}  // namespace flowdsl_test
