// SPDX-License-Identifier: Apache-2.0
// Condition kernels: set a conditional node's value (IF, WHILE, SWITCH) from a value on the
// device. One block of one warp; thread 0 reads the value and sets the condition (CUDA leaves
// concurrent cudaGraphSetConditional calls undefined), the others do nothing.
#pragma once

#include <cstdint>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

constexpr std::uint32_t condition_block = 32;

/// 1 when value[0] > threshold, else 0 (NaN compares false: 0).
template <class T>
__global__ void __launch_bounds__(condition_block) condition_greater_kernel(const T* value, T threshold, Condition cond) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (threadIdx.x == 0) cond.set(value[0] > threshold ? 1u : 0u);
}

/// 1 when value[0] < threshold, else 0 (NaN compares false: 0).
template <class T>
__global__ void __launch_bounds__(condition_block) condition_less_kernel(const T* value, T threshold, Condition cond) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (threadIdx.x == 0) cond.set(value[0] < threshold ? 1u : 0u);
}

/// The case of value[0] among lower .. upper: value - lower inside, else upper - lower + 1, the
/// first value no SWITCH of that many cases has (0xFFFFFFFF when that does not fit 32 bits or
/// the range is empty).
template <class T>
__global__ void __launch_bounds__(condition_block) condition_case_kernel(const T* value, T lower, T upper, Condition cond) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (threadIdx.x != 0) return;
  const std::int64_t v = value[0];
  const std::int64_t span = static_cast<std::int64_t>(upper) - lower + 1;
  const bool inside = v >= lower && v <= upper;
  const std::int64_t outside = span >= 1 && span < 0xFFFFFFFFll ? span : 0xFFFFFFFFll;
  cond.set(static_cast<unsigned>(inside ? v - lower : outside));
}

/// The power-of-two bucket of count[0]: the smallest b with 2^b >= count (0 for count <= 1),
/// at most cases - 1 (0 when cases < 1).
template <class T>
__global__ void __launch_bounds__(condition_block) condition_bucket_kernel(const T* count, T cases, Condition cond) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (threadIdx.x != 0) return;
  const T c = count[0];
  // For c >= 2, 2^b >= c exactly when b >= bit length of c - 1.
  const int bucket = c <= 1 ? 0 : 32 - __clz(static_cast<unsigned>(c - 1));
  const int last = cases < 1 ? 0 : static_cast<int>(cases) - 1;
  cond.set(static_cast<unsigned>(bucket < last ? bucket : last));
}

/// counter[0] += 1, by thread 0: how often the body holding it ran (a WHILE's iterations, a
/// SWITCH's case taken), for the host to read after the launch.
template <class T>
__global__ void __launch_bounds__(condition_block) count_kernel(T* counter) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (threadIdx.x == 0) counter[0] += 1;
}

}  // namespace flowdsl::kernels::detail
