// Elementwise kernels: a vectorised grid-stride transform and the operations built on it
// (fill, iota, scale, axpy, add, multiply, clamp), plus the fused bias + activation.
//
// transform() peels the elements before the first 16-byte boundary of the output, runs the
// middle as 16-byte vectors (UNROLL vectors in flight per thread), and finishes the tail
// element by element. When the inputs do not share the output's alignment it falls back to a
// scalar grid-stride loop, so any element-aligned pointers are correct.
#pragma once

#include <algorithm>

#include "common.cuh"

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

/// out[i] = op(i, in[i]...) for i < n, zero to two inputs.
/// Op: `float operator()(std::int64_t i, float...) const`.
template <class Op, class Out, class... In>
__device__ __forceinline__ void transform(std::int64_t n, const Op& op, Out* __restrict__ out,
                                          const In* __restrict__... in) {
  static_assert(sizeof...(In) <= 2, "transform takes at most two inputs");
  constexpr int V = vector_width<Out, In...>();
  constexpr int U = elementwise_unroll;
  const std::int64_t head = scalar_head<V>(n, out, in...);
  const std::int64_t vectors = (n - head) / V;
  const std::int64_t tail = head + vectors * V;
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;

  for (std::int64_t i = thread; i < head; i += stride) out[i] = from_float<Out>(op(i, to_float(in[i])...));
  for (std::int64_t i = tail + thread; i < n; i += stride) out[i] = from_float<Out>(op(i, to_float(in[i])...));

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
__global__ void clamp_kernel(std::int64_t n, float lo, float hi, const T* x, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, ClampOp{lo, hi}, y, x); }

/// y[r, c] = act(x[r, c] + bias[c]). Rows are spread over grid.y (grid-stride), columns over
/// grid.x; no division per element. Vectorised when every row starts on a 16-byte boundary.
template <class T>
__global__ void bias_activation_kernel(std::int64_t rows, std::int32_t cols, std::int32_t act, const T* x, const T* bias, T* y) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr int V = 16 / sizeof(T);
  const bool vectorised = cols % V == 0 && aligned<16>(x) && aligned<16>(y) && aligned<16>(bias);
  const int per_thread = vectorised ? V : 1;
  const std::int32_t c0 = (blockIdx.x * blockDim.x + threadIdx.x) * per_thread;
  if (c0 >= cols) return;
  if (vectorised) {
    const Vec<T, V> b = *reinterpret_cast<const Vec<T, V>*>(bias + c0);
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
      const Vec<T, V> in = *reinterpret_cast<const Vec<T, V>*>(x + r * cols + c0);
      Vec<T, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(activate(act, to_float(in.v[j]) + to_float(b.v[j])));
      *reinterpret_cast<Vec<T, V>*>(y + r * cols + c0) = out;
    }
  } else {
    const float b = to_float(bias[c0]);
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
      y[r * cols + c0] = from_float<T>(activate(act, to_float(x[r * cols + c0]) + b));
    }
  }
}

}  // namespace flowdsl::kernels::detail
