// SPDX-License-Identifier: Apache-2.0
// Seeded top-k / top-p sampling of each row's next token from a language model's logits
// (sample_top_p): a block a row, striding over the rows; no sort, a few passes over the row.
//
// What it computes (reference::sample_top_p does the same by sorting, in double):
//  - Logits are ordered as floats, NaN as -inf (never drawn) and -0 as +0. A row of only -inf
//    and NaN, or of no columns, gets -1 whatever the other arguments.
//  - temperature <= 0 (or NaN): the first index of the largest logit (greedy).
//  - Else p_i = exp((x_i - max) / temperature), 1 for the elements equal to the max (so that
//    +inf logits share the mass). top_k in [1, cols) keeps the elements at least the k-th
//    largest logit, every element equal to it included (more than k on a tie). top_p < 1 then
//    keeps, of those, the elements at least the largest logit v such that the kept elements
//    >= v hold at least top_p of the kept mass: the smallest set of largest probabilities
//    holding top_p, every element tied with its smallest included (top_p <= 0 keeps the
//    elements equal to the max).
//  - The token is the first kept index, in index order, at which the running sum of the kept
//    p_i exceeds u times their total, u = sampling_draw(seed, step, row) / 2^24 (draw.hpp:
//    Philox4x32-10, counter (step, row, 0, 0)).
//
// How, for each row:
//  1. The largest logit and its first index: a block reduction of (key, ~index) pairs, the key
//     the logit's order-preserving 32-bit pattern (logit_key).
//  2. top-k: the k-th largest key by a radix select (select_threshold): up to four passes of
//     8-bit digits from the top, each a shared-memory histogram of the counts by digit of the
//     elements whose higher digits are those chosen so far; the chosen digit is the bin where
//     the count from the top reaches k. A bin that reaches k exactly is kept whole and ends the
//     passes (often after the second, where bins are narrow enough to hold one logit); bfloat16
//     logits need two digits at most, halves three (key_digits).
//  3. top-p: the same select over the kept elements, with histograms of probability mass instead
//     of counts, the target top_p of the kept mass (the total of the first pass's histogram).
//  4. The draw (draw_token): each thread sums the kept mass of its chunk of the row, a block scan
//     of the chunk sums finds the chunk where u times the total falls, and one warp walks that
//     chunk in index order (warp scans).
//
// Probabilities are fixed-point integers: p_i in units of 2^-s, s = 63 - bit_width(cols), so that
// a row's mass stays below 2^63 (s = 46 for a vocabulary of 128 256; a probability below 2^-(s+1)
// of the largest one rounds to 0 and is never drawn). Integer sums do not depend on the order of
// the additions: the histograms' shared-memory atomics (64-bit sums kept as two 32-bit words,
// which shared memory adds natively), the chunk sums and the walk agree exactly, and a row gets
// the same token on any grid and in any run.
//
// A row is one block's: its passes are bound by the latency of its loads and by the work per
// element, so each thread keeps several 16-byte loads in flight, and the exponential is one
// exp2f of a product.
//
// Every read is inside the row (the row loops stop at cols), and only out[row] is written, once,
// for each row < rows.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>

#include "../common.cuh"
#include "../reduction/block_reduce.cuh"
#include "draw.hpp"

