// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kernel_files.hpp
/// \brief The kernels a graph file declares in `kernel_files`, loaded and registered by name.

#include <cstdint>
#include <string>
#include <vector>

#include "flowdsl/json.hpp"
#include "flowdsl/kernel_library.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

/// \brief The largest kernel file load_kernel_files accepts, in bytes (1 GiB).
inline constexpr std::uint64_t max_kernel_file_bytes = std::uint64_t{1} << 30;

/// \brief Checks, without loading anything, that every file of spec.kernel_files is a regular
/// file of 1 byte to max_kernel_file_bytes (not a directory, a device such as /dev/zero, a pipe
/// such as /dev/stdin, or a /proc file, which claims no size): one problem per entry that is
/// not, at `/kernel_files/<i>/file`, naming the path and what it is.
/// \param missing_ok whether a file that does not exist passes (checking a graph where its
/// kernels are not built, as `flowdsl validate` does); a file that exists is checked all the same.
std::vector<JsonProblem> check_kernel_files(const GraphSpec& spec, const std::string& base_dir,
                                            bool missing_ok = false);

/// \brief Loads every file of spec.kernel_files (one library per distinct file, paths
/// relative to `base_dir` unless absolute) and adds each declared kernel to `registry` under
/// its name, with its declared parameters.
///
/// The registry entries point into the libraries: keep the returned libraries alive while
/// `registry` or any graph bound through it is in use, and use a registry that does not
/// outlive them (not the global one when the libraries are temporary).
/// \throws JsonError when check_kernel_files finds a problem (nothing is loaded then).
/// \throws CudaError when a file or symbol cannot be loaded.
/// \throws UsageError when a name is already registered.
std::vector<KernelLibrary> load_kernel_files(const GraphSpec& spec, const std::string& base_dir,
                                             KernelRegistry& registry);

}  // namespace flowdsl
