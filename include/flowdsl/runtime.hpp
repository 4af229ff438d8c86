// SPDX-License-Identifier: Apache-2.0
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
/// updated in place, that can be launched, and that can tell whether its last launch has ended.
/// The CUDA backend implements it; tests may implement it to exercise the cache without a GPU.
///
/// The runtime calls one executable's members from one thread at a time (it never hands an
/// executable to a second thread while a first enqueues a launch of it), but launch() and
/// mark_end() run outside the runtime's lock, concurrently with calls on other executables.
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
  /// \brief Marks, on `stream`, the end of the launch just enqueued there, for ended(). The
  /// runtime asks for it after each launch of a topology once that topology has been launched on
  /// a second stream (until then no launch pays for it). The CUDA backend records an event.
  /// \throws CudaError
  virtual void mark_end(cudaStream_t stream) = 0;
  /// \brief Whether the launch whose end was marked last has run to its end; never blocks.
  /// Asked only after a mark_end(). The CUDA backend queries its event (cudaEventQuery).
  /// \throws CudaError when the query fails (not when the launch still runs)
  virtual bool ended() const = 0;
  /// \brief The native nodes of the executable, by plan position (bodies' nodes included): the
  /// nodes of the native graph it was instantiated from. Tools that map CUDA's per-node records
  /// back to the description read them (flowdsl::Profiler); the runtime itself never does.
  /// \return null when the backend has no native nodes (the default, e.g. a test's fake).
  virtual const std::vector<cudaGraphNode_t>* native_nodes() const noexcept { return nullptr; }
  /// \brief The native executable itself, for tools that time or inspect it apart from the
  /// runtime (it stays owned by this executable). Null when the backend has none (the default).
  virtual cudaGraphExec_t native_executable() const noexcept { return nullptr; }
  /// \brief The native executable when a launch of this one is exactly `cudaGraphLaunch` of it
  /// (nothing recorded or freed around it): the runtime then makes a repeated launch's call
  /// itself, reading no more of this object. Null otherwise (the default).
  virtual cudaGraphExec_t direct_launch() const noexcept { return nullptr; }
  /// \brief Device memory the executable took when it was instantiated and uploaded, in bytes:
  /// its graph memory (alloc nodes) and what CUDA keeps for its nodes. The CUDA backend measures
  /// the device's free memory before and after (cudaMemGetInfo, whose figures move by whole
  /// pages of 2 MiB), so memory other threads took meanwhile counts too; for a graph holding
  /// memory nodes it waits for the upload on the stream first. 0 when the backend does not
  /// measure it (the default).
  virtual std::uint64_t device_memory() const noexcept { return 0; }
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
  /// Executables kept, of every topology and pool together; the least recently launched goes first.
  std::size_t capacity = 32;
  /// \brief Debug mode: every launch runs the graph node by node in plan order (as
  /// launch_eagerly), synchronises the stream after each node and checks it, so that a failed
  /// launch, an illegal address or a NaN written to a declared output throws DebugError naming
  /// the node. Slow; the cache is not used. Also turned on by the environment variable
  /// FLOWDSL_DEBUG=1 when the runtime is made.
  bool debug = false;
  /// \brief Where debug mode looks up kernels' parameter types (for the NaN check) and names;
  /// null: KernelRegistry::global(). Must outlive the runtime.
  const KernelRegistry* registry = nullptr;
  /// \brief At most this many executables of one topology (0 counts as 1): a launch on a stream
  /// gets one that is not busy on another stream, so that Graphs of one topology launched on
  /// several streams run at once (CUDA runs the launches of one executable one after the other,
  /// whatever their streams). When all are busy and the pool is full, the least recently used one
  /// is launched again, after its running launch. Graphs holding memory nodes get one each.
  std::size_t executables_per_topology = 8;
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
  /// hit, updated: the executable was last synchronised with another Graph object, so the nodes
  /// to update are those whose parameters differ from the ones it holds, compared value by value
  /// (otherwise: those changed since its last launch of this Graph).
  bool compared_values = false;
  /// instantiated: how the closest cached executable differs (the first few differences, e.g.
  /// "node 'gemm': grid 64x1x1 -> 128x1x1"); empty when nothing is cached.
  std::vector<std::string> differences;
  std::size_t difference_count = 0;  ///< instantiated: every difference, including those not listed
  std::size_t closest_equal_nodes = 0;  ///< instantiated: nodes of equal structure in the closest executable
  /// The graph's executables are its own (it holds memory nodes, or Graph::own_executable): only
  /// executables of this same Graph count.
  bool own_executables = false;
  /// Executables of this topology cached now (for a graph holding memory nodes: of this Graph).
  std::size_t executables = 0;
  /// instantiated with `executables` > 0: each of them may still run a launch on another stream,
  /// and the pool has room for another one (RuntimeOptions::executables_per_topology).
  /// hit, updated: the executable chosen may still run a launch on another stream (every one
  /// does and the pool is full): CUDA starts this launch after that one.
  bool busy = false;

  /// \brief One line, e.g. "miss: closest cached executable has 2 of 3 nodes equal; node 'k1':
  /// grid 1x1x1 -> 2x1x1".
  std::string text() const;
};