namespace flowdsl::kernels::detail {

constexpr int sampling_block = 1024;
constexpr int sampling_bins = 256;  ///< a radix digit of 8 bits
/// Histogram copies, lane l adding into copy l % sampling_copies: logits crowd into a few bins of
/// the top digit (their exponents), and atomics of one warp to one address are serialised.
constexpr int sampling_copies = 8;
constexpr int sampling_chunks = sampling_block;  ///< the draw's chunks of a row: one a thread
/// 16-byte loads a thread keeps in flight: one row is one block's, latency-bound on its own.
constexpr int sampling_unroll = 4;

/// Counts and fixed-point probabilities.
using Mass = unsigned long long;

/// The order-preserving key of a logit: a larger value, a larger key; NaN as -inf and -0 as +0,
/// so that equal values have equal keys.
__device__ __forceinline__ std::uint32_t logit_key(float x) {
  std::uint32_t bits = isnan(x) ? 0xff800000u : __float_as_uint(x);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}
/// The logit of a key.
__device__ __forceinline__ float key_logit(std::uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}
constexpr std::uint32_t minus_infinity_key = ~0xff800000u;
/// The 8-bit digits of a key that tell T's values apart, from the top: a bfloat16 widened to float
/// differs from another in its top 16 bits only, a half (10 fraction bits) in its top 24.
template <class T>
constexpr int key_digits() {
  return std::is_same_v<T, __nv_bfloat16> ? 2 : std::is_same_v<T, __half> ? 3 : 4;
}

/// A row's probabilities as fixed-point masses: p = exp((x - max) / temperature) =
/// 2^((x - max) scale) with scale = log2(e) / temperature, in units of 2^-s (`unit` = 2^s);
/// 0 for NaN and -inf.
struct RowMass {
  static constexpr bool counts = false;
  float max, scale, unit;
  __device__ Mass operator()(float x) const {
    const float p = x == max ? 1.0f : exp2f((x - max) * scale);
    return p > 0.0f ? __float2ull_rn(fminf(p, 1.0f) * unit) : 0ull;
  }
};
/// Every element weighs 1: the weights of top-k's select, whose sums (< 2^31) need no carry.
struct Count {
  static constexpr bool counts = true;
  __device__ Mass operator()(float) const { return 1; }
};
/// The masses of a row of `cols` (> 0) columns: s = 63 - bit_width(cols), so that cols masses of
/// at most 2^s add up to less than 2^63.
__device__ __forceinline__ RowMass row_mass(float max, float temperature, int cols) {
  return {max, 1.4426950408889634f / temperature, ldexpf(1.0f, 63 - (32 - __clz(cols)))};
}

/// The mass top-p keeps of `total`: ceil(top_p total), at least 1 and at most total.
__device__ __forceinline__ Mass top_p_target(float top_p, Mass total) {
  const double wanted = ceil(static_cast<double>(top_p) * static_cast<double>(total));
  return wanted < 1.0 ? 1ull : wanted >= static_cast<double>(total) ? total : static_cast<Mass>(wanted);
}

/// Adds `w` to a 64-bit bin kept as a low and a high 32-bit word: shared memory adds 32-bit
/// words natively (a 64-bit add may be a compare-and-swap loop), and the thread whose add carries
/// out of the low word adds the carry to the high one. The sum is exact in any order.
__device__ __forceinline__ void add_weight(unsigned* low, unsigned* high, Mass w) {
  const auto w_low = static_cast<unsigned>(w);
  auto w_high = static_cast<unsigned>(w >> 32);
  if (w_low != 0 && atomicAdd(low, w_low) > ~w_low) ++w_high;
  if (w_high != 0) atomicAdd(high, w_high);
}

/// What the passes over a row share.
struct SamplingStorage {
  using Reduce = cub::BlockReduce<Mass, sampling_block>;
  using Scan = cub::BlockScan<Mass, sampling_block, cub::BLOCK_SCAN_WARP_SCANS>;
  union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } temp;
  // Histogram copies, low and high words; + 1: the copies of a bin fall in different banks.
  unsigned low[sampling_copies][sampling_bins + 1], high[sampling_copies][sampling_bins + 1];
  Mass value;           ///< what one thread found, for all: a max pair, a weight above a bin or chunk
  std::uint32_t index;  ///< a bin (and whether all of it is kept: sampling_bins more) or a chunk
};

/// (key << 32) | ~index of the row's largest logit, its first index on ties; 0 for no columns.
/// For every thread.
template <class T>
__device__ Mass row_best(const T* row, int cols, SamplingStorage& s) {
  Mass best = 0;
  const auto keep_larger = [&](int c, float x) {
    best = max(best, Mass{logit_key(x)} << 32 | ~static_cast<std::uint32_t>(c));
  };
  for_each_in_row<sampling_block, sampling_unroll>(row, cols, static_cast<int>(threadIdx.x), keep_larger);
  best = SamplingStorage::Reduce(s.temp.reduce).Reduce(best, cuda::maximum<>{});
  if (threadIdx.x == 0) s.value = best;
  __syncthreads();
  return s.value;
}

