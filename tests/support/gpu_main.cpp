// SPDX-License-Identifier: Apache-2.0
// Test runner for the gpu tests: without a CUDA device the whole executable reports itself
// skipped (exit code 77, which ctest maps to SKIP) instead of passing.
#include <cstdio>

#include <cuda_runtime_api.h>

#if defined(FLOWDSL_CATCH2_V3)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

int main(int argc, char* argv[]) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
