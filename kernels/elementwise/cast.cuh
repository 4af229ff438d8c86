// SPDX-License-Identifier: Apache-2.0
// Mixed-precision casts between float, __half and __nv_bfloat16 (round to nearest even),
// through the vectorised transform: 16-byte accesses on the wider side.
#pragma once

#include "elementwise.cuh"

namespace flowdsl::kernels::detail {

struct IdentityOp {
  __device__ float operator()(std::int64_t, float x) const { return x; }
};

template <class In, class Out>
__global__ void cast_kernel(std::int64_t n, const In* x, Out* y) {
  ::flowdsl::kernels::detail::programmatic_prologue(); transform(n, IdentityOp{}, y, x); }

}  // namespace flowdsl::kernels::detail
