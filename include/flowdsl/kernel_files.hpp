#pragma once
/// \file kernel_files.hpp
/// \brief The kernels a graph file declares in `kernel_files`, loaded and registered by name.

#include <string>
#include <vector>

#include "flowdsl/json.hpp"
#include "flowdsl/kernel_library.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

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
