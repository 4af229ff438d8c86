// What the GPU benchmarks share: a check that stops the run on a CUDA error, and the raw
// variants' instantiation (uploaded, as flowdsl's executables are).
#pragma once

#include <cstdio>
#include <cstdlib>

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

namespace bench {

/// Instantiates `graph` with an upload on `stream`, as the CUDA backend does.
inline flowdsl::NativeExecutable instantiate_uploaded(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphInstantiateParams params{};
  params.flags = cudaGraphInstantiateFlagUpload;
  params.uploadStream = stream;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiateWithParams(&exec, graph, &params));
  return flowdsl::NativeExecutable(exec);
}

}  // namespace bench
