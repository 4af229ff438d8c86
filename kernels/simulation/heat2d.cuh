// SPDX-License-Identifier: Apache-2.0
// 2-D heat diffusion: one explicit 5-point stencil step with fixed boundary, and the squared
// change per block (double) for the residual norm, finished by sum_finish_kernel. The grid
// is at most 32 x 32 blocks (the partials' size), each striding over the domain.
//
// A thread takes a strip of heat_rows rows by W columns (W = 4 when rows are 16-byte
// aligned, else 1): it loads the strip's rows and the one above and below (heat_rows + 2
// vectors) and the columns left and right of it, all before the first use, so each input
// row is read from device memory once for heat_rows outputs rows, with 16-byte accesses
// and about 100 bytes in flight a thread.
#pragma once

#include <cub/block/block_reduce.cuh>

#include "../common.cuh"

namespace flowdsl::kernels::detail {

constexpr int heat_block_x = 32, heat_block_y = 8;
/// Output rows a thread computes per strip (it loads heat_rows + 2 rows for them).
constexpr int heat_rows = 4;

/// One step over the strips of W columns; returns the sum of squared changes of this thread's
/// points. The squares of a strip are added in float (at most heat_rows * W of them, each
/// change exact to a float rounding), then into the double total.
template <int W>
__device__ __forceinline__ double heat2d_strips(std::int32_t nx, std::int32_t ny, float alpha, const float* __restrict__ u,
                                                float* __restrict__ next) {
  constexpr int R = heat_rows;
  using Chunk = Vec<float, W>;
  double squares = 0.0;
  const std::int32_t chunks = nx / W;
  for (std::int32_t strip = blockIdx.y * blockDim.y + threadIdx.y; strip * R < ny; strip += gridDim.y * blockDim.y) {
    const std::int32_t i0 = strip * R;
    for (std::int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
      const std::int32_t j0 = c * W;
      // Rows i0 - 1 .. i0 + R (rows k = 0 .. R + 1), and the left and right neighbours of the
      // output rows (k = 1 .. R) where they are interior.
      Chunk rows[R + 2];
      float left[R + 2], right[R + 2];
#pragma unroll
      for (int k = 0; k < R + 2; ++k) {
        const std::int32_t i = i0 - 1 + k;
        const std::int64_t at = static_cast<std::int64_t>(i) * nx + j0;
        if (i >= 0 && i < ny) rows[k] = *reinterpret_cast<const Chunk*>(u + at);
        const bool interior_row = k >= 1 && k <= R && i >= 1 && i + 1 < ny;
        left[k] = interior_row && j0 > 0 ? u[at - 1] : 0.0f;
        right[k] = interior_row && j0 + W < nx ? u[at + W] : 0.0f;
      }
      float strip_squares = 0.0f;
#pragma unroll
      for (int k = 1; k <= R; ++k) {
        const std::int32_t i = i0 - 1 + k;
        if (i >= ny) break;
        Chunk out = rows[k];
        if (i >= 1 && i + 1 < ny) {
#pragma unroll
          for (int t = 0; t < W; ++t) {
            const std::int32_t j = j0 + t;
            if (j < 1 || j + 1 >= nx) continue;
            const float centre = rows[k].v[t];
            const float west = t == 0 ? left[k] : rows[k].v[t - 1];
            const float east = t == W - 1 ? right[k] : rows[k].v[t + 1];
            const float laplacian = (rows[k - 1].v[t] + rows[k + 1].v[t]) + (west + east) - 4.0f * centre;
            out.v[t] = centre + alpha * laplacian;
            const float change = out.v[t] - centre;
            strip_squares += change * change;
          }
        }
        *reinterpret_cast<Chunk*>(next + static_cast<std::int64_t>(i) * nx + j0) = out;
      }
      squares += strip_squares;
    }
  }
  return squares;
}

__global__ void __launch_bounds__(heat_block_x* heat_block_y, 4) heat2d_step_kernel(std::int32_t nx, std::int32_t ny, float alpha,
                                                                                 const float* u, float* next,
                                                                                 double* partials) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  const bool vectorised = nx % 4 == 0 && aligned<16>(u) && aligned<16>(next);
  const double squares = vectorised ? heat2d_strips<4>(nx, ny, alpha, u, next) : heat2d_strips<1>(nx, ny, alpha, u, next);
  using Reduce = cub::BlockReduce<double, heat_block_x, cub::BLOCK_REDUCE_WARP_REDUCTIONS, heat_block_y>;
  __shared__ typename Reduce::TempStorage temp;
  const double total = Reduce(temp).Sum(squares);
  if (threadIdx.x == 0 && threadIdx.y == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = total;
}

}  // namespace flowdsl::kernels::detail
