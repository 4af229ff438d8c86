#pragma once
/// \file runtime.hpp
/// \brief The runtime: launches graphs through a cache of executables keyed by topology hash.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/plan.hpp"

namespace flowdsl {

/// \brief An instantiated executable as the runtime sees it: something whose nodes can be
/// updated in place and that can be launched. The CUDA backend implements it; tests may
/// implement it to exercise the cache without a GPU.
class Executable {
 public:
  virtual ~Executable() = default;
  /// \brief Applies the current parameters of node `id` of `description`.
  /// \param position the node's position in the plan (Plan::position). Executables must find
  ///        their native node by position, not by id: graphs of equal topology share an
  ///        executable and agree on plan positions, but may have declared their nodes in
  ///        another order.
  /// \return nothing when applied; the reason when the backend refuses the update (the
  ///         runtime then re-instantiates).
  /// \throws CudaError for failures that are not refusals
  virtual std::optional<std::string> update(const Description& description, NodeId id, std::uint32_t position) = 0;
  /// \brief Enqueues one launch on `stream`.
  /// \throws CudaError
  virtual void launch(cudaStream_t stream) = 0;
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
};

/// \brief Counters since the runtime was made.
struct RuntimeStatistics {
  std::uint64_t launches = 0;          ///< launches that reached the stream
  std::uint64_t hits = 0;              ///< launches that found their executable cached
  std::uint64_t misses = 0;            ///< launches that instantiated a new executable
  std::uint64_t node_updates = 0;      ///< nodes updated in place
  std::uint64_t reinstantiations = 0;  ///< updates refused by CUDA, solved by re-instantiating
  std::uint64_t evictions = 0;         ///< executables dropped to stay within capacity
};

/// \brief Launches graphs, keeping their executables in an LRU cache keyed by topology hash.
///
/// A launch whose topology is cached updates only the nodes whose parameters changed since
/// that executable was last launched with this graph, then launches it; with nothing changed
/// it costs O(1) besides cudaGraphLaunch. A graph whose topology is not cached is emitted,
/// instantiated and uploaded. Two Graph objects of equal topology share one executable; when
/// they alternate, every node of the newcomer is updated.
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
