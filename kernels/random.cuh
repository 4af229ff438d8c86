// Counter-based random fill: element i is a pure function of (seed, i) (see counter_hash.hpp),
// so results do not depend on the grid, need no generator state, and the host reproduces them.
#pragma once

#include "counter_hash.hpp"
#include "elementwise.cuh"

namespace flowdsl::kernels::detail {

struct UniformOp {
  std::uint64_t seed;
  float lo, hi;
  __device__ float operator()(std::int64_t i) const {
    return fmaf(hi - lo, unit_float(hash(seed, static_cast<std::uint64_t>(i))), lo);
  }
};

/// Box–Muller on two independent 24-bit fields of one hash.
struct NormalOp {
  std::uint64_t seed;
  float mean, stddev;
  __device__ float operator()(std::int64_t i) const {
    const std::uint64_t bits = hash(seed, static_cast<std::uint64_t>(i));
    const float radius = sqrtf(-2.0f * logf(open_unit_float(bits)));
    return mean + stddev * radius * cospif(2.0f * unit_float(bits));
  }
};

template <class T>
__global__ void random_uniform_kernel(std::int64_t n, std::uint64_t seed, float lo, float hi, T* out) {
  transform(n, UniformOp{seed, lo, hi}, out);
}
template <class T>
__global__ void random_normal_kernel(std::int64_t n, std::uint64_t seed, float mean, float stddev, T* out) {
  transform(n, NormalOp{seed, mean, stddev}, out);
}

}  // namespace flowdsl::kernels::detail
