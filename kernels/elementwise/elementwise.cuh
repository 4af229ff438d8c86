// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels: a vectorised grid-stride transform and the operations built on it
// (fill, iota, scale, axpy, add, multiply, clamp), plus the fused bias + activation.
//
// transform() runs n divisible into 16-byte vectors at aligned pointers straight (one vector a
// thread when the grid has a thread for each). Otherwise it peels the elements before the first
// 16-byte boundary of the output, runs the middle as 16-byte vectors (UNROLL vectors in flight per
// thread), and finishes the tail element by element. When the inputs do not share the output's
// alignment it falls back to a scalar grid-stride loop, so any element-aligned pointers are
// correct.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

constexpr int elementwise_block = 256;
constexpr int elementwise_unroll = 4;

template <class A, class B>
struct Pair {
  const A* a;
  const B* b;
};

template <class... Ts>
constexpr int vector_width() {
  std::size_t largest = 1;
  ((largest = sizeof(Ts) > largest ? sizeof(Ts) : largest), ...);
  return static_cast<int>(16 / largest);
}

/// Elements of `out` before its first vector boundary, or n when some input cannot follow.
template <int V, class Out, class... In>
__device__ __forceinline__ std::int64_t scalar_head(std::int64_t n, const Out* out, const In*... in) {
  constexpr std::uintptr_t out_bytes = V * sizeof(Out);
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(out);
  std::int64_t head = static_cast<std::int64_t>(((out_bytes - address % out_bytes) % out_bytes) / sizeof(Out));
  head = head < n ? head : n;
  const bool vectorisable = (aligned<V * sizeof(In)>(in + head) && ...);
  return vectorisable ? head : n;
}

/// Loads U vectors of p (vector index base + u * blockDim.x; zeros past `vectors`).
template <int V, int U, class T>
__device__ __forceinline__ void load_vectors(Vec<T, V> (&dst)[U], const T* p, std::int64_t base, std::int64_t vectors) {
  const Vec<T, V>* pv = reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::int64_t v = base + static_cast<std::int64_t>(u) * blockDim.x;
    if (v < vectors) dst[u] = pv[v];
  }
}

/// The vectors [0, vectors) of out (from out + head, the inputs likewise): U vectors in flight a
/// thread, a block covering U * blockDim.x consecutive vectors, the grid striding.
template <int V, int U, class Op, class Out, class... In>
__device__ __forceinline__ void transform_vectors(std::int64_t head, std::int64_t vectors, const Op& op, Out* __restrict__ out,
                                                  const In* __restrict__... in) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  Vec<Out, V>* out_v = reinterpret_cast<Vec<Out, V>*>(out + head);
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U + threadIdx.x; base < vectors;
       base += stride * U) {
    // All loads first: U vectors of every input in flight at once.
    Vec<Out, V> result[U];
    if constexpr (sizeof...(In) == 0) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t first = head + (base + static_cast<std::int64_t>(u) * blockDim.x) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) result[u].v[j] = from_float<Out>(op(first + j));
      }
    } else if constexpr (sizeof...(In) == 1) {
      const auto* a = (in + head, ...);
      using A = std::remove_cv_t<std::remove_pointer_t<decltype(a)>>;
      Vec<A, V> va[U];
      load_vectors(va, a, base, vectors);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t first = head + (base + static_cast<std::int64_t>(u) * blockDim.x) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) result[u].v[j] = from_float<Out>(op(first + j, to_float(va[u].v[j])));
      }
    } else {
      const auto pointers = Pair<In...>{(in + head)...};
      using A = std::remove_cv_t<std::remove_pointer_t<decltype(pointers.a)>>;
      using B = std::remove_cv_t<std::remove_pointer_t<decltype(pointers.b)>>;
      Vec<A, V> va[U];
      Vec<B, V> vb[U];
      load_vectors(va, pointers.a, base, vectors);
      load_vectors(vb, pointers.b, base, vectors);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t first = head + (base + static_cast<std::int64_t>(u) * blockDim.x) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          result[u].v[j] = from_float<Out>(op(first + j, to_float(va[u].v[j]), to_float(vb[u].v[j])));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t v = base + static_cast<std::int64_t>(u) * blockDim.x;
      if (v < vectors) out_v[v] = result[u];
    }
  }
}

