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
    count_kernel<T...>, "counter: 1")
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

}  // namespace flowdsl::kernels
