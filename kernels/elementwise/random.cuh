// SPDX-License-Identifier: Apache-2.0
// Counter-based random fill: elements 2k and 2k + 1 are a pure function of (seed, k) (see
// counter_hash.hpp), so results do not depend on the grid, need no generator state, and the
// host reproduces them (reference::uniform, reference::normal).
//
// One 64-bit hash gives a pair of elements: two 24-bit uniforms, or both outputs of one
// Box–Muller transform. The hash is the costly part (64-bit multiplies), so a pair halves it,
// and the seed's half of it is mixed once a thread (mixed_seed). Pairs are written as 16-byte
// vectors (several pairs a vector) when the output's first vector boundary falls on an even
// element; otherwise pair by pair with scalar stores. Both fills are bound by instruction
// issue, not by memory, unless each pair stays within some 50 instructions: hence the fields
// taken before the hash's last step (hash_fields) and the hardware approximations (lg2.approx,
// sqrt.approx, __sincosf) in Box–Muller.
#pragma once

#include "../counter_hash.hpp"
#include "elementwise.cuh"

namespace flowdsl::kernels::detail {

/// Elements 2k and 2k + 1: lo + (hi - lo) u for the top and the low 24-bit fields of
/// hash(seed, k); `mixed` is mixed_seed(seed).
struct UniformPairOp {
  std::uint64_t mixed;
  float lo, hi;
  __device__ float2 operator()(std::uint64_t pair) const { return spread(spread_counter(pair)); }
  /// The pair of spread_counter(pair) = `s`.
  __device__ float2 spread(std::uint64_t s) const {
    const HashFields f = hash_fields_spread(mixed, s);
    return make_float2(fmaf(hi - lo, static_cast<float>(f.top_word >> 8) * 5.9604644775390625e-8f, lo),
                       fmaf(hi - lo, static_cast<float>(f.low) * 5.9604644775390625e-8f, lo));
  }
};

/// sqrt(-4 ln u), i.e. sqrt(2) times Box–Muller's radius, for u = (low_field + 1) 2^-24
/// (open_unit_float), to a few float ulps. u = 1 - w with w = (2^24 - 1 - low_field) 2^-24,
/// both exact in float. Near u = 1 the hardware's log2 (absolute error about 2^-22) would be
/// coarse against ln u, so for w < 1/64 the series -4 ln(1 - w) = w (w^3 + 4w^2/3 + 2w + 4)
/// (truncated after w^4 / 4: under 1.3e-8 relative) is used; for u <= 63/64, -4 ln 2 log2(u)
/// is within 2.3e-5 relative of -4 ln u, which moves the output by under 2.1e-6 stddev. u is at
/// least 2^-24, so log2 and the square root are the hardware's approximations without their
/// handling of denormal inputs (relative error ~2^-23 for the root, and 0 for 0). The factor
/// sqrt(2) goes into the caller's scale: the series then starts from w, which spares an
/// instruction.
__device__ __forceinline__ float box_muller_radius_sqrt2(std::uint32_t low_field) {
  const float w = static_cast<float>(0xffffffu - low_field) * 5.9604644775390625e-8f;
  float series = w + 4.0f / 3.0f;
  series = fmaf(series, w, 2.0f);
  series = fmaf(series, w, 4.0f);
  series *= w;
  float log2_u;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(log2_u) : "f"(1.0f - w));
  const float fast = log2_u * -2.7725887222397812f;  // -4 ln 2
  float radius;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(radius) : "f"(w < 0.015625f ? series : fast));
  return radius;
}

/// (cos, sin)(2 pi j / 2^24) for j the top 24 bits of `word`, within 4e-7: j is taken as a
/// signed 24-bit count of 2^-24 turns, so the angle lies in [-pi, pi), where the hardware's
/// sine and cosine (__sincosf) keep an absolute error under 2^-21.4.
__device__ __forceinline__ float2 cos_sin_turns24(std::uint32_t word) {
  const float turns = static_cast<float>(static_cast<std::int32_t>(word) >> 8);
  float s, c;
  __sincosf(turns * 3.7450702e-7f, &s, &c);  // 2 pi / 2^24
  return make_float2(c, s);
}

