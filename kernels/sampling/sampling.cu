// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the sampling kernels: sample_top_p, a token a row from logits.
#include <algorithm>

#include "../descriptor.cuh"
#include "sampling.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {

/// A block a row, striding over the rows past sampling_max_blocks.
constexpr std::uint32_t sampling_max_blocks = 1024;
struct ByRowBlock : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32 rows, const A&...) {
    return {std::min(blocks_for(rows, 1), sampling_max_blocks), sampling_block};
  }
};

#define FLOWDSL_SAMPLING_KERNELS(X)                                                                                 \
  X(SampleTopP, ByRowBlock, "sample_top_p",                                                                         \
    "out[r] = a token drawn from softmax(logits[r] / temperature) within top_k and top_p, Philox4x32-10 on (seed, " \
    "step[0], r); greedy for temperature <= 0",                                                                     \
    sample_top_p_kernel<T...>, "rows", "cols", "temperature", "top_k", "top_p", "seed", "step: 1",                  \
    "logits: rows * cols", "out: rows")
FLOWDSL_SAMPLING_KERNELS(FLOWDSL_KERNEL)

}  // namespace

void register_sampling(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_SAMPLING_KERNELS); }

}  // namespace detail

template <class T>
KernelNode<i32, i32, float, i32, float, u64, const i32*, const T*, i32*> sample_top_p(
    Into g, std::string name, i32 rows, i32 cols, float temperature, i32 top_k, float top_p, u64 seed, const i32* step,
    const T* logits, i32* out) {
  return detail::declare<detail::SampleTopP, T>(g, std::move(name), rows, cols, temperature, top_k, top_p, seed, step,
                                                logits, out);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(sample_top_p)

}  // namespace flowdsl::kernels
