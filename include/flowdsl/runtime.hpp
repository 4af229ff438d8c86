#pragma once
/// \file runtime.hpp
/// \brief The runtime: launches graphs through a cache of executables keyed by topology hash.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

/// \brief An instantiated executable as the runtime sees it: something whose nodes can be
/// updated in place and that can be launched. The CUDA backend implements it; tests may
/// implement it to exercise the cache without a GPU.
class Executable {
 public:
  virtual ~Executable() = default;
  /// \brief Applies the current parameters of node `id` of `description`, lowered as `plan`.
  /// Executables must find their native node by its position (`plan.position[id]`), not by id:
  /// graphs of equal topology share an executable and agree on plan positions, but may have
  /// declared their nodes in another order.
  /// \return nothing when applied; the reason when the backend refuses the update (the
  ///         runtime then re-instantiates).
  /// \throws CudaError for failures that are not refusals
  virtual std::optional<std::string> update(const Description& description, const Plan& plan, NodeId id) = 0;
  /// \brief Enqueues one launch on `stream`.
  /// \throws CudaError
  virtual void launch(cudaStream_t stream) = 0;
  /// \brief The native nodes of the executable, by plan position (bodies' nodes included): the
  /// nodes of the native graph it was instantiated from. Tools that map CUDA's per-node records
  /// back to the description read them (flowdsl::Profiler); the runtime itself never does.
  /// \return null when the backend has no native nodes (the default, e.g. a test's fake).
  virtual const std::vector<cudaGraphNode_t>* native_nodes() const noexcept { return nullptr; }
};

/// \brief Makes executables from lowered descriptions.
class Backend {
 public:
  virtual ~Backend() = default;
  /// \brief Emits, instantiates and uploads (on `stream`) the executable of a plan.
  /// \throws ValidationError for device-dependent problems (e.g. shared memory over the limit)
  /// \throws CudaError
  virtual std::unique_ptr<Executable> instantiate(const Description& description, const Plan& plan,
                                                  cudaStream_t stream) = 0;
};

/// \brief The CUDA backend, bound to the device current when it is made.
/// \throws CudaError when no device can be queried.
std::unique_ptr<Backend> make_cuda_backend();

/// \brief Runtime settings.
struct RuntimeOptions {
  std::size_t capacity = 32;  ///< executables kept; the least recently launched goes first
  /// \brief Debug mode: every launch runs the graph node by node in plan order (as
  /// launch_eagerly), synchronises the stream after each node and checks it, so that a failed
  /// launch, an illegal address or a NaN written to a declared output throws DebugError naming
  /// the node. Slow; the cache is not used. Also turned on by the environment variable
  /// FLOWDSL_DEBUG=1 when the runtime is made.
  bool debug = false;
  /// \brief Where debug mode looks up kernels' parameter types (for the NaN check) and names;
  /// null: KernelRegistry::global(). Must outlive the runtime.
  const KernelRegistry* registry = nullptr;
};

/// \brief A debug-mode launch (RuntimeOptions::debug) found a node at fault: its launch failed,
/// CUDA reported an error once it ran (e.g. an illegal address: the CUDA context is then
/// unusable, as after any such error), or it wrote a NaN into a floating-point buffer it
/// declares it writes. what() names the node, its kind, and for a kernel its name, launch
/// shape and arguments.
class DebugError : public Error {
 public:
  /// \param message the whole sentence
  /// \param node the node's path
  /// \param kernel the kernel's name, or empty
  /// \param code the CUDA error, or cudaSuccess for a NaN
  DebugError(std::string message, std::string node, std::string kernel, cudaError_t code);

  const std::string& node() const noexcept { return node_; }
  const std::string& kernel() const noexcept { return kernel_; }
  cudaError_t code() const noexcept { return code_; }

 private:
  std::string node_;
  std::string kernel_;
  cudaError_t code_;
};

/// \brief What a launch of a graph would do now (Runtime::explain).
struct LaunchExplanation {
  /// hit, updated, instantiated (a miss), or debug. An update the backend refuses is only
  /// known when tried: it is explained as updated.
  LaunchKind kind = LaunchKind::instantiated;
  std::vector<std::string> updated_nodes;  ///< updated: the paths of the nodes to update
  /// instantiated: how the closest cached executable differs (the first few differences, e.g.
  /// "node 'gemm': grid 64x1x1 -> 128x1x1"); empty when nothing is cached.
  std::vector<std::string> differences;
  std::size_t difference_count = 0;  ///< instantiated: every difference, including those not listed
  std::size_t closest_equal_nodes = 0;  ///< instantiated: nodes of equal structure in the closest executable
  /// The graph holds memory nodes (alloc, free): only executables of this same Graph count, since
  /// such executables are never shared.
  bool own_executables = false;

  /// \brief One line, e.g. "miss: closest cached executable has 2 of 3 nodes equal; node 'k1':
  /// grid 1x1x1 -> 2x1x1".
  std::string text() const;
};