/// Vector v of out from vector v of each input (all of them vector-aligned): the whole work of a
/// thread in a grid with a thread for every vector.
template <int V, class Op, class Out, class... In>
__device__ __forceinline__ void transform_vector(std::int64_t v, const Op& op, Out* __restrict__ out,
                                                 const In* __restrict__... in) {
  const std::int64_t first = v * V;
  Vec<Out, V> result;
  if constexpr (sizeof...(In) == 0) {
#pragma unroll
    for (int j = 0; j < V; ++j) result.v[j] = from_float<Out>(op(first + j));
  } else if constexpr (sizeof...(In) == 1) {
    const auto* a = (in, ...);
    using A = std::remove_cv_t<std::remove_pointer_t<decltype(a)>>;
    const Vec<A, V> va = reinterpret_cast<const Vec<A, V>*>(a)[v];
#pragma unroll
    for (int j = 0; j < V; ++j) result.v[j] = from_float<Out>(op(first + j, to_float(va.v[j])));
  } else {
    const auto pointers = Pair<In...>{in...};
    using A = std::remove_cv_t<std::remove_pointer_t<decltype(pointers.a)>>;
    using B = std::remove_cv_t<std::remove_pointer_t<decltype(pointers.b)>>;
    const Vec<A, V> va = reinterpret_cast<const Vec<A, V>*>(pointers.a)[v];
    const Vec<B, V> vb = reinterpret_cast<const Vec<B, V>*>(pointers.b)[v];
#pragma unroll
    for (int j = 0; j < V; ++j) result.v[j] = from_float<Out>(op(first + j, to_float(va.v[j]), to_float(vb.v[j])));
  }
  reinterpret_cast<Vec<Out, V>*>(out)[v] = result;
}

/// out[i] = op(i, in[i]...) for i < n, zero to two inputs.
/// Op: `float operator()(std::int64_t i, float...) const`.
/// A grid with a thread for every vector (the launch rule's for small n) takes one vector a
/// thread: a short kernel then spreads over as many multiprocessors as it can, and each thread
/// runs no loop.
template <class Op, class Out, class... In>
__device__ __forceinline__ void transform(std::int64_t n, const Op& op, Out* __restrict__ out,
                                          const In* __restrict__... in) {
  static_assert(sizeof...(In) <= 2, "transform takes at most two inputs");
  constexpr int V = vector_width<Out, In...>();
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  // Whole vectors at aligned pointers, the common case: no head or tail to peel.
  if (n % V == 0 && aligned<V * sizeof(Out)>(out) && (aligned<V * sizeof(In)>(in) && ...)) {
    const std::int64_t vectors = n / V;
    if (vectors <= stride) {
      if (thread < vectors) transform_vector<V>(thread, op, out, in...);
    } else {
      transform_vectors<V, elementwise_unroll>(0, vectors, op, out, in...);
    }
    return;
  }
  const std::int64_t head = scalar_head<V>(n, out, in...);
  const std::int64_t vectors = (n - head) / V;
  const std::int64_t tail = head + vectors * V;

  for (std::int64_t i = thread; i < head; i += stride) out[i] = from_float<Out>(op(i, to_float(in[i])...));
  for (std::int64_t i = tail + thread; i < n; i += stride) out[i] = from_float<Out>(op(i, to_float(in[i])...));
  if (vectors <= stride) {
    transform_vectors<V, 1>(head, vectors, op, out, in...);
  } else {
    transform_vectors<V, elementwise_unroll>(head, vectors, op, out, in...);
  }
}

struct FillOp {
  float value;
  __device__ float operator()(std::int64_t) const { return value; }
};
struct IotaOp {
  float start, step;
  __device__ float operator()(std::int64_t i) const { return start + step * static_cast<float>(i); }
};
struct ScaleOp {
  float a;
  __device__ float operator()(std::int64_t, float x) const { return a * x; }
};
struct AxpyOp {
  float a;
  __device__ float operator()(std::int64_t, float x, float y) const { return fmaf(a, x, y); }
};
struct AddOp {
  __device__ float operator()(std::int64_t, float a, float b) const { return a + b; }
};
struct MultiplyOp {
  __device__ float operator()(std::int64_t, float a, float b) const { return a * b; }
};
struct SiluMulOp {
  __device__ float operator()(std::int64_t, float gate, float up) const { return activate(3, gate) * up; }
};
struct ClampOp {
  float lo, hi;
  __device__ float operator()(std::int64_t, float x) const { return fminf(fmaxf(x, lo), hi); }
};

template <class T>
__global__ void fill_kernel(std::int64_t n, float value, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, FillOp{value}, out); }
template <class T>
__global__ void iota_kernel(std::int64_t n, float start, float step, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, IotaOp{start, step}, out); }
template <class T>
__global__ void scale_kernel(std::int64_t n, float a, const T* x, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, ScaleOp{a}, y, x); }
template <class T>
__global__ void axpy_kernel(std::int64_t n, float a, const T* x, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, AxpyOp{a}, y, x, static_cast<const T*>(y)); }
template <class T>
__global__ void add_kernel(std::int64_t n, const T* a, const T* b, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, AddOp{}, out, a, b); }
template <class T>
__global__ void multiply_kernel(std::int64_t n, const T* a, const T* b, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, MultiplyOp{}, out, a, b); }
template <class T>
__global__ void silu_mul_kernel(std::int64_t n, const T* gate, const T* up, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, SiluMulOp{}, out, gate, up); }
template <class T>
__global__ void clamp_kernel(std::int64_t n, float lo, float hi, const T* x, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, ClampOp{lo, hi}, y, x); }

/// Activation Act (see Activation) in the precision the output keeps: float outputs use the
/// accurate expf and division; 16-bit outputs (8 or 11 bits kept) take silu through __expf
/// and __fdividef, whose few-ulp float error vanishes in the final rounding and which cost a
/// third of the instructions (accurate silu alone kept bf16 rows near the issue limit).
template <class T, int Act>
__device__ __forceinline__ float activate_as(float x) {
  if constexpr (Act == 3 && !std::is_same_v<T, float>) {
    return __fdividef(x, 1.0f + __expf(-x));
  } else {
    return activate(Act, x);
  }
}

