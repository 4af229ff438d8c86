// SPDX-License-Identifier: Apache-2.0
// The library's logger: silent unless the application asks otherwise.
#include "log_internal.hpp"

#include <mutex>
#include <vector>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace flowdsl {
namespace {

struct LoggerSlot {
  std::mutex mutex;
  std::vector<std::shared_ptr<spdlog::logger>> kept;  // every logger ever installed stays alive
  std::atomic<spdlog::logger*> current{nullptr};
};

LoggerSlot& slot() {
  static LoggerSlot s;
  return s;
}

std::shared_ptr<spdlog::logger> make_default() {
  if (auto registered = spdlog::get("flowdsl")) return registered;
  auto own = std::make_shared<spdlog::logger>("flowdsl", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  own->set_level(spdlog::level::off);
  return own;
}

spdlog::logger* install(std::shared_ptr<spdlog::logger> logger) {
  LoggerSlot& s = slot();
  std::lock_guard lock(s.mutex);
  // Loggers are kept, not freed, when replaced: another thread may be logging through the old
  // one. set_logger is rare, so this costs a few objects at most.
  s.kept.push_back(logger ? std::move(logger) : make_default());
  s.current.store(s.kept.back().get(), std::memory_order_release);
  return s.kept.back().get();
}

}  // namespace

namespace detail {

spdlog::logger& log() {
  spdlog::logger* current = slot().current.load(std::memory_order_acquire);
  if (current == nullptr) {
    LoggerSlot& s = slot();
    std::unique_lock lock(s.mutex);
    current = s.current.load(std::memory_order_acquire);
    if (current == nullptr) {
      lock.unlock();
      current = install(nullptr);
    }
  }
  return *current;
}

}  // namespace detail

std::shared_ptr<spdlog::logger> logger() {
  spdlog::logger* current = &detail::log();
  LoggerSlot& s = slot();
  std::lock_guard lock(s.mutex);
  for (const auto& kept : s.kept) {
    if (kept.get() == current) return kept;
  }
  return nullptr;
}

void set_logger(std::shared_ptr<spdlog::logger> logger) { install(std::move(logger)); }

}  // namespace flowdsl
