// Fixed-shape batching: pad variable-length rows into [batch, width] with a pad value and a
// validity mask, crop them back, gather selected rows. Columns over grid.x and threads, rows
// over grid.y with a grid stride (any number of rows).
#pragma once

#include "common.cuh"

namespace flowdsl::kernels::detail {

template <class T>
__global__ void pad_kernel(std::int32_t batch, std::int32_t width, float pad_value, const T* values,
                           const std::int32_t* offsets, T* out, std::uint8_t* mask) {
  const std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= width) return;
  const T pad = from_float<T>(pad_value);
  for (std::int32_t b = blockIdx.y; b < batch; b += gridDim.y) {
    const std::int32_t start = offsets[b];
    const std::int32_t length = offsets[b + 1] - start;
    const bool valid = j < length;
    const std::int64_t k = static_cast<std::int64_t>(b) * width + j;
    out[k] = valid ? values[start + j] : pad;
    if (mask) mask[k] = valid ? 1 : 0;
  }
}

template <class T>
__global__ void crop_kernel(std::int32_t batch, std::int32_t width, float pad_value, const T* in, const std::int32_t* offsets,
                            T* values) {
  const T pad = from_float<T>(pad_value);
  for (std::int32_t b = blockIdx.y; b < batch; b += gridDim.y) {
    const std::int32_t start = offsets[b];
    const std::int32_t length = offsets[b + 1] - start;
    for (std::int32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < length; j += gridDim.x * blockDim.x) {
      values[start + j] = j < width ? in[static_cast<std::int64_t>(b) * width + j] : pad;
    }
  }
}

template <class T>
__global__ void gather_rows_kernel(std::int32_t count, std::int32_t cols, const std::int32_t* index, std::int32_t src_rows,
                                   const T* in, T* out) {
  const std::int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (std::int32_t r = blockIdx.y; r < count; r += gridDim.y) {
    const std::int32_t src = index[r];
    out[static_cast<std::int64_t>(r) * cols + c] =
        src >= 0 && src < src_rows ? in[static_cast<std::int64_t>(src) * cols + c] : from_float<T>(0.0f);
  }
}

}  // namespace flowdsl::kernels::detail
