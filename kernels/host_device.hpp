// SPDX-License-Identifier: Apache-2.0
// FLOWDSL_HD: a function the device kernels and the host references share (inline on the host,
// __host__ __device__ __forceinline__ under nvcc).
#pragma once

#if defined(__CUDACC__)
#define FLOWDSL_HD __host__ __device__ __forceinline__
#else
#define FLOWDSL_HD inline
#endif
