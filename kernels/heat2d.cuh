// 2-D heat diffusion: one explicit 5-point stencil step with fixed boundary, and the squared
// change per block (double) for the residual norm, finished by sum_finish_kernel. The grid
// is at most 32 x 32 blocks (the partials' size), each striding over the domain.
#pragma once

#include <cub/block/block_reduce.cuh>

#include "common.cuh"

namespace flowdsl::kernels::detail {

constexpr int heat_block_x = 32, heat_block_y = 8;

__global__ void __launch_bounds__(heat_block_x* heat_block_y) heat2d_step_kernel(std::int32_t nx, std::int32_t ny, float alpha,
                                                                                 const float* u, float* next,
                                                                                 double* partials) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  double squares = 0.0;
  for (std::int32_t i = blockIdx.y * blockDim.y + threadIdx.y; i < ny; i += gridDim.y * blockDim.y) {
    for (std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < nx; j += gridDim.x * blockDim.x) {
      const std::int64_t k = static_cast<std::int64_t>(i) * nx + j;
      const float centre = u[k];
      float value = centre;
      if (i > 0 && j > 0 && i + 1 < ny && j + 1 < nx) {
        const float laplacian = (u[k - nx] + u[k + nx]) + (u[k - 1] + u[k + 1]) - 4.0f * centre;
        value = centre + alpha * laplacian;
        const double change = static_cast<double>(value) - centre;
        squares += change * change;
      }
      next[k] = value;
    }
  }
  using Reduce = cub::BlockReduce<double, heat_block_x, cub::BLOCK_REDUCE_WARP_REDUCTIONS, heat_block_y>;
  __shared__ typename Reduce::TempStorage temp;
  const double total = Reduce(temp).Sum(squares);
  if (threadIdx.x == 0 && threadIdx.y == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = total;
}

}  // namespace flowdsl::kernels::detail
