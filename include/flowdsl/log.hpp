// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file log.hpp
/// \brief flowdsl's logger. Silent by default; never touches the application's default logger.

#include <memory>

namespace spdlog {
class logger;
}

namespace flowdsl {

/// \brief The library's logger, named "flowdsl".
///
/// If the application registered a spdlog logger named "flowdsl" before first use, that one is
/// used; otherwise flowdsl makes its own (stderr, level off) without registering it, so
/// spdlog::set_level() and the default logger are left alone. Traces of lowering,
/// instantiation, updates, hits and evictions are at debug level; a refused update, and the
/// re-instantiation it causes, at info level.
std::shared_ptr<spdlog::logger> logger();

/// \brief Replaces the library's logger. Null restores the default: the registered "flowdsl"
/// logger if there is one, else a silent one.
void set_logger(std::shared_ptr<spdlog::logger> logger);

}  // namespace flowdsl
