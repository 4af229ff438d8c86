// SPDX-License-Identifier: Apache-2.0
// The fusion pass's parts that lowering, emission and updates use (flowdsl/fusion.hpp has the
// public side): the check that parameter changes keep a plan's groups, the groups' part of the
// topology hash, the kernel node standing for a group, and the compiled kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flowdsl/fusion.hpp"
#include "flowdsl/kinds.hpp"
#include "flowdsl/plan.hpp"

namespace flowdsl::lowering {

/// Whether every group of `fusion` is still what the pass would make after parameter changes of
/// the nodes `changed`: each touched group's members still fuse into the same kernel with the
/// same arguments and the same outputs kept in registers, and no other changed node touches an
/// output kept in registers. False: lower again. Costs O(changed nodes + touched groups' members).
bool fusion_holds(const Description& description, const FusionPlan& fusion, const std::vector<NodeId>& changed);

/// `topology` with the groups mixed in (their steps, generated kernels and stored outputs).
std::uint64_t hash_fusion(std::uint64_t topology, const Description& description, const Plan& plan,
                          const FusionPlan& fusion);

/// The kernel node that runs `group`: `kernel` (a cudaKernel_t) with the group's launch shape
/// and its arguments taken from the members' current ones. Made by the kernel kind
/// (kinds/kernel/lower.cpp).
Operation fused_operation(const Description& description, const FusedGroup& group, const void* kernel);

/// The compiled kernel (a cudaKernel_t) of a group's source for `device`: loaded already, read
/// from the directory of compiled kernels, or compiled with NVRTC. Thread-safe.
/// \throws CudaError naming `path` when NVRTC or the loader fail.
const void* fused_kernel(const std::string& source, int device, const std::string& path);

}  // namespace flowdsl::lowering
