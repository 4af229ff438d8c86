// SPDX-License-Identifier: Apache-2.0
// Internal access to the library's logger for the SPDLOG_LOGGER_* macros.
#pragma once

#include <spdlog/spdlog.h>

#include "flowdsl/log.hpp"

namespace flowdsl::detail {

/// The current logger; cheap (one atomic load) once made.
spdlog::logger& log();

}  // namespace flowdsl::detail

/// Debug trace through flowdsl's logger; compiled out below SPDLOG_ACTIVE_LEVEL.
#define FLOWDSL_DEBUG(...) SPDLOG_LOGGER_DEBUG(&::flowdsl::detail::log(), __VA_ARGS__)