/// Column of the element after `c` elements of `step` columns (step < cols): one compare,
/// no division.
__device__ __forceinline__ std::int32_t advance_column(std::int32_t c, std::int32_t step, std::int32_t cols) {
  c += step;
  return c >= cols ? c - cols : c;
}

/// Vectors in flight a thread in bias_activation: 2 fit 64 registers (8 blocks of 256 an
/// SM: 64 KB in flight an SM); 4 made ptxas spill.
constexpr int bias_activation_unroll = 2;

/// y[i] = act(x[i] + bias[i % cols]) for i < n over the flat array. x and y move in 16-byte
/// vectors (peeled head and tail, as in transform) whatever cols is, bias_activation_unroll
/// vectors in flight a thread. bias is read as a vector when BiasVectors (every vector then
/// starts on a column multiple of V), else element by element (from L1: it is cols
/// elements). The column of each vector is carried from the thread's previous one (a
/// grid-stride step is a fixed number of columns): no division per element.
template <int Act, bool BiasVectors, class T>
__device__ __forceinline__ void bias_activation_flat(std::int64_t n, std::int32_t cols, const T* __restrict__ x,
                                                     const T* __restrict__ bias, T* __restrict__ y, std::int64_t head) {
  constexpr int V = 16 / sizeof(T);
  constexpr int U = bias_activation_unroll;
  const std::int64_t vectors = (n - head) / V;
  const std::int64_t tail = head + vectors * V;
  const std::int64_t block = static_cast<std::int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  const std::int64_t thread = block * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * gridDim.y * blockDim.x;
  const auto element = [&](std::int64_t i) {
    y[i] = from_float<T>(activate_as<T, Act>(to_float(x[i]) + to_float(bias[i % cols])));
  };
  for (std::int64_t i = thread; i < head; i += stride) element(i);
  for (std::int64_t i = tail + thread; i < n; i += stride) element(i);

  const Vec<T, V>* x_v = reinterpret_cast<const Vec<T, V>*>(x + head);
  Vec<T, V>* y_v = reinterpret_cast<Vec<T, V>*>(y + head);
  // From one vector of a thread to its next (u to u + 1, and the last u to the next
  // iteration's first) is `stride` vectors: `step` columns.
  const std::int32_t step = static_cast<std::int32_t>((stride * V) % cols);
  std::int32_t column = static_cast<std::int32_t>((head + thread * V) % cols);
  for (std::int64_t base = thread; base < vectors; base += stride * U) {
    Vec<T, V> in[U], b[U];
    std::int32_t first[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t v = base + u * stride;
      first[u] = column;
      column = advance_column(column, step, cols);
      if (v < vectors) {
        in[u] = x_v[v];
        if constexpr (BiasVectors) b[u] = *reinterpret_cast<const Vec<T, V>*>(bias + first[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t v = base + u * stride;
      if (v >= vectors) break;
      if constexpr (!BiasVectors) {
        std::int32_t c = first[u];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          b[u].v[j] = bias[c];
          c = c + 1 == cols ? 0 : c + 1;
        }
      }
      Vec<T, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(activate_as<T, Act>(to_float(in[u].v[j]) + to_float(b[u].v[j])));
      y_v[v] = out;
    }
  }
}

template <int Act, class T>
__device__ __forceinline__ void bias_activation_as(std::int64_t n, std::int32_t cols, const T* x, const T* bias, T* y) {
  constexpr int V = 16 / sizeof(T);
  const std::int64_t head = scalar_head<V>(n, y, x);
  if (head == 0 && cols % V == 0 && aligned<16>(bias)) {
    bias_activation_flat<Act, true>(n, cols, x, bias, y, head);
  } else {
    bias_activation_flat<Act, false>(n, cols, x, bias, y, head);
  }
}

/// y[r, c] = act(x[r, c] + bias[c]), vectorised over the flat array (bias_activation_flat);
/// any grid, 1-D or 2-D, and any block. The bound of 1024 threads (allowed, not used) caps
/// registers at 64, so that 8 blocks of 256 fit an SM. The bound of 1024 threads (allowed, not used) caps
/// registers at 64, so that 8 blocks of 256 fit an SM and keep 4 vectors a thread in flight.
template <class T>
__global__ void __launch_bounds__(1024) bias_activation_kernel(std::int64_t rows, std::int32_t cols, std::int32_t act, const T* x, const T* bias, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  if (cols <= 0 || rows <= 0) return;
  const std::int64_t n = rows * cols;
  switch (act) {  // uniform: one loop per activation, no switch per element
    case 1: return bias_activation_as<1>(n, cols, x, bias, y);
    case 2: return bias_activation_as<2>(n, cols, x, bias, y);
    case 3: return bias_activation_as<3>(n, cols, x, bias, y);
    default: return bias_activation_as<0>(n, cols, x, bias, y);
  }
}

}  // namespace flowdsl::kernels::detail