/// The largest key v such that the elements with keys >= max(v, floor) weigh at least
/// target_of(W), W the weight of all elements with keys >= floor: a radix select, a pass for each
/// of T's key_digits from the top, each a histogram of the weights by digit of the elements whose
/// higher digits are those chosen so far. A chosen bin whose whole weight is needed is kept whole:
/// v is its lowest key, and the passes stop (so, too, after T's last digit: its keys agree below).
/// weigh(x) >= 0 is positive for some element; target_of(W) is in [1, W]. For every thread.
template <class T, class Weigh, class Target>
__device__ std::uint32_t select_threshold(const T* row, int cols, std::uint32_t floor, Weigh weigh, Target target_of,
                                          SamplingStorage& s) {
  const int t = static_cast<int>(threadIdx.x);
  std::uint32_t prefix = 0;
  Mass above = 0, target = 0;  // the weight in the bins above the prefix's; the weight to reach
  for (int shift = 24; shift >= 32 - 8 * key_digits<T>(); shift -= 8) {
    const std::uint32_t chosen = shift == 24 ? 0u : ~0u << (shift + 8);  // the digits chosen so far
    for (int i = t; i < sampling_copies * (sampling_bins + 1); i += sampling_block) {
      (&s.low[0][0])[i] = 0;
      (&s.high[0][0])[i] = 0;
    }
    __syncthreads();
    unsigned* low = s.low[t % 32 % sampling_copies];
    unsigned* high = s.high[t % 32 % sampling_copies];
    for_each_in_row<sampling_block, sampling_unroll>(row, cols, static_cast<int>(threadIdx.x), [&](int, float x) {
      const std::uint32_t key = logit_key(x);
      if (key >= floor && (key & chosen) == prefix) {
        const std::uint32_t digit = (key >> shift) & 0xffu;
        if constexpr (Weigh::counts) {
          atomicAdd(&low[digit], 1u);
        } else {
          const Mass w = weigh(x);
          if (w != 0) add_weight(&low[digit], &high[digit], w);
        }
      }
    });
    __syncthreads();
    // Thread t holds bin 255 - t: its exclusive sum is the weight in the bins above.
    Mass bin = 0;
    if (t < sampling_bins) {
      for (int c = 0; c < sampling_copies; ++c)
        bin += (Mass{s.high[c][sampling_bins - 1 - t]} << 32) + s.low[c][sampling_bins - 1 - t];
    }
    Mass before, total;
    SamplingStorage::Scan(s.temp.scan).ExclusiveSum(bin, before, total);
    if (shift == 24) target = target_of(total);
    if (bin != 0 && above + before < target && target <= above + before + bin) {
      s.index =
          static_cast<std::uint32_t>(sampling_bins - 1 - t) + (target == above + before + bin ? sampling_bins : 0);
      s.value = above + before;
    }
    __syncthreads();
    prefix |= (s.index % sampling_bins) << shift;
    above = s.value;
    if (s.index >= sampling_bins) break;  // the bin is kept whole
  }
  return prefix;
}

/// The kept mass of columns [begin, end) of a row, read by one thread, 16-byte loads in flight
/// together where the row is aligned (begin is a multiple of 16 / sizeof(T)).
template <class T, class Kept>
__device__ __forceinline__ Mass chunk_mass(const T* row, std::int64_t begin, std::int64_t end, Kept kept) {
  constexpr int V = 16 / sizeof(T), U = sampling_unroll;
  Mass sum = 0;
  std::int64_t c = begin;
  if (aligned<16>(row)) {
    const Vec<T, V>* rv = reinterpret_cast<const Vec<T, V>*>(row);
    for (; c + U * V <= end; c += U * V) {
      Vec<T, V> in[U];
#pragma unroll
      for (int u = 0; u < U; ++u) in[u] = rv[c / V + u];
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int j = 0; j < V; ++j) sum += kept(to_float(in[u].v[j]));
      }
    }
  }
  for (; c < end; ++c) sum += kept(to_float(row[c]));
  return sum;
}

