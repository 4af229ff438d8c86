// Descriptor and launcher of the matrix multiply.
#include "descriptor.cuh"
#include "matmul.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {
/// f16 and bf16 on tensor cores, f32 on the FMA units: a block per output tile of either.
template <class T>
auto matmul_function() {
  if constexpr (std::is_same_v<T, float>) {
    return matmul_float_kernel;
  } else {
    return matmul_tensor_kernel<T>;
  }
}
struct ByTile : Descriptor {
  template <class T, class... A>
  static LaunchShape shape(i32 m, i32 n, const A&...) {
    if constexpr (std::is_same_v<T, float>) {
      return {Dim3(blocks_for(n, mmf::bn), blocks_for(m, mmf::bm)), mmf::threads};
    } else {
      return {Dim3(blocks_for(n, mm::bn), blocks_for(m, mm::bm)), mm::threads};
    }
  }
};
FLOWDSL_KERNEL(Matmul, ByTile, "matmul",
               "c[m, n] = act(a[m, k] b[k, n] + bias[n]), float accumulate; f16, bf16 on tensor cores, f32 on FMA units",
               matmul_function<T...>(), "m", "n", "k", "a: m * k", "b: k * n", "bias: n", "activation", "c: m * n")
}  // namespace

void register_matmul(KernelRegistry& registry) { register_kernels<void, Matmul>(registry); }
}  // namespace detail

template <class T>
KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, float*> matmul(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                                const T* a, const T* b, const float* bias,
                                                                                Activation act, float* c) {
  return detail::declare<detail::Matmul, T>(g, std::move(name), m, n, k, a, b, bias, static_cast<i32>(act), c);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(matmul)

}  // namespace flowdsl::kernels
