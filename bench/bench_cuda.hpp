// SPDX-License-Identifier: Apache-2.0
// What the GPU benchmarks share: a check that stops the run on a CUDA error, and the raw
// variants' instantiation (uploaded, as flowdsl's executables are).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"

#define CHECK_CUDA(call)                                                                                   \
  do {                                                                                                     \
    const cudaError_t status_ = (call);                                                                    \
    if (status_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(status_)); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

/// The same for a driver call (a CUresult).
#define CHECK_CU(call)                                                                                    \
  do {                                                                                                    \
    const CUresult status_ = (call);                                                                      \
    if (status_ != CUDA_SUCCESS) {                                                                        \
      std::fprintf(stderr, "%s:%d %s failed: CUresult %d\n", __FILE__, __LINE__, #call, int(status_));     \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

namespace bench {

/// Instantiates `graph` with an upload on `stream` and `flags` besides, as the CUDA backend does.
inline flowdsl::NativeExecutable instantiate_uploaded(cudaGraph_t graph, cudaStream_t stream,
                                                      unsigned long long flags = 0) {
  cudaGraphInstantiateParams params{};
  params.flags = cudaGraphInstantiateFlagUpload | flags;
  params.uploadStream = stream;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiateWithParams(&exec, graph, &params));
  return flowdsl::NativeExecutable(exec);
}

/// The options every GPU benchmark takes: `--quick` (a smoke run) and `--json FILE`.
struct Options {
  bool quick = false;
  std::string json_path;
};

/// Reads the options; prints the usage and returns nothing for anything else.
inline std::optional<Options> parse_options(int argc, char** argv) {
  Options out;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      out.quick = true;
    } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      out.json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--json FILE]\n", argv[0]);
      return std::nullopt;
    }
  }
  return out;
}

/// Whether a CUDA device is present (each bench says itself what it does without one).
inline bool has_device() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

/// The JSON header of a report: the benchmark's name (none when empty), the GPU, the driver and
/// runtime versions, as members ending in ",\n" (bench::write_json's `header_fields`).
inline std::string device_header(const std::string& bench_name) {
  cudaDeviceProp prop{};
  int device = 0, driver = 0, runtime = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  std::string out = bench_name.empty() ? std::string() : "  \"bench\": \"" + bench_name + "\",\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "  \"gpu\": \"%s\",\n  \"driver_version\": %d,\n  \"runtime_version\": %d,\n", prop.name,
                driver, runtime);
  return out + buf;
}

}  // namespace bench
