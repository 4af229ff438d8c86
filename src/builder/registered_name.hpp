// SPDX-License-Identifier: Apache-2.0
#pragma once
// The name a node's kernel or library call goes by in messages and dumps, and its registered entry.
#include <string>

#include "flowdsl/registry.hpp"

namespace flowdsl::detail {

/// `given` (the name the node was declared with) when not empty, else the name `function` is
/// registered under in KernelRegistry::global() (looked up when asked, so that declaring a node
/// costs no lookup), else empty.
inline std::string registered_name(const std::string& given, const void* function) {
  if (!given.empty()) return given;
  const KernelInfo* info = KernelRegistry::global().find_function(function);
  return info == nullptr ? std::string() : info->name;
}

/// The registered entry of a node's function: `info` when the node was declared from one (JSON,
/// or a registered kernel or call), else the entry `function` is registered under in `registry`
/// (null: none), else null.
inline const KernelInfo* registered_entry(const KernelInfo* info, const void* function, const KernelRegistry* registry) {
  if (info != nullptr) return info;
  return registry != nullptr ? registry->find_function(function) : nullptr;
}

}  // namespace flowdsl::detail
