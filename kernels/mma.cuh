// SPDX-License-Identifier: Apache-2.0
// Warp-wide tensor-core products (mma.sync, sm_80 and later) of 16-bit operands with float
// accumulators, and the packing of their operand registers, for the kernels that use them
// outside CUTLASS-style tiles: attention's tiles and the small-batch linear layer.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace flowdsl::kernels::detail {

/// The element types mma_16x8x16 multiplies.
template <class T>
constexpr bool mma_type = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

/// Two floats as the 16-bit pair an mma operand register holds (the first in the low half).
template <class T>
__device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi) {
  std::uint32_t bits;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    bits = *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    bits = *reinterpret_cast<const std::uint32_t*>(&v);
  }
  return bits;
}

/// Two 16-bit elements from shared memory as one operand register.
template <class T>
__device__ __forceinline__ std::uint32_t pair_of(const T& lo, const T& hi) {
  const std::uint16_t a = *reinterpret_cast<const std::uint16_t*>(&lo), b = *reinterpret_cast<const std::uint16_t*>(&hi);
  return std::uint32_t{a} | (std::uint32_t{b} << 16);
}

/// d += a · b for a 16 x 16 (row-major) and b 16 x 8 (column-major) of T, d 16 x 8 in float.
template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                            std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

}  // namespace flowdsl::kernels::detail
