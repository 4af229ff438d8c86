// SPDX-License-Identifier: Apache-2.0
// What the profiler keeps of a graph: per plan position the node's path, kind, structure,
// dependencies and a kernel's arguments as text.
#pragma once

#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/profiler.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl::profiling {

/// The nodes of `description`, lowered as `plan`, by plan position (name, uid and hash left to
/// the caller).
std::vector<ProfiledNode> profiled_nodes(const Description& description, const Plan& plan,
                                         const KernelRegistry& registry);

/// A kernel node's arguments as text, by parameter name where `registry` (or the node's own
/// entry) knows the kernel, "#i" otherwise; empty for other kinds. Pointers into a named buffer
/// read "x+256", symbols "'scratch' + 64" or "condition of 'loop'", other pointers "0x7f...".
NamedValues kernel_arguments(const Description& description, NodeId id, const KernelRegistry& registry);

}  // namespace flowdsl::profiling
