// Small f32 kernels the `flowdsl` tool registers under fixed names, so that samples/*.json
// run. To be replaced by flowdsl::kernels::register_builtins once the built-in kernels land.
#pragma once

#include "flowdsl/registry.hpp"

namespace flowdsl::cli {

/// \brief Registers fill_f32, scale_f32, axpy_f32, multiply_add_f32 and clamp_f32.
/// \throws UsageError when one of the names is taken in `registry`.
void register_cli_kernels(KernelRegistry& registry);

}  // namespace flowdsl::cli
