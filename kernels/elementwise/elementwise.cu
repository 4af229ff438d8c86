// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the elementwise, cast and random-fill kernels.
#include "cast.cuh"
#include "../descriptor.cuh"
#include "elementwise.cuh"
#include "random.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {
/// A thread per elementwise_unroll vectors: the random fills (their blocks cover unrolled strides,
/// so a grid of a thread a vector would leave most of its blocks idle), and the others at large n.
struct Unrolled : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i64 n, const A&...) {
    return {blocks_for(n, std::int64_t{elementwise_block} * vector_width<T...>() * elementwise_unroll), elementwise_block};
  }
};
/// A thread per vector (vector_width elements) while that takes at most small_grid blocks: a
/// short kernel spreads over the multiprocessors and its threads run no loop (transform() takes
/// one vector a thread when the grid has a thread for each). Larger n: Unrolled's, the loads of
/// each thread in flight together.
struct Transform : Descriptor {
  static constexpr std::int64_t small_grid = 256;
  template <class... T, class... A>
  static LaunchShape shape(i64 n, const A&... args) {
    const std::uint32_t spread = blocks_for(n, std::int64_t{elementwise_block} * vector_width<T...>());
    return spread <= small_grid ? LaunchShape{spread, elementwise_block} : Unrolled::shape<T...>(n, args...);
  }
};
/// bias_activation: grid.x a block per 256 columns, grid.y a block per row up to 8192 (the
/// kernel runs on the flat array and strides; the sample graphs spell this shape out, and the
/// cap leaves each thread several vectors at large sizes: 2^29 elements, 8 vectors a thread).
struct ByColumn : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i64 rows, i32 cols, const A&...) {
    return {Dim3(blocks_for(cols, elementwise_block), static_cast<std::uint32_t>(std::max<i64>(1, std::min<i64>(rows, 8192)))),
            elementwise_block};
  }
};
struct Casts : Transform {
  using instances = CastTypes;
};

#define FLOWDSL_ELEMENTWISE_KERNELS(X)                                                                                     \
  X(Fill, Transform, "fill", "out[i] = value", fill_kernel<T...>, "n", "value", "out: n")                                    \
  X(Iota, Transform, "iota", "out[i] = start + step * i", iota_kernel<T...>, "n", "start", "step", "out: n")                 \
  X(Scale, Transform, "scale", "y[i] = a * x[i]", scale_kernel<T...>, "n", "a", "x: n", "y: n")                                 \
  X(Axpy, Transform, "axpy", "y[i] = a * x[i] + y[i]", axpy_kernel<T...>, "n", "a", "x: n", "y: n")                             \
  X(Add, Transform, "add", "out[i] = a[i] + b[i]", add_kernel<T...>, "n", "a: n", "b: n", "out: n")                                \
  X(Multiply, Transform, "multiply", "out[i] = a[i] * b[i]", multiply_kernel<T...>, "n", "a: n", "b: n", "out: n")                 \
  X(SiluMul, Transform, "silu_mul", "out[i] = silu(gate[i]) * up[i] (SwiGLU)", silu_mul_kernel<T...>, "n", "gate: n",   \
    "up: n", "out: n")                                                                                                       \
  X(Clamp, Transform, "clamp", "y[i] = min(max(x[i], lo), hi)", clamp_kernel<T...>, "n", "lo", "hi", "x: n", "y: n")           \
  X(BiasActivation, ByColumn, "bias_activation",                                                                           \
    "y[r, c] = act(x[r, c] + bias[c]); activation none, relu, gelu or silu", bias_activation_kernel<T...>, "rows", \
    "cols", "activation: " FLOWDSL_ACTIVATION_NAMES, "x: rows * cols", "bias: cols", "y: rows * cols")                                                                                \
  X(RandomUniform, Unrolled, "random_uniform", "out[i] uniform in [lo, hi), counter-based on (seed, i)",                 \
    random_uniform_kernel<T...>, "n", "seed", "lo", "hi", "out: n")                                                           \
  X(RandomNormal, Unrolled, "random_normal", "out[i] normal(mean, stddev), counter-based on (seed, i)",                  \
    random_normal_kernel<T...>, "n", "seed", "mean", "stddev", "out: n")                                                      \
  X(Cast, Casts, "cast", "y[i] = x[i] in the second type, rounding to nearest even", cast_kernel<T...>, "n", "x: n", "y: n")
FLOWDSL_ELEMENTWISE_KERNELS(FLOWDSL_KERNEL)

}  // namespace

