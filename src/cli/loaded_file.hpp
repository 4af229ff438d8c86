// SPDX-License-Identifier: Apache-2.0
// A graph file made ready to launch on the current device, as `flowdsl run` and `flowdsl bench`
// need it: checked, its kernel files loaded, its buffers allocated and initialised, its events
// made, its graph bound.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernel_files.hpp"

namespace flowdsl::cli {

/// \brief A problem with the environment (no device, old driver, not enough memory), said in
/// one sentence; the tool exits with 2.
struct EnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// \brief A problem with an input other than the graph file's JSON (a .npy file, an output
/// folder); the tool exits with 1.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// \brief The rank and world this process reads graph files with (their `{"expr": ...}`
/// integers): set once by the tool from the launcher's environment; {0, 1} by default.
JsonRanks& file_ranks();

/// \brief The folder holding `path` ("." for a bare name).
std::string folder_of(const std::string& path);

/// \brief Reads and checks a graph file completely (no GPU needed), the files it names
/// included: each kernel file that exists must be a regular file of bounded size
/// (check_kernel_files; a missing one is reported by LoadedFile, not here), each
/// .npy initialisation must open and its header match its buffer (check_initial_contents).
/// \throws JsonError, a problem of a named file at `/kernel_files/<i>/file` or `/buffers/<i>/init`
GraphSpec checked_spec(const std::string& file, const HostFunctions& hosts);

/// \brief Checks that a CUDA device is usable.
/// \throws EnvironmentError saying why not (no device, a driver too old for this build).
void require_device();

/// \brief Where the time of making a LoadedFile went, in milliseconds (host clock).
struct LoadPhases {
  double read_check = 0;    ///< reading the file and checking it and the files it names
  double device = 0;        ///< the device made usable (the CUDA context), the file's kernels loaded
  double allocate = 0;      ///< the buffers' cudaMalloc
  double upload = 0;        ///< their initial contents produced and copied (weights, .npy files)
  double bind = 0;          ///< the graph declared and validated on the buffers
  std::uint64_t uploaded_bytes = 0;
};

/// \brief A graph file on the current device. Owns everything its graph points to: destroying
/// it frees the buffers, events and kernel libraries (launches of its graph must be finished).
class LoadedFile {
 public:
  /// \brief Checks `file` and the files it names (checked_spec, and that every kernel file
  /// exists), then that a device is usable
  /// (require_device), refuses buffers larger than the device's free memory before
  /// allocating or reading anything, then
  /// loads the file's kernels (into a registry holding the global one's too), allocates and
  /// initialises its buffers, makes one event (cudaEventDisableTiming) per event name its
  /// nodes use, and binds the graph.
  /// \throws EnvironmentError, InputError, JsonError, CudaError
  /// `fuse`: fuse runs of element-wise kernels (Graph::fuse) whatever the file says.
  LoadedFile(const std::string& file, const HostFunctions& hosts, bool fuse = false);
  LoadedFile(const LoadedFile&) = delete;  // the graph points into it
  LoadedFile& operator=(const LoadedFile&) = delete;

  const GraphSpec& spec() const noexcept { return spec_; }
  const Graph& graph() const noexcept { return graph_; }
  /// \brief The registry the graph's kernels are in (for RuntimeOptions::registry).
  const KernelRegistry& registry() const noexcept { return registry_; }
  /// \brief The device the buffers are on.
  int device() const noexcept { return device_; }
  /// \brief The device address of buffer `name`.
  void* address(const std::string& name) const { return addresses_.at(name); }
  /// \brief The bytes of every buffer together.
  std::uint64_t buffer_bytes() const noexcept { return buffer_bytes_; }
  /// \brief Where the time of loading went.
  const LoadPhases& phases() const noexcept { return phases_; }

 private:
  using DeviceMemory = UniqueHandle<void*, &cudaFree>;

  LoadPhases phases_;  // before spec_: reading the file is its first phase
  GraphSpec spec_;
  int device_ = 0;
  KernelRegistry registry_;
  std::vector<KernelLibrary> libraries_;
  std::vector<DeviceMemory> memory_;
  BufferAddresses addresses_;
  std::uint64_t buffer_bytes_ = 0;
  std::vector<EventHandle> events_;
  Graph graph_;
};

}  // namespace flowdsl::cli
