// The kernels of a graph file's kernel_files: each file loaded once, each kernel registered.
#include "flowdsl/kernel_files.hpp"

#include <map>

namespace flowdsl {

std::vector<KernelLibrary> load_kernel_files(const GraphSpec& spec, const std::string& base_dir,
                                             KernelRegistry& registry) {
  std::vector<KernelLibrary> libraries;
  std::map<std::string, std::size_t> by_path;
  for (const KernelFileSpec& f : spec.kernel_files) {
    const std::string path = f.file.empty() || f.file.front() == '/' || base_dir.empty() ? f.file : base_dir + "/" + f.file;
    auto [it, added] = by_path.emplace(path, libraries.size());
    if (added) libraries.push_back(KernelLibrary::load(path));
    const cudaKernel_t kernel = libraries[it->second].kernel(f.symbol);
    registry.add(KernelInfo{f.name, reinterpret_cast<const void*>(kernel), f.params, "from " + path, {}, false, {}});
  }
  return libraries;
}

}  // namespace flowdsl
