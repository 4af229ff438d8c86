// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of linear and its forms (linear.cuh): the small-batch products of a
// decoder's projections with weights in [out, in] layout, fed by the norm before them or adding
// into the residual stream after them.
#include "../descriptor.cuh"
#include "linear.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {

/// A warp an output feature at a time (8 a block), or on the tensor-core path (16-bit types, k
/// a multiple of 32, more than one row) a block 16 features at a time. The grid is one wave of
/// resident blocks at most (linear_blocks_per_sm a multiprocessor), each block taking as many
/// rounds as the others: a block's prologue (the norm's scales, the staged rows) is paid once
/// for several rounds, and the last round is not a short one.
struct ByFeature : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32 m, i32 n, i32 k, const A&...) {
    const bool tiles = sizeof...(T) > 0 && (mma_type<T> && ...) && k % 32 == 0 && m > 1;
    const std::int64_t units = blocks_for(n, tiles ? linear_tile_features : linear_block / 32);
    const std::int64_t resident = std::int64_t{multiprocessors()} * linear_blocks_per_sm;
    const std::int64_t rounds = (units + resident - 1) / resident;
    return {blocks_for(units, rounds), linear_block};
  }
};

#define FLOWDSL_LINEAR_KERNELS(X)                                                                                     \
  X(Linear, ByFeature, "linear", "y[m, n] = x[m, k] w[n, k]^T (weights [out, in]), a warp a feature; small m",      \
    (linear_kernel<T..., false, false>), "m", "n", "k", "x: m * k", "w: n * k", "y: m * n")                          \
  X(LinearGated, ByFeature, "linear_gated",                                                                          \
    "y[m, n] = (silu(gate) * up)[m, k] w[n, k]^T, gate and up the halves of each row of gate_up",                    \
    (linear_kernel<T..., true, false>), "m", "n", "k", "gate_up: m * 2 * k", "w: n * k", "y: m * n")                 \
  X(LinearNorm, ByFeature, "linear_norm", "y[m, n] = (rms_norm(x) * g)[m, k] w[n, k]^T, the norm as Llama rounds it", \
    linear_norm_kernel<T...>, "m", "n", "k", "eps", "x: m * k", "g: k", "w: n * k", "y: m * n")                      \
  X(LinearResidual, ByFeature, "linear_residual", "y[m, n] += x[m, k] w[n, k]^T (the product rounded, then added)",    \
    (linear_kernel<T..., false, true>), "m", "n", "k", "x: m * k", "w: n * k", "y: m * n")                           \
  X(LinearGatedResidual, ByFeature, "linear_gated_residual",                                                         \
    "y[m, n] += (silu(gate) * up)[m, k] w[n, k]^T (the product rounded, then added)",                                \
    (linear_kernel<T..., true, true>), "m", "n", "k", "gate_up: m * 2 * k", "w: n * k", "y: m * n")
FLOWDSL_LINEAR_KERNELS(FLOWDSL_KERNEL)

}  // namespace

void register_linear(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_LINEAR_KERNELS); }

}  // namespace detail

template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear(Into g, std::string name, i32 m, i32 n, i32 k, const T* x, const T* w,
                                                         T* y) {
  return detail::declare<detail::Linear, T>(g, std::move(name), m, n, k, x, w, y);
}
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear_gated(Into g, std::string name, i32 m, i32 n, i32 k, const T* gate_up,
                                                               const T* w, T* y) {
  return detail::declare<detail::LinearGated, T>(g, std::move(name), m, n, k, gate_up, w, y);
}
template <class T>
LinearNormNode<T> linear_norm(Into g, std::string name, i32 m, i32 n, i32 k, float eps, const T* x, const T* norm_weight,
                              const T* w, T* y) {
  return detail::declare<detail::LinearNorm, T>(g, std::move(name), m, n, k, eps, x, norm_weight, w, y);
}
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear_residual(Into g, std::string name, i32 m, i32 n, i32 k, const T* x,
                                                                  const T* w, T* y) {
  return detail::declare<detail::LinearResidual, T>(g, std::move(name), m, n, k, x, w, y);
}
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear_gated_residual(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                        const T* gate_up, const T* w, T* y) {
  return detail::declare<detail::LinearGatedResidual, T>(g, std::move(name), m, n, k, gate_up, w, y);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear_gated)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear_norm)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear_residual)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear_gated_residual)

}  // namespace flowdsl::kernels
