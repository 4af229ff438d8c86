#pragma once
/// \file kernel_library.hpp
/// \brief Kernels loaded at run time from a cubin, fatbin or PTX file (CUDA's library
/// management API), registered by name with the parameters a graph file declares.

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/registry.hpp"

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

/// \brief Loads every file of spec.kernel_files (one library per distinct file, paths
/// relative to `base_dir` unless absolute) and adds each declared kernel to `registry` under
/// its name, with its declared parameters.
///
/// The registry entries point into the libraries: keep the returned libraries alive while
/// `registry` or any graph bound through it is in use, and use a registry that does not
/// outlive them (not the global one when the libraries are temporary).
/// \throws CudaError when a file or symbol cannot be loaded.
/// \throws UsageError when a name is already registered.
std::vector<KernelLibrary> load_kernel_files(const GraphSpec& spec, const std::string& base_dir,
                                             KernelRegistry& registry);

}  // namespace flowdsl
