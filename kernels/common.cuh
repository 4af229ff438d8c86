// SPDX-License-Identifier: Apache-2.0
// Device-side vocabulary shared by the kernels: float conversions of the element types,
// aligned vectors for 16-byte accesses, activations, and launch-size helpers.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flowdsl/device.cuh"
#include "flowdsl/kernels.hpp"

namespace flowdsl::kernels::detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/// N elements of T loaded or stored with one instruction of N * sizeof(T) bytes.
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <int Bytes>
__device__ __forceinline__ bool aligned(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) % Bytes) == 0;
}

/// Programmatic dependent launch (EdgeKind::programmatic): lets the kernels that depend on this
/// one programmatically launch now (they wait for its results themselves), then waits until the
/// kernels this one depends on programmatically have completed and their writes are visible.
/// Both are no-ops for a kernel launched without programmatic edges. Every built-in kernel calls
/// it first, so any edge between two built-in kernels may be programmatic.
__device__ __forceinline__ void programmatic_prologue() { flowdsl::device::programmatic_prologue(); }

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

/// Applies activation `act` (see Activation); `act` is uniform across the launch.
__device__ __forceinline__ float activate(std::int32_t act, float x) {
  switch (act) {
    case 1: return fmaxf(x, 0.0f);
    case 2: return gelu(x);
    case 3: return silu(x);
    default: return x;
  }
}

}  // namespace flowdsl::kernels::detail

namespace flowdsl::kernels {
/// Blocks for `work` items at `per_block` items a block, at least 1, at most 2^31 - 1.
inline std::uint32_t blocks_for(std::int64_t work, std::int64_t per_block) {
  std::int64_t blocks = (work + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff;
  return static_cast<std::uint32_t>(blocks);
}
}  // namespace flowdsl::kernels
