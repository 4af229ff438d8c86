// SPDX-License-Identifier: Apache-2.0
// A registry of the built-in kernels (and, where the tests link flowdsl::nccl, the collectives),
// made once a test program: what graph files are checked against without touching the global one.
#pragma once

#include "flowdsl/kernels.hpp"
#include "flowdsl/registry.hpp"
#ifdef FLOWDSL_HAS_NCCL
#include "flowdsl/nccl.hpp"
#endif

namespace flowdsl_test {

inline const flowdsl::KernelRegistry& builtin_registry() {
  static const flowdsl::KernelRegistry& r = []() -> flowdsl::KernelRegistry& {
    static flowdsl::KernelRegistry registry;
    flowdsl::kernels::register_builtins(registry);
#ifdef FLOWDSL_HAS_NCCL
    flowdsl::nccl::register_calls(registry);
#endif
    return registry;
  }();
  return r;
}

}  // namespace flowdsl_test