// Element functions (KernelInfo::element): the operations of the ops above, float in and out,
// written as nvcc compiles them: iota's `start + step * i` is contracted into one fma.
#define FLOWDSL_ELEMENT(Desc, text)                   \
  template <>                                        \
  struct ElementFunction<Desc> {                     \
    static constexpr const char* value = text;       \
  };
FLOWDSL_ELEMENT(Fill, "value")
FLOWDSL_ELEMENT(Iota, "fmaf(step, (float)i, start)")
FLOWDSL_ELEMENT(Scale, "a * x")
FLOWDSL_ELEMENT(Axpy, "fmaf(a, x, y)")
FLOWDSL_ELEMENT(Add, "a + b")
FLOWDSL_ELEMENT(Multiply, "a * b")
FLOWDSL_ELEMENT(SiluMul, "activate(3, gate) * up")
FLOWDSL_ELEMENT(Clamp, "fminf(fmaxf(x, lo), hi)")
FLOWDSL_ELEMENT(Cast, "x")
FLOWDSL_ELEMENT(BiasActivation, "activate(activation, x + bias[i % cols])")
#undef FLOWDSL_ELEMENT

void register_elementwise(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_ELEMENTWISE_KERNELS); }
}  // namespace detail

template <class T>
KernelNode<i64, float, T*> fill(Into g, std::string name, i64 n, float value, T* out) {
  return detail::declare<detail::Fill, T>(g, std::move(name), n, value, out);
}
template <class T>
KernelNode<i64, float, float, T*> iota(Into g, std::string name, i64 n, float start, float step, T* out) {
  return detail::declare<detail::Iota, T>(g, std::move(name), n, start, step, out);
}
template <class T>
KernelNode<i64, float, const T*, T*> scale(Into g, std::string name, i64 n, float a, const T* x, T* y) {
  return detail::declare<detail::Scale, T>(g, std::move(name), n, a, x, y);
}
template <class T>
KernelNode<i64, float, const T*, T*> axpy(Into g, std::string name, i64 n, float a, const T* x, T* y) {
  return detail::declare<detail::Axpy, T>(g, std::move(name), n, a, x, y);
}
template <class T>
KernelNode<i64, const T*, const T*, T*> add(Into g, std::string name, i64 n, const T* a, const T* b, T* out) {
  return detail::declare<detail::Add, T>(g, std::move(name), n, a, b, out);
}
template <class T>
KernelNode<i64, const T*, const T*, T*> multiply(Into g, std::string name, i64 n, const T* a, const T* b, T* out) {
  return detail::declare<detail::Multiply, T>(g, std::move(name), n, a, b, out);
}
template <class T>
KernelNode<i64, const T*, const T*, T*> silu_mul(Into g, std::string name, i64 n, const T* gate, const T* up, T* out) {
  return detail::declare<detail::SiluMul, T>(g, std::move(name), n, gate, up, out);
}
template <class T>
KernelNode<i64, float, float, const T*, T*> clamp(Into g, std::string name, i64 n, float lo, float hi, const T* x, T* y) {
  return detail::declare<detail::Clamp, T>(g, std::move(name), n, lo, hi, x, y);
}
template <class T>
KernelNode<i64, i32, i32, const T*, const T*, T*> bias_activation(Into g, std::string name, i64 rows, i32 cols,
                                                                   Activation act, const T* x, const T* bias, T* y) {
  return detail::declare<detail::BiasActivation, T>(g, std::move(name), rows, cols, static_cast<i32>(act), x, bias, y);
}
template <class In, class Out>
KernelNode<i64, const In*, Out*> cast(Into g, std::string name, i64 n, const In* x, Out* y) {
  return detail::declare<detail::Cast, In, Out>(g, std::move(name), n, x, y);
}
template <class T>
KernelNode<i64, u64, float, float, T*> random_uniform(Into g, std::string name, i64 n, u64 seed, float lo, float hi, T* out) {
  return detail::declare<detail::RandomUniform, T>(g, std::move(name), n, seed, lo, hi, out);
}
template <class T>
KernelNode<i64, u64, float, float, T*> random_normal(Into g, std::string name, i64 n, u64 seed, float mean, float stddev, T* out) {
  return detail::declare<detail::RandomNormal, T>(g, std::move(name), n, seed, mean, stddev, out);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(fill)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(iota)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(scale)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(axpy)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(add)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(multiply)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(silu_mul)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(clamp)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(bias_activation)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(random_uniform)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(random_normal)
#define FLOWDSL_INSTANTIATE_CAST(In, Out) FLOWDSL_INSTANTIATE(cast, In, Out)
FLOWDSL_FOR_EACH_CAST(FLOWDSL_INSTANTIATE_CAST)
#undef FLOWDSL_INSTANTIATE_CAST

}  // namespace flowdsl::kernels