/// \brief Counters since the runtime was made.
struct RuntimeStatistics {
  std::uint64_t launches = 0;          ///< launches that reached the stream (counted once given their executable; one that fails is taken back)
  std::uint64_t hits = 0;              ///< launches that found their executable cached
  std::uint64_t misses = 0;            ///< launches that instantiated a new executable (and prepare() calls that did)
  std::uint64_t prepared = 0;          ///< executables prepare() instantiated ahead of any launch (also in `misses`)
  std::uint64_t node_updates = 0;      ///< nodes updated in place
  std::uint64_t reinstantiations = 0;  ///< updates refused by CUDA, solved by re-instantiating
  std::uint64_t evictions = 0;         ///< executables dropped to stay within capacity
  std::uint64_t debug_launches = 0;    ///< launches run node by node in debug mode (also in `launches`)
  /// Misses that made an executable for one Graph alone: its graph holds memory nodes or asked for
  /// its own (Graph::own_executable) (also in `misses`).
  std::uint64_t private_executables = 0;
  /// Hits on an executable last synchronised with another Graph object: the parameters were
  /// compared value by value, and only the nodes that differ were updated (in `node_updates`).
  std::uint64_t value_diffs = 0;
  /// Misses that made a further executable of a topology already cached, because each cached one
  /// might still run a launch on another stream (also in `misses`).
  std::uint64_t busy_misses = 0;
  /// Launches given an executable that might still run a launch on another stream, because every
  /// one of their topology might and the pool was full: CUDA ran them one after the other.
  std::uint64_t busy_launches = 0;
  /// Device memory of the executables cached now, in bytes (Executable::device_memory of each):
  /// a gauge, not a counter.
  std::uint64_t executable_bytes = 0;
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
/// instantiated and uploaded. Graph objects of equal topology share executables: an executable
/// last synchronised with another Graph (a rebuilt one, or one taking turns with this one)
/// compares this Graph's parameters with the ones it holds and updates only the nodes that
/// differ.
///
/// Each topology has a small pool of executables (RuntimeOptions::executables_per_topology), so
/// that launches on several streams run at once: a launch gets an executable that is not busy
/// on another stream, preferring the one last synchronised with its Graph, then one last
/// launched on its stream. Executables of every pool count against the capacity.
///
/// Graphs holding memory nodes (alloc, free) are the exception: CUDA gives their memory its
/// address per executable, and allows one executable at a time per native graph, so each such
/// Graph gets an executable of its own, cached by (topology hash, Graph::uid()) and counted in
/// RuntimeStatistics::private_executables. It stays cached until evicted or cleared, also after
/// its Graph is gone, and holds its graph memory (graph_memory()) as long as it lives. A Graph
/// may ask for executables of its own too (Graph::own_executable); the same holds for them,
/// except that their pool may hold several, as a shared one does.
///
/// In debug mode (RuntimeOptions::debug) launches run node by node instead, checked after each
/// node; see RuntimeOptions::debug.
///
/// Thread-safety: all members may be called from several threads at once. A launch holds one
/// mutex while it picks, updates or instantiates its executable, and releases it around
/// cudaGraphLaunch, during which no other launch gets that executable; so the parameters a
/// launch enqueues are the ones its graph held, and launches of different executables reach
/// CUDA concurrently. An executable may be updated or launched again while an earlier launch of
/// it still runs: CUDA orders launches of one executable and applies an update to later
/// launches only.
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

  /// \brief Makes `graph` ready to launch without launching it: instantiates and uploads (on
  /// `stream`) its executable when none of its topology is cached, so that its first launch is a
  /// hit or an update. For work that should not pay for instantiation later (a serving engine's
  /// batch buckets, made up front). In debug mode it does nothing (LaunchKind::debug).
  /// \return instantiated, or hit when an executable of the topology was cached already (its
  ///         parameters are applied by the next launch, as always).
  /// \throws ValidationError when the graph is invalid; CudaError when CUDA fails. The cache then
  ///         holds the same executables.
  LaunchReport prepare(const Graph& graph, cudaStream_t stream = nullptr);

  /// \brief Says what launch(graph, stream) would do now: hit, update (which nodes, and whether
  /// found by comparing values) or miss (how the closest cached executable differs, or that the
  /// cached ones are busy on other streams), or run in debug mode. Changes nothing: no
  /// executable counts as used, no statistics change. While other threads enqueue launches of
  /// every executable of the topology, it explains the least recently used one.
  /// \throws ValidationError when the graph is invalid.
  LaunchExplanation explain(const Graph& graph, cudaStream_t stream = nullptr) const;
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
  /// \brief Executables cached now, of every topology.
  std::size_t size() const;
  std::size_t capacity() const noexcept;
  /// \brief Drops every cached executable (one that another thread is enqueueing a launch of
  /// is destroyed once that launch is enqueued).
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// \brief What each library node of `graph` recorded into the executable `runtime` holds for
/// it (the one Runtime::inspect_executable visits), by NodeId; every entry unknown when none is
/// cached. DOT draws it (DotOptions::recordings); nothing is recorded again.
/// \throws ValidationError when the graph is invalid; CudaError
std::vector<Recording> recordings(const Runtime& runtime, const Graph& graph);

}  // namespace flowdsl