/// Elements 2k and 2k + 1: mean + stddev r (cos, sin)(2 pi v), r = sqrt(-2 ln u), with u and
/// v the low and top 24-bit fields of hash(seed, k) (Box–Muller, both outputs); `mixed` is
/// mixed_seed(seed), `scale` stddev / sqrt(2) (see box_muller_radius_sqrt2).
struct NormalPairOp {
  std::uint64_t mixed;
  float mean, scale;
  __device__ float2 operator()(std::uint64_t pair) const { return spread(spread_counter(pair)); }
  /// The pair of spread_counter(pair) = `s`.
  __device__ float2 spread(std::uint64_t s) const {
    const HashFields f = hash_fields_spread(mixed, s);
    const float scaled = scale * box_muller_radius_sqrt2(f.low);
    const float2 cs = cos_sin_turns24(f.top_word);
    return make_float2(fmaf(scaled, cs.x, mean), fmaf(scaled, cs.y, mean));
  }
};

/// Writes pairs (i, i + 1) = op(i / 2) for even i in [begin, end), grid-stride, scalar stores;
/// an odd end drops the last pair's second element.
template <class T, class Op>
__device__ __forceinline__ void write_pairs(std::int64_t begin, std::int64_t end, const Op& op, T* out) {
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = begin + 2 * thread; i < end; i += 2 * stride) {
    const float2 v = op(static_cast<std::uint64_t>(i) >> 1);
    out[i] = from_float<T>(v.x);
    if (i + 1 < end) out[i + 1] = from_float<T>(v.y);
  }
}

/// out[0 .. n) from pairs op(k) = (out[2k], out[2k + 1]). The middle runs as 16-byte vectors
/// of V / 2 pairs, elementwise_unroll vectors per thread, when the head before the first
/// vector boundary is even (pairs then never straddle vectors); else everything pair by pair.
template <class T, class Op>
__device__ __forceinline__ void fill_pairs(std::int64_t n, const Op& op, T* __restrict__ out) {
  constexpr int V = 16 / sizeof(T);
  constexpr int U = elementwise_unroll;
  const std::int64_t head = scalar_head<V>(n, out);
  if (head % 2 != 0) {
    write_pairs(0, n, op, out);
    return;
  }
  const std::int64_t vectors = (n - head) / V;
  const std::int64_t tail = head + vectors * V;
  write_pairs(0, head, op, out);
  write_pairs(tail, n, op, out);

  // Vector v holds pairs (head + v V) / 2 + p, p < V / 2. Their spread counters (linear in the
  // pair) are walked by additions rather than each multiplied out.
  Vec<T, V>* out_v = reinterpret_cast<Vec<T, V>*>(out + head);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t per_vector = spread_step * (V / 2);
  const std::uint64_t per_u = per_vector * blockDim.x;
  const std::uint64_t per_round = per_u * static_cast<std::uint64_t>(stride);
  std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U + threadIdx.x;
  std::uint64_t spread_base = spread_counter(static_cast<std::uint64_t>(head / 2 + base * (V / 2)));
  for (; base < vectors; base += stride * U, spread_base += per_round * U) {
    std::uint64_t spread_v = spread_base;
#pragma unroll
    for (int u = 0; u < U; ++u, spread_v += per_u) {
      const std::int64_t v = base + static_cast<std::int64_t>(u) * blockDim.x;
      if (v < vectors) {
        Vec<T, V> result;
#pragma unroll
        for (int p = 0; p < V / 2; ++p) {
          const float2 pair = op.spread(spread_v + spread_step * p);
          result.v[2 * p] = from_float<T>(pair.x);
          result.v[2 * p + 1] = from_float<T>(pair.y);
        }
        out_v[v] = result;
      }
    }
  }
}

template <class T>
__global__ void random_uniform_kernel(std::int64_t n, std::uint64_t seed, float lo, float hi, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  fill_pairs(n, UniformPairOp{mixed_seed(seed), lo, hi}, out);
}
template <class T>
__global__ void random_normal_kernel(std::int64_t n, std::uint64_t seed, float mean, float stddev, T* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  fill_pairs(n, NormalPairOp{mixed_seed(seed), mean, stddev * 0.70710678118654752f}, out);
}

}  // namespace flowdsl::kernels::detail
