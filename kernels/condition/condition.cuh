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

// A decode loop: a WHILE whose body is a decode step (its argmax or sampler writing each
// sequence's next token over its input) followed by decode_loop_step. One block, a thread per
// sequence and stride; a barrier gathers whether any sequence goes on, then thread 0 sets the
// condition.
constexpr std::uint32_t decode_loop_block = 256;

/// Ahead of the loop: step[0] = 0; the loop runs when steps > 0 and a sequence may still make a
/// token (remaining[b] > 0).
template <class T>
__global__ void __launch_bounds__(decode_loop_block)
    decode_loop_begin_kernel(T sequences, T steps, const T* remaining, T* step, Condition loop) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  bool going = false;
  for (T b = static_cast<T>(threadIdx.x); b < sequences; b += static_cast<T>(blockDim.x)) going |= remaining[b] > 0;
  going = __syncthreads_or(going);
  if (threadIdx.x != 0) return;
  step[0] = 0;
  loop.set(going && steps > 0 ? 1u : 0u);
}

/// After each step: a sequence with tokens remaining takes the one its step made (tokens[b]):
/// out[b, step] = it, its position advances, and it stops at the end token or its last token;
/// one without writes -1 and stays where it is (its step's cache write lands on its own next
/// slot, or nowhere past its pages). The loop goes on while a sequence may still make a token and
/// fewer than `steps` steps ran. A step[0] outside 0 .. steps - 1 changes nothing and ends the loop.
template <class T>
__global__ void __launch_bounds__(decode_loop_block)
    decode_loop_step_kernel(T sequences, T steps, T end_token, const T* tokens, T* positions, T* remaining, T* out,
                            T* step, Condition loop) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  const T s = step[0];  // read by every thread before thread 0 writes it, after the barrier
  if (s < 0 || s >= steps) {  // not a step of this loop (a counter set from outside): nothing taken
    if (threadIdx.x == 0) loop.set(0u);
    return;
  }
  bool going = false;
  for (T b = static_cast<T>(threadIdx.x); b < sequences; b += static_cast<T>(blockDim.x)) {
    T left = remaining[b];
    T token = -1;
    if (left > 0) {
      token = tokens[b];
      positions[b] += 1;
      left = token == end_token ? 0 : left - 1;
      remaining[b] = left;
    }
    out[std::int64_t{b} * steps + s] = token;
    going |= left > 0;
  }
  going = __syncthreads_or(going);
  if (threadIdx.x != 0) return;
  step[0] = s + 1;
  loop.set(going && s + 1 < steps ? 1u : 0u);
}

}  // namespace flowdsl::kernels::detail
