// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the condition kernels.
#include "condition.cuh"
#include "../descriptor.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {
/// One warp, whatever the arguments: thread 0 sets the condition (or counts), so one block only.
struct OneWarp : Descriptor {
  static constexpr bool grid_exact = true;
  template <class... T, class... A>
  static LaunchShape shape(const A&...) {
    return {1, condition_block};
  }
};
struct OneWarpF32 : OneWarp {
  using instances = Instances<Types<float>>;
};
struct OneWarpI32 : OneWarp {
  using instances = Instances<Types<i32>>;
};
/// One block of decode_loop_block threads, whatever the arguments (a thread a sequence, strided).
struct DecodeLoopBlock : Descriptor {
  using instances = Instances<Types<i32>>;
  static constexpr bool grid_exact = true;
  template <class... T, class... A>
  static LaunchShape shape(const A&...) {
    return {1, decode_loop_block};
  }
};

#define FLOWDSL_CONDITION_KERNELS(X)                                                                                   \
  X(ConditionGreater, OneWarpF32, "condition.greater", "cond = value[0] > threshold ? 1 : 0 (NaN: 0); one warp",      \
    condition_greater_kernel<T...>, "value: 1", "threshold", "cond")                                                  \
  X(ConditionLess, OneWarpF32, "condition.less", "cond = value[0] < threshold ? 1 : 0 (NaN: 0); one warp",            \
    condition_less_kernel<T...>, "value: 1", "threshold", "cond")                                                     \
  X(ConditionCase, OneWarpI32, "condition.case",                                                                       \
    "cond = value[0] - lower if lower <= value[0] <= upper, else upper - lower + 1 (no case); one warp",               \
    condition_case_kernel<T...>, "value: 1", "lower", "upper", "cond")                                                \
  X(ConditionBucket, OneWarpI32, "condition.bucket",                                                                   \
    "cond = smallest b with 2^b >= count[0] (0 for count <= 1), at most cases - 1; one warp",                         \
    condition_bucket_kernel<T...>, "count: 1", "cases", "cond")                                                     \
  X(Count, OneWarpI32, "count",                                                                                    \
    "counter[0] += 1: how often the body holding it ran (a WHILE's iterations, a SWITCH case taken); one warp",        \
    count_kernel<T...>, "counter: 1")                                                                                  \
  X(DecodeLoopBegin, DecodeLoopBlock, "decode_loop.begin",                                                             \
    "step[0] = 0; cond = 1 when steps > 0 and a sequence has tokens remaining, else 0; one block",                    \
    decode_loop_begin_kernel<T...>, "sequences", "steps", "remaining: sequences", "step: 1", "cond")                   \
  X(DecodeLoopStep, DecodeLoopBlock, "decode_loop.step",                                                               \
    "each sequence with tokens remaining takes tokens[b] into out[b, step], advances, stops at end_token or its last " \
    "token; cond = any going on and step < steps; one block",                                                          \
    decode_loop_step_kernel<T...>, "sequences", "steps", "end_token", "tokens: sequences", "positions: sequences",     \
    "remaining: sequences", "out: sequences * steps", "step: 1", "cond")
FLOWDSL_CONDITION_KERNELS(FLOWDSL_KERNEL)
}  // namespace

void register_conditions(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_CONDITION_KERNELS); }
}  // namespace detail

KernelNode<const float*, float, Condition> condition_greater(Into g, std::string name, const float* value, float threshold,
                                                             Condition cond) {
  return detail::declare<detail::ConditionGreater, float>(g, std::move(name), value, threshold, cond);
}
KernelNode<const float*, float, Condition> condition_less(Into g, std::string name, const float* value, float threshold,
                                                          Condition cond) {
  return detail::declare<detail::ConditionLess, float>(g, std::move(name), value, threshold, cond);
}
KernelNode<const i32*, i32, i32, Condition> condition_case(Into g, std::string name, const i32* value, i32 lower, i32 upper,
                                                           Condition cond) {
  return detail::declare<detail::ConditionCase, i32>(g, std::move(name), value, lower, upper, cond);
}
KernelNode<const i32*, i32, Condition> condition_bucket(Into g, std::string name, const i32* count, i32 cases, Condition cond) {
  return detail::declare<detail::ConditionBucket, i32>(g, std::move(name), count, cases, cond);
}

KernelNode<i32*> count(Into g, std::string name, i32* counter) {
  return detail::declare<detail::Count, i32>(g, std::move(name), counter);
}

KernelNode<i32, i32, const i32*, i32*, Condition> decode_loop_begin(Into g, std::string name, i32 sequences, i32 steps,
                                                                    const i32* remaining, i32* step, Condition loop) {
  return detail::declare<detail::DecodeLoopBegin, i32>(g, std::move(name), sequences, steps, remaining, step, loop);
}

KernelNode<i32, i32, i32, const i32*, i32*, i32*, i32*, i32*, Condition> decode_loop_step(
    Into g, std::string name, i32 sequences, i32 steps, i32 end_token, const i32* tokens, i32* positions, i32* remaining,
    i32* out, i32* step, Condition loop) {
  return detail::declare<detail::DecodeLoopStep, i32>(g, std::move(name), sequences, steps, end_token, tokens, positions,
                                                      remaining, out, step, loop);
}

}  // namespace flowdsl::kernels
