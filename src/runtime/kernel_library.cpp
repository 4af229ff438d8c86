// Kernels from cubin, fatbin or PTX files: one owner per cudaLibrary_t.
#include "flowdsl/kernel_library.hpp"

#include <map>

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

std::vector<KernelLibrary> load_kernel_files(const GraphSpec& spec, const std::string& base_dir,
                                             KernelRegistry& registry) {
  std::vector<KernelLibrary> libraries;
  std::map<std::string, std::size_t> by_path;
  for (const KernelFileSpec& f : spec.kernel_files) {
    const std::string path = f.file.empty() || f.file.front() == '/' || base_dir.empty() ? f.file : base_dir + "/" + f.file;
    auto [it, added] = by_path.emplace(path, libraries.size());
    if (added) libraries.push_back(KernelLibrary::load(path));
    const cudaKernel_t kernel = libraries[it->second].kernel(f.symbol);
    registry.add(KernelInfo{f.name, reinterpret_cast<const void*>(kernel), f.params, "from " + path});
  }
  return libraries;
}

}  // namespace flowdsl
