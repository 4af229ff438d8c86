// What the launcher translation units share: declaring a kernel node with a launch shape,
// and the per-file registration hooks that register_builtins() calls.
#pragma once

#include <string>

#include "flowdsl/kernels.hpp"

namespace flowdsl::kernels::detail {

template <class... P>
KernelNode<P...> declare(Graph& g, std::string name, void (*function)(P...), std::string kernel_name, Dim3 grid,
                         Dim3 block, std::uint32_t shared_bytes = 0) {
  return g.kernel(std::move(name), function, std::move(kernel_name)).launch(grid, block, shared_bytes);
}

/// Type suffixes of registered names: "f32", "f16", "bf16".
template <class T>
const char* suffix();
template <>
inline const char* suffix<float>() { return "f32"; }
template <>
inline const char* suffix<__half>() { return "f16"; }
template <>
inline const char* suffix<__nv_bfloat16>() { return "bf16"; }

/// The finishing node of a two-pass sum (reduce.cu): out[0] = sum of partials (or its sqrt).
KernelNode<std::int32_t, const double*, std::int32_t, float*> declare_sum_finish(Graph& g, std::string name, std::int32_t count,
                                                                                const double* partials, bool take_sqrt,
                                                                                float* out);

void register_elementwise(KernelRegistry& registry);
void register_reductions(KernelRegistry& registry);
void register_batching(KernelRegistry& registry);
void register_simulation(KernelRegistry& registry);
void register_matmul(KernelRegistry& registry);

}  // namespace flowdsl::kernels::detail

#define FLOWDSL_FOR_EACH_FLOAT_TYPE(X) X(float) X(__half) X(__nv_bfloat16)
