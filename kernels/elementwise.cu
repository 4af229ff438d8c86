// Launchers and registration of the elementwise, cast and random-fill kernels.
#include "cast.cuh"
#include "elementwise.cuh"
#include "launch.cuh"
#include "random.cuh"

namespace flowdsl::kernels {
namespace {
using detail::declare;
using detail::suffix;

template <class... T>
Dim3 transform_grid(i64 n) {
  return blocks_for(n, std::int64_t{detail::elementwise_block} * detail::vector_width<T...>() * detail::elementwise_unroll);
}
constexpr std::uint32_t block = detail::elementwise_block;
}  // namespace

template <class T>
KernelNode<i64, float, T*> fill(Graph& g, std::string name, i64 n, float value, T* out) {
  return declare(g, std::move(name), detail::fill_kernel<T>, "fill", transform_grid<T>(n), block).args(n, value, out);
}
template <class T>
KernelNode<i64, float, float, T*> iota(Graph& g, std::string name, i64 n, float start, float step, T* out) {
  return declare(g, std::move(name), detail::iota_kernel<T>, "iota", transform_grid<T>(n), block).args(n, start, step, out);
}
template <class T>
KernelNode<i64, float, const T*, T*> scale(Graph& g, std::string name, i64 n, float a, const T* x, T* y) {
  return declare(g, std::move(name), detail::scale_kernel<T>, "scale", transform_grid<T>(n), block).args(n, a, x, y);
}
template <class T>
KernelNode<i64, float, const T*, T*> axpy(Graph& g, std::string name, i64 n, float a, const T* x, T* y) {
  return declare(g, std::move(name), detail::axpy_kernel<T>, "axpy", transform_grid<T>(n), block).args(n, a, x, y);
}
template <class T>
KernelNode<i64, const T*, const T*, T*> add(Graph& g, std::string name, i64 n, const T* a, const T* b, T* out) {
  return declare(g, std::move(name), detail::add_kernel<T>, "add", transform_grid<T>(n), block).args(n, a, b, out);
}
template <class T>
KernelNode<i64, const T*, const T*, T*> multiply(Graph& g, std::string name, i64 n, const T* a, const T* b, T* out) {
  return declare(g, std::move(name), detail::multiply_kernel<T>, "multiply", transform_grid<T>(n), block).args(n, a, b, out);
}
template <class T>
KernelNode<i64, float, float, const T*, T*> clamp(Graph& g, std::string name, i64 n, float lo, float hi, const T* x, T* y) {
  return declare(g, std::move(name), detail::clamp_kernel<T>, "clamp", transform_grid<T>(n), block).args(n, lo, hi, x, y);
}
template <class T>
KernelNode<i64, i32, i32, const T*, const T*, T*> bias_activation(Graph& g, std::string name, i64 rows, i32 cols,
                                                                   Activation act, const T* x, const T* bias, T* y) {
  const Dim3 grid(blocks_for(cols, block), static_cast<std::uint32_t>(std::max<i64>(1, std::min<i64>(rows, 65535))));
  return declare(g, std::move(name), detail::bias_activation_kernel<T>, "bias_activation", grid, block)
      .args(rows, cols, static_cast<i32>(act), x, bias, y);
}
template <class In, class Out>
KernelNode<i64, const In*, Out*> cast(Graph& g, std::string name, i64 n, const In* x, Out* y) {
  return declare(g, std::move(name), detail::cast_kernel<In, Out>, "cast", transform_grid<In, Out>(n), block).args(n, x, y);
}
template <class T>
KernelNode<i64, u64, float, float, T*> random_uniform(Graph& g, std::string name, i64 n, u64 seed, float lo, float hi, T* out) {
  return declare(g, std::move(name), detail::random_uniform_kernel<T>, "random_uniform", transform_grid<T>(n), block)
      .args(n, seed, lo, hi, out);
}
template <class T>
KernelNode<i64, u64, float, float, T*> random_normal(Graph& g, std::string name, i64 n, u64 seed, float mean, float stddev, T* out) {
  return declare(g, std::move(name), detail::random_normal_kernel<T>, "random_normal", transform_grid<T>(n), block)
      .args(n, seed, mean, stddev, out);
}

#define FLOWDSL_INSTANTIATE(T)                                                                                   \
  template KernelNode<i64, float, T*> fill(Graph&, std::string, i64, float, T*);                                 \
  template KernelNode<i64, float, float, T*> iota(Graph&, std::string, i64, float, float, T*);                   \
  template KernelNode<i64, float, const T*, T*> scale(Graph&, std::string, i64, float, const T*, T*);            \
  template KernelNode<i64, float, const T*, T*> axpy(Graph&, std::string, i64, float, const T*, T*);             \
  template KernelNode<i64, const T*, const T*, T*> add(Graph&, std::string, i64, const T*, const T*, T*);        \
  template KernelNode<i64, const T*, const T*, T*> multiply(Graph&, std::string, i64, const T*, const T*, T*);   \
  template KernelNode<i64, float, float, const T*, T*> clamp(Graph&, std::string, i64, float, float, const T*, T*); \
  template KernelNode<i64, i32, i32, const T*, const T*, T*> bias_activation(Graph&, std::string, i64, i32,      \
                                                                              Activation, const T*, const T*, T*); \
  template KernelNode<i64, u64, float, float, T*> random_uniform(Graph&, std::string, i64, u64, float, float, T*); \
  template KernelNode<i64, u64, float, float, T*> random_normal(Graph&, std::string, i64, u64, float, float, T*);
FLOWDSL_FOR_EACH_FLOAT_TYPE(FLOWDSL_INSTANTIATE)
#undef FLOWDSL_INSTANTIATE

#define FLOWDSL_INSTANTIATE_CAST(In, Out) \
  template KernelNode<i64, const In*, Out*> cast(Graph&, std::string, i64, const In*, Out*);
FLOWDSL_INSTANTIATE_CAST(float, __half)
FLOWDSL_INSTANTIATE_CAST(float, __nv_bfloat16)
FLOWDSL_INSTANTIATE_CAST(__half, float)
FLOWDSL_INSTANTIATE_CAST(__nv_bfloat16, float)
FLOWDSL_INSTANTIATE_CAST(__half, __nv_bfloat16)
FLOWDSL_INSTANTIATE_CAST(__nv_bfloat16, __half)
#undef FLOWDSL_INSTANTIATE_CAST

namespace detail {
namespace {
template <class T>
void register_typed(KernelRegistry& r) {
  const std::string s = std::string(".") + suffix<T>();
  r.add("fill" + s, fill_kernel<T>, {"n", "value", "out"}, "out[i] = value");
  r.add("iota" + s, iota_kernel<T>, {"n", "start", "step", "out"}, "out[i] = start + step * i");
  r.add("scale" + s, scale_kernel<T>, {"n", "a", "x", "y"}, "y[i] = a * x[i]");
  r.add("axpy" + s, axpy_kernel<T>, {"n", "a", "x", "y"}, "y[i] = a * x[i] + y[i]");
  r.add("add" + s, add_kernel<T>, {"n", "a", "b", "out"}, "out[i] = a[i] + b[i]");
  r.add("multiply" + s, multiply_kernel<T>, {"n", "a", "b", "out"}, "out[i] = a[i] * b[i]");
  r.add("clamp" + s, clamp_kernel<T>, {"n", "lo", "hi", "x", "y"}, "y[i] = min(max(x[i], lo), hi)");
  r.add("bias_activation" + s, bias_activation_kernel<T>, {"rows", "cols", "activation", "x", "bias", "y"},
        "y[r, c] = act(x[r, c] + bias[c]); activation 0 none, 1 relu, 2 gelu, 3 silu");
  r.add("random_uniform" + s, random_uniform_kernel<T>, {"n", "seed", "lo", "hi", "out"},
        "out[i] uniform in [lo, hi), counter-based on (seed, i)");
  r.add("random_normal" + s, random_normal_kernel<T>, {"n", "seed", "mean", "stddev", "out"},
        "out[i] normal(mean, stddev), counter-based on (seed, i)");
}
template <class In, class Out>
void register_cast(KernelRegistry& r) {
  r.add(std::string("cast.") + suffix<In>() + "." + suffix<Out>(), cast_kernel<In, Out>, {"n", "x", "y"},
        std::string("y[i] = (") + suffix<Out>() + ") x[i], round to nearest even");
}
}  // namespace

void register_elementwise(KernelRegistry& r) {
  register_typed<float>(r);
  register_typed<__half>(r);
  register_typed<__nv_bfloat16>(r);
  register_cast<float, __half>(r);
  register_cast<float, __nv_bfloat16>(r);
  register_cast<__half, float>(r);
  register_cast<__nv_bfloat16, float>(r);
  register_cast<__half, __nv_bfloat16>(r);
  register_cast<__nv_bfloat16, __half>(r);
}
}  // namespace detail

}  // namespace flowdsl::kernels
