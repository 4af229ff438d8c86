// SPDX-License-Identifier: Apache-2.0
// The kernels of a graph file's kernel_files: each file checked, loaded once, each kernel registered.
#include "flowdsl/kernel_files.hpp"

#include <filesystem>
#include <map>
#include <system_error>

namespace flowdsl {
namespace {

std::string path_of(const KernelFileSpec& f, const std::string& base_dir) {
  return f.file.empty() || f.file.front() == '/' || base_dir.empty() ? f.file : base_dir + "/" + f.file;
}

// Why `path` is not a kernel file that may be loaded, or "": CUDA would read a device or a pipe
// without end, and reports a directory as out of memory.
std::string file_problem(const std::string& path, bool missing_ok) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (missing_ok && status.type() == fs::file_type::not_found) return {};
  if (error || !fs::exists(status)) {
    return "cannot open the kernel file " + quoted_name(path) + (error ? ": " + error.message() : std::string());
  }
  if (fs::is_directory(status)) return "the kernel file " + quoted_name(path) + " is a directory, not a regular file";
  if (!fs::is_regular_file(status)) {
    return "the kernel file " + quoted_name(path) + " is not a regular file (a device, a pipe or a socket)";
  }
  const std::uintmax_t bytes = fs::file_size(path, error);
  if (error) return "cannot read the size of the kernel file " + quoted_name(path) + ": " + error.message();
  if (bytes == 0)
    return "the kernel file " + quoted_name(path) + " is empty (or a file that claims no size, as in /proc)";
  if (bytes > max_kernel_file_bytes) {
    return "the kernel file " + quoted_name(path) + " is " + std::to_string(bytes) + " bytes, over the limit of " +
           std::to_string(max_kernel_file_bytes);
  }
  return {};
}

}  // namespace

std::vector<JsonProblem> check_kernel_files(const GraphSpec& spec, const std::string& base_dir, bool missing_ok) {
  std::vector<JsonProblem> problems;
  for (std::size_t i = 0; i < spec.kernel_files.size(); ++i) {
    std::string problem = file_problem(path_of(spec.kernel_files[i], base_dir), missing_ok);
    if (!problem.empty()) problems.push_back({"/kernel_files/" + std::to_string(i) + "/file", std::move(problem)});
  }
  return problems;
}

std::vector<KernelLibrary> load_kernel_files(const GraphSpec& spec, const std::string& base_dir,
                                             KernelRegistry& registry) {
  if (std::vector<JsonProblem> problems = check_kernel_files(spec, base_dir); !problems.empty()) {
    throw JsonError(std::move(problems));
  }
  std::vector<KernelLibrary> libraries;
  std::map<std::string, std::size_t> by_path;
  for (const KernelFileSpec& f : spec.kernel_files) {
    const std::string path = path_of(f, base_dir);
    auto [it, added] = by_path.emplace(path, libraries.size());
    if (added) libraries.push_back(KernelLibrary::load(path));
    const cudaKernel_t kernel = libraries[it->second].kernel(f.symbol);
    registry.add(KernelInfo{f.name, reinterpret_cast<const void*>(kernel), f.params, "from " + path, {}, false, {}, nullptr, {}, {}, nullptr});
  }
  return libraries;
}

}  // namespace flowdsl
