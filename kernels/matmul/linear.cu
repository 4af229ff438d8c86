// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of linear and linear_gated (linear.cuh): the small-batch products of
// a decoder's projections with weights in [out, in] layout.
#include "../descriptor.cuh"
#include "linear.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {

/// A warp an output feature (striding over the rest), enough blocks to cover n at most.
struct ByFeature : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32, i32 n, const A&...) {
    return {blocks_for(n, linear_block / 32), linear_block};
  }
};

#define FLOWDSL_LINEAR_KERNELS(X)                                                                                     \
  X(Linear, ByFeature, "linear", "y[m, n] = x[m, k] w[n, k]^T (weights [out, in]), a warp a feature; small m",      \
    (linear_kernel<T..., false>), "m", "n", "k", "x: m * k", "w: n * k", "y: m * n")                                 \
  X(LinearGated, ByFeature, "linear_gated",                                                                          \
    "y[m, n] = (silu(gate) * up)[m, k] w[n, k]^T, gate and up the halves of each row of gate_up",                    \
    (linear_kernel<T..., true>), "m", "n", "k", "gate_up: m * 2 * k", "w: n * k", "y: m * n")
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

FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(linear_gated)

}  // namespace flowdsl::kernels