/// \brief Counters since the runtime was made.
struct RuntimeStatistics {
  std::uint64_t launches = 0;          ///< launches that reached the stream
  std::uint64_t hits = 0;              ///< launches that found their executable cached
  std::uint64_t misses = 0;            ///< launches that instantiated a new executable
  std::uint64_t node_updates = 0;      ///< nodes updated in place
  std::uint64_t reinstantiations = 0;  ///< updates refused by CUDA, solved by re-instantiating
  std::uint64_t evictions = 0;         ///< executables dropped to stay within capacity
  std::uint64_t debug_launches = 0;    ///< launches run node by node in debug mode (also in `launches`)
  /// Misses that made an executable for one Graph alone: its graph holds memory nodes (also in
  /// `misses`).
  std::uint64_t private_executables = 0;
};

/// \brief Graph memory of a device (CUDA's cudaDeviceGetGraphMemAttribute): what alloc nodes of
/// executables use, and what CUDA's graph allocator holds for them. Bytes.
struct GraphMemory {
  std::uint64_t used = 0;           ///< in use by graph allocations now
  std::uint64_t used_high = 0;      ///< the most in use at once (since the process began or CUDA reset it)
  std::uint64_t reserved = 0;       ///< held by the graph allocator now (cudaDeviceGraphMemTrim returns what is unused)
  std::uint64_t reserved_high = 0;  ///< the most held at once
};

/// \brief The graph memory of `device`.
/// \throws CudaError
GraphMemory graph_memory(int device);

/// \brief Launches graphs, keeping their executables in an LRU cache keyed by topology hash.
///
/// A launch whose topology is cached updates only the nodes whose parameters changed since
/// that executable was last launched with this graph, then launches it; with nothing changed
/// it costs O(1) besides cudaGraphLaunch. A graph whose topology is not cached is emitted,
/// instantiated and uploaded. Two Graph objects of equal topology share one executable; when
/// they alternate, every node of the newcomer is updated.
///
/// Graphs holding memory nodes (alloc, free) are the exception: CUDA gives their memory its
/// address per executable, and allows one executable at a time per native graph, so each such
/// Graph gets executables of its own, cached by (topology hash, Graph::uid()) and counted in
/// RuntimeStatistics::private_executables. They stay cached until evicted or cleared, also after
/// their Graph is gone, and hold their graph memory (graph_memory()) as long as they live.
///
/// In debug mode (RuntimeOptions::debug) launches run node by node instead, checked after each
/// node; see RuntimeOptions::debug.
///
/// Thread-safety: all members may be called from several threads at once; launches are
/// serialised by one mutex held from the lookup to cudaGraphLaunch, so the parameters a launch
/// enqueues are the ones its graph held. An executable may be updated or launched again while
/// an earlier launch of it still runs: CUDA orders launches of one executable and applies an
/// update to later launches only.
class Runtime {
 public:
  /// \brief A runtime on the CUDA backend of the device current now. Launches must then run
  /// with that device current (the runtime does not switch devices on each launch).
  /// \throws CudaError when no device is usable.
  explicit Runtime(RuntimeOptions options = {});
  /// \brief A runtime on the given backend.
  Runtime(RuntimeOptions options, std::unique_ptr<Backend> backend);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// \brief Launches `graph` on `stream`.
  /// \throws ValidationError when the graph (or a changed parameter) is invalid; nothing is
  ///         launched and the cache holds the same executables (one found for the graph
  ///         counts as recently used).
  /// \throws CudaError when CUDA fails.
  LaunchReport launch(const Graph& graph, cudaStream_t stream = nullptr);
  /// \brief Launches `graph` on the stream `stream` owns (see make_stream); as above.
  LaunchReport launch(const Graph& graph, const StreamHandle& stream) { return launch(graph, stream.get()); }

  /// \brief Says what launch(graph) would do now: hit, update (which nodes) or miss (how the
  /// closest cached executable differs), or run in debug mode. Changes nothing: no executable
  /// counts as used, no statistics change.
  /// \throws ValidationError when the graph is invalid.
  LaunchExplanation explain(const Graph& graph) const;
  /// \brief Whether launches run in debug mode (RuntimeOptions::debug or FLOWDSL_DEBUG=1).
  bool debug() const noexcept;

  /// \brief Calls `visit` with the cached executable that launch(graph) would use now, under
  /// the runtime's lock, so that the executable cannot be evicted while `visit` runs; calls
  /// nothing when none is cached (or in debug mode). Changes nothing: no executable counts as
  /// used, no statistics change. For tools that inspect what a launch ran (flowdsl::Profiler
  /// reads Executable::native_nodes); launch() never pays for it. `visit` must not call back
  /// into this runtime.
  /// \return whether an executable was found and visited.
  /// \throws ValidationError when the graph is invalid; whatever `visit` throws.
  bool inspect_executable(const Graph& graph, const std::function<void(const Executable&)>& visit) const;

  RuntimeStatistics statistics() const;
  /// \brief Executables cached now.
  std::size_t size() const;
  std::size_t capacity() const noexcept;
  /// \brief Drops every cached executable.
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flowdsl
