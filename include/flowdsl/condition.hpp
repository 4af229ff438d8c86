// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file condition.hpp
/// \brief flowdsl::Condition: what a kernel takes to steer a conditional node (IF, WHILE, SWITCH)
/// of its graph from the device.
///
/// \code
///   __global__ void keep_going(const float* residual, float tolerance, flowdsl::Condition loop) {
///     if (threadIdx.x == 0 && blockIdx.x == 0) loop.set(*residual > tolerance ? 1u : 0u);
///   }
///   ...
///   auto loop = g.while_loop("solve", flowdsl::ConditionDefault{1});
///   loop.body().kernel("decide", keep_going).launch(1, 32).args(d_residual, 1e-4f, loop.condition());
/// \endcode
///
/// The kernel library's condition kernels (flowdsl/kernels.hpp: condition_greater, condition_less,
/// condition_case, condition_bucket) set a condition from a value in device memory.
///
/// Host code needs no CUDA header for this file; device code compiled by nvcc gets `set`.

#include <cstdint>
#include <optional>

namespace flowdsl {

/// \brief The value of a conditional node, as a kernel argument: trivially copyable, 8 bytes.
///
/// On the host it holds a stand-in (`symbol`) naming its conditional node; the value a kernel
/// receives is the native handle of the executable being launched (CUDA's
/// cudaGraphConditionalHandle). Only one thread of a launch should call `set` (concurrent calls
/// are undefined).
struct Condition {
  unsigned long long handle = 0;

#if defined(__CUDACC__)
  /// \brief Sets the value the conditional node reads: IF runs its body when it is non-zero
  /// (else the ELSE body, if any); WHILE runs its body again when it is non-zero; SWITCH runs
  /// case `value` (none when `value` is not below the number of cases).
  __device__ void set(unsigned value) const { cudaGraphSetConditional(handle, value); }
#endif
};

/// \brief The value a conditional node's condition takes at the start of every launch
/// (CUDA's cudaGraphCondAssignDefault). Without one, the value is 0 when the executable is made
/// and then whatever a kernel last set: set it upstream in the graph.
struct ConditionDefault {
  unsigned value = 0;
};

}  // namespace flowdsl
