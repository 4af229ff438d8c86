// Launcher and registration of the matrix multiply.
#include "launch.cuh"
#include "matmul.cuh"

namespace flowdsl::kernels {

template <class T>
KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, float*> matmul(Graph& g, std::string name, i32 m, i32 n, i32 k,
                                                                                const T* a, const T* b, const float* bias,
                                                                                Activation act, float* c) {
  if constexpr (std::is_same_v<T, float>) {
    return detail::declare(g, std::move(name), detail::matmul_float_kernel, "matmul",
                           Dim3(blocks_for(n, detail::mmf::bn), blocks_for(m, detail::mmf::bm)), detail::mmf::threads)
        .args(m, n, k, a, b, bias, static_cast<i32>(act), c);
  } else {
    return detail::declare(g, std::move(name), detail::matmul_tensor_kernel<T>, "matmul",
                           Dim3(blocks_for(n, detail::mm::bn), blocks_for(m, detail::mm::bm)), detail::mm::threads)
        .args(m, n, k, a, b, bias, static_cast<i32>(act), c);
  }
}

#define FLOWDSL_INSTANTIATE(T)                                                                                 \
  template KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, float*> matmul(                   \
      Graph&, std::string, i32, i32, i32, const T*, const T*, const float*, Activation, float*);
FLOWDSL_FOR_EACH_FLOAT_TYPE(FLOWDSL_INSTANTIATE)
#undef FLOWDSL_INSTANTIATE

namespace detail {
void register_matmul(KernelRegistry& r) {
  const std::vector<std::string> params = {"m", "n", "k", "a", "b", "bias", "activation", "c"};
  r.add("matmul.f32", matmul_float_kernel, params, "c[m, n] = act(a[m, k] b[k, n] + bias[n]), float on FMA units");
  r.add("matmul.f16", matmul_tensor_kernel<__half>, params, "c = act(a b + bias), half in, float accumulate, tensor cores");
  r.add("matmul.bf16", matmul_tensor_kernel<__nv_bfloat16>, params,
        "c = act(a b + bias), bfloat16 in, float accumulate, tensor cores");
}
}  // namespace detail

}  // namespace flowdsl::kernels
