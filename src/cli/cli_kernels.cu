// The f32 kernels of the `flowdsl` tool (see cli_kernels.hpp).
#include "cli_kernels.hpp"

namespace flowdsl::cli {
namespace {

__global__ void fill_f32(int n, float value, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__global__ void scale_f32(int n, float alpha, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}

__global__ void axpy_f32(int n, float alpha, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}

__global__ void multiply_add_f32(int n, const float* a, const float* b, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i] + a[i];
}

__global__ void clamp_f32(int n, float lo, float hi, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fminf(fmaxf(y[i], lo), hi);
}

}  // namespace

void register_cli_kernels(KernelRegistry& registry) {
  registry.add("fill_f32", fill_f32, {"n", "value", "out"}, "out[i] = value");
  registry.add("scale_f32", scale_f32, {"n", "alpha", "x", "y"}, "y[i] = alpha * x[i]");
  registry.add("axpy_f32", axpy_f32, {"n", "alpha", "x", "y"}, "y[i] = alpha * x[i] + y[i]");
  registry.add("multiply_add_f32", multiply_add_f32, {"n", "a", "b", "out"}, "out[i] = a[i] * b[i] + a[i]");
  registry.add("clamp_f32", clamp_f32, {"n", "lo", "hi", "y"}, "y[i] = min(max(y[i], lo), hi)");
}

}  // namespace flowdsl::cli
