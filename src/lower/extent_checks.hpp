// SPDX-License-Identifier: Apache-2.0
// Pointer arguments of registered entries (kernels and library calls) by their declared
// extents: checked against the named buffers they point into, and turned into accesses.
#pragma once

#include <vector>

#include "lowering_facets.hpp"

namespace flowdsl::lowering {

/// The registered entry of a node: `declared` (the one it was made from), else the one
/// registered globally with `function`; null when none matches its arguments.
const KernelInfo* registered_entry(const KernelInfo* declared, const void* function, const ArgumentPack& args,
                                   KernelInfos& kernels);

/// Reports, at "args/<name>", the arguments of `entry` refused by value (check_argument_values)
/// and, where the graph names buffers, pointer arguments whose extents (evaluated over `args`
/// and `launch`) run past the named buffer they point into or exceed 2^63 elements.
void check_arguments(const ArgumentPack& args, const LaunchShape& launch, const KernelInfo& entry, NodeCheck& check);

/// The accesses the pointer arguments' extents imply (bytes 0 where the extent is data-dependent).
void extent_accesses(const ArgumentPack& args, const LaunchShape& launch, const KernelInfo& entry,
                     std::vector<Access>& out);

}  // namespace flowdsl::lowering
