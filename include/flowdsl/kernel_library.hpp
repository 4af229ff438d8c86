// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kernel_library.hpp
/// \brief Kernels loaded at run time from a cubin, fatbin or PTX file (CUDA's library
/// management API). flowdsl/kernel_files.hpp registers those a graph file declares.

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"

namespace flowdsl {

/// \brief Owns one loaded library (cudaLibrary_t): move-only, unloaded exactly once.
class KernelLibrary {
 public:
  /// \brief Loads `path` (cubin, fatbin or PTX) with cudaLibraryLoadFromFile.
  /// \throws CudaError naming the call and the file.
  static KernelLibrary load(const std::string& path);

  /// \brief The kernel called `symbol` in this library (cudaLibraryGetKernel). Valid while the
  /// library is loaded; usable wherever a `__global__` function's address is.
  /// \throws CudaError naming the call and the symbol.
  cudaKernel_t kernel(const std::string& symbol) const;

  cudaLibrary_t get() const noexcept { return handle_.get(); }
  const std::string& path() const noexcept { return path_; }

 private:
  KernelLibrary(cudaLibrary_t handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  UniqueHandle<cudaLibrary_t, &cudaLibraryUnload> handle_;
  std::string path_;
};

}  // namespace flowdsl
