// SPDX-License-Identifier: Apache-2.0
// Compiled to a cubin by the build (not linked): test_json_gpu loads it at run time.
extern "C" __global__ void twice(int n, float factor, float* data) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = factor * 2.0f * data[i];
}
