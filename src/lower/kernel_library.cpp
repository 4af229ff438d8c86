// SPDX-License-Identifier: Apache-2.0
// Kernels from cubin, fatbin or PTX files: one owner per cudaLibrary_t.
#include "flowdsl/kernel_library.hpp"

#include "log_internal.hpp"

namespace flowdsl {

KernelLibrary KernelLibrary::load(const std::string& path) {
  cudaLibrary_t library = nullptr;
  const std::string call = "cudaLibraryLoadFromFile(" + path + ")";
  check(cudaLibraryLoadFromFile(&library, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), call.c_str());
  FLOWDSL_DEBUG("loaded kernel library {}", path);
  return KernelLibrary(library, path);
}

cudaKernel_t KernelLibrary::kernel(const std::string& symbol) const {
  cudaKernel_t kernel = nullptr;
  const std::string call = "cudaLibraryGetKernel(" + path_ + ", " + symbol + ")";
  check(cudaLibraryGetKernel(&kernel, handle_.get(), symbol.c_str()), call.c_str());
  return kernel;
}

}  // namespace flowdsl
