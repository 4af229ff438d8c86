// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file device.cuh
/// \brief Device-side helpers for kernels of your own on programmatic edges
/// (`.after(p, flowdsl::programmatic)`, Graph::programmatic_edges): include it in the .cu file
/// that defines the kernel.
///
/// \code
///   __global__ void my_scale(int n, float a, const float* x, float* y) {
///     flowdsl::device::programmatic_prologue();  // before the first read of x
///     const int i = blockIdx.x * blockDim.x + threadIdx.x;
///     if (i < n) y[i] = a * x[i];
///   }
///   ...
///   g.kernel("scale", my_scale).launch(blocks, 256).args(n, 2.0f, d_x, d_y).waits_for_producers();
/// \endcode
///
/// On an edge made programmatic, a kernel starts while its predecessor still runs: it must wait
/// for the predecessor's results (wait_for_producers) before reading them, or it reads stale
/// memory; flowdsl cannot check this. Both helpers do nothing for a kernel launched without
/// programmatic edges and below compute capability 9.0, so a kernel that calls them runs
/// correctly on any edge.

namespace flowdsl::device {

/// \brief Lets the kernels that depend on this one programmatically launch now
/// (`griddepcontrol.launch_dependents`, cudaTriggerProgrammaticLaunchCompletion). They wait for
/// this kernel's results themselves; call it as early as nothing stops them from launching.
__device__ __forceinline__ void let_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// \brief Waits until the kernels this one depends on programmatically have completed and their
/// writes are visible (`griddepcontrol.wait`, cudaGridDependencySynchronize). Call it before the
/// first read of anything they write; work that reads none of it (index arithmetic, loading
/// weights no producer writes) may come before.
__device__ __forceinline__ void wait_for_producers() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// \brief Both, in the order every built-in kernel starts with: dependents may launch, then wait
/// for producers.
__device__ __forceinline__ void programmatic_prologue() {
  let_dependents_launch();
  wait_for_producers();
}

}  // namespace flowdsl::device