/// The first index, among the elements with keys >= floor in index order, at which their running
/// mass exceeds draw / 2^24 of their total: each thread sums a chunk of the row, a block scan of
/// the sums finds the chunk where that falls, and warp 0 walks it. For warp 0 (-1 in the others).
template <class T>
__device__ std::int32_t draw_token(const T* row, int cols, std::uint32_t floor, RowMass mass, std::uint32_t draw,
                                   SamplingStorage& s) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  // Chunks of a multiple of 32 columns (so of 16 bytes), at most sampling_chunks of them.
  const std::int64_t chunk = ((std::int64_t{cols} + sampling_chunks - 1) / sampling_chunks + 31) / 32 * 32;
  const auto kept = [&](float x) { return logit_key(x) >= floor ? mass(x) : 0ull; };
  __syncthreads();  // the thresholds' shared values are read: s may be written
  const std::int64_t begin = std::min<std::int64_t>(t * chunk, cols);
  const Mass mine = chunk_mass(row, begin, std::min<std::int64_t>(begin + chunk, cols), kept);
  Mass before, total;
  SamplingStorage::Scan(s.temp.scan).ExclusiveSum(mine, before, total);
  // floor(total * draw / 2^24) < total: the product has up to 87 bits.
  const Mass target = __umul64hi(total, draw) << 40 | (total * draw) >> 24;
  if (before <= target && target < before + mine) {
    s.index = static_cast<std::uint32_t>(t);
    s.value = target - before;
  }
  __syncthreads();
  if (t >= 32) return -1;
  const std::int64_t first = s.index * chunk, end = std::min<std::int64_t>(first + chunk, cols);
  Mass remaining = s.value;
  for (std::int64_t base = first; base < end; base += 32) {
    Mass running = base + lane < end ? kept(to_float(row[base + lane])) : 0;
    for (int offset = 1; offset < 32; offset *= 2) {
      const Mass below = __shfl_up_sync(0xffffffffu, running, offset);
      if (lane >= offset) running += below;
    }
    const unsigned hit = __ballot_sync(0xffffffffu, running > remaining);
    if (hit != 0) return static_cast<std::int32_t>(base + __ffs(hit) - 1);
    remaining -= __shfl_sync(0xffffffffu, running, 31);
  }
  return -1;  // not reached: the chunk's mass exceeds `remaining`
}

template <class T>
__global__ void __launch_bounds__(sampling_block)
    sample_top_p_kernel(std::int32_t rows, std::int32_t cols, float temperature, std::int32_t top_k, float top_p,
                        std::uint64_t seed, const std::int32_t* step, const T* logits, std::int32_t* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  __shared__ SamplingStorage s;
  const std::int32_t at = step == nullptr ? 0 : *step;
  for (std::int32_t row = static_cast<std::int32_t>(blockIdx.x); row < rows;
       row += static_cast<std::int32_t>(gridDim.x)) {
    __syncthreads();  // the previous row's shared memory is no longer read
    const T* x = logits + static_cast<std::int64_t>(row) * cols;
    const Mass best = row_best(x, cols, s);
    const auto max_key = static_cast<std::uint32_t>(best >> 32);
    const auto first_max = static_cast<std::int32_t>(~static_cast<std::uint32_t>(best));
    if (max_key <= minus_infinity_key || !(temperature > 0.0f)) {
      if (threadIdx.x == 0) out[row] = max_key <= minus_infinity_key ? -1 : first_max;  // nothing to draw, or greedy
      continue;
    }
    const RowMass mass = row_mass(key_logit(max_key), temperature, cols);
    const auto k = [=](Mass) { return static_cast<Mass>(top_k); };
    const auto p = [=](Mass total) { return top_p_target(top_p, total); };
    std::uint32_t floor = 0;  // the smallest key kept
    if (top_k > 0 && top_k < cols) floor = select_threshold(x, cols, floor, Count{}, k, s);
    if (top_p < 1.0f) floor = select_threshold(x, cols, floor, mass, p, s);
    const std::int32_t token = draw_token(x, cols, floor, mass, sampling_draw(seed, at, row), s);
    if (threadIdx.x == 0) out[row] = token;
  }
}

}  // namespace flowdsl::kernels::detail
