// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file fusion.hpp
/// \brief The fusion pass (Graph::fuse): runs of element-wise kernels become one generated
/// kernel, compiled with NVRTC for the device and cached.
///
/// \code
///   flowdsl::Graph g;
///   g.fuse(true);
///   auto s = flowdsl::kernels::scale(g, "scale", n, 2.0f, d_x, d_t);
///   auto c = flowdsl::kernels::clamp(g, "clamp", n, 0.0f, 1.0f, d_t, d_y).after(s);
///   runtime.launch(g, stream);   // one kernel: y = clamp(2 x); t kept in registers
///   s.arg<1>(3.0f);              // a parameter of the fused kernel: updated in place
/// \endcode
///
/// A *group* is a run of consecutive plan steps of one body whose kernels have an element
/// function (KernelInfo::element: the built-in fill, iota, scale, axpy, add, multiply, silu_mul,
/// clamp, cast and bias_activation), over the same element count, whose pointers either equal or miss each other's ranges.
/// The generated kernel evaluates, for each element, the members' functions in plan order with
/// the same float operations and roundings as the separate kernels, so its results are
/// bit-identical to theirs. A member's output is stored unless a later member overwrites it, or
/// later members read it and no node outside the group reads its bytes (then it stays in
/// registers and its memory keeps what it held). Nodes that may read any memory (host nodes,
/// kernels or library calls without declared extents) keep every output stored.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/node_parts.hpp"

namespace flowdsl {

struct Plan;

/// \brief Where one parameter of a fused kernel comes from: argument `param` of member `member`.
struct FusedArgument {
  std::uint32_t member = 0;
  std::uint32_t param = 0;
  friend bool operator==(const FusedArgument& a, const FusedArgument& b) {
    return a.member == b.member && a.param == b.param;
  }
};

/// \brief One group of nodes run as one generated kernel.
struct FusedGroup {
  std::vector<NodeId> members;            ///< consecutive steps of one body, in plan order
  std::vector<FusedArgument> arguments;   ///< the generated kernel's parameters, in order
  std::vector<bool> stored;               ///< per member: whether its output is stored
  std::string source;                     ///< the generated CUDA C++ (the compiled kernel's key)
  std::uint32_t vector_width = 1;         ///< elements a thread moves with one 16-byte access
  LaunchShape launch;                     ///< the fused node's grid and block
  /// The byte ranges of outputs kept in registers (Access::ptr, bytes), for the check that a
  /// parameter change does not make another node read them.
  std::vector<Access> elided;
  /// Which pointer arguments equal which (per member, per pointer parameter: the index of the
  /// first earlier one with the same address, or -1): the generated kernel depends on the
  /// pointers through this alone, so a change that keeps it keeps the kernel.
  std::vector<std::int32_t> pattern;
};

/// \brief A node the pass looked at and left out of every group, and why.
struct FusionNote {
  NodeId node = no_node;
  std::string reason;
};

/// \brief What the fusion pass found in a description.
struct FusionPlan {
  std::vector<FusedGroup> groups;
  std::vector<FusionNote> notes;  ///< kernels left out, in plan order
  /// Why no output is kept in registers, when none may be (a node that may read any memory).
  std::string stores_all;
  std::unordered_map<NodeId, std::uint32_t> group_of;  ///< member -> index in groups

  /// \brief The group holding `node`, or null.
  const FusedGroup* group(NodeId node) const {
    const auto it = group_of.find(node);
    return it == group_of.end() ? nullptr : &groups[it->second];
  }
};

/// \brief The groups the pass finds in `description` lowered to `plan`, whether or not the
/// description asks to fuse (what `flowdsl validate --fuse` prints).
FusionPlan plan_fusion(const Description& description, const Plan& plan);

/// \brief Text of the groups and notes of `fusion`, one line each, nodes named by path: what
/// `flowdsl validate --fuse` prints.
std::string describe_fusion(const Description& description, const FusionPlan& fusion);

/// \brief Counters of the fused kernels compiled and found since the process started.
struct FusedKernelStatistics {
  std::uint64_t compilations = 0;   ///< NVRTC compilations
  std::uint64_t memory_hits = 0;    ///< kernels found loaded already
  std::uint64_t disk_hits = 0;      ///< kernels loaded from the directory of compiled kernels
  double compile_seconds = 0;       ///< spent compiling, all compilations together
  double last_compile_seconds = 0;  ///< of the latest compilation
};
/// \brief The counters. Thread-safe.
FusedKernelStatistics fused_kernel_statistics();

/// \brief Starts NVRTC's one-time start-up (loading the library and its first compilation,
/// which takes 100-230 ms on the H200's host whatever is compiled) on a background thread and
/// returns at once, so that the process's first fused kernel compiles in the time of the later
/// ones. Call it early, when you know the graph will fuse: before the CUDA context is made and
/// buffers are allocated, which then overlap it. `flowdsl run|bench|profile` call it for a graph
/// that fuses, Python's `Graph.fuse(True)` too. Only the first call does anything; a failure to
/// load NVRTC is left for the first compilation to report. Thread-safe; no device needed.
void prepare_fused_kernel_compiler();

/// \brief Waits until the start-up that prepare_fused_kernel_compiler began has ended; returns at
/// once where none was begun or it has ended. The start-up is also waited for when the process
/// exits, but a host whose own shutdown unloads libraries first (an interpreter) calls this
/// before it: the Python module does, from an `atexit` hook. Thread-safe.
void wait_for_fused_kernel_compiler();

/// \brief Keeps compiled fused kernels in `directory` (made when missing) and looks there before
/// compiling, so that another process pays no compilation; empty: memory only. Defaults to
/// the environment's FLOWDSL_FUSION_CACHE, read when the first kernel is compiled. Thread-safe.
void set_fused_kernel_directory(std::string directory);

}  // namespace flowdsl
