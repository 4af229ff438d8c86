// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file profiler.hpp
/// \brief Per-node GPU times of real graph launches, taken with CUPTI's activity API, and what
/// is made of them: a table, a Chrome trace (Perfetto, chrome://tracing) and per-node timings
/// for to_dot's heat map.
///
/// CUPTI is loaded (dlopen) when a Profiler is made, never before: the library does not link
/// it, and a Runtime that is not profiled never calls it. docs/profiling.md says how the library
/// is found and what each output shows.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/node_timings.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/registry.hpp"
#include "flowdsl/runtime.hpp"

namespace flowdsl {

/// \brief CUPTI could not be loaded, or refused a call: what() says which library or call, and
/// CUPTI's own text for the error.
class ProfilerError : public Error {
 public:
  /// \param message the whole sentence
  /// \param call the CUPTI function that failed, or empty (the library did not load)
  /// \param result the CUptiResult it returned, 0 when `call` is empty
  ProfilerError(std::string message, std::string call = {}, int result = 0);

  const std::string& call() const noexcept { return call_; }
  int result() const noexcept { return result_; }

 private:
  std::string call_;
  int result_;
};

/// \brief A plan position that names no node.
inline constexpr std::uint32_t no_position = ~std::uint32_t{0};

/// \brief Text pairs, e.g. {"grid", "4x1x1"} or {"n", "1024"}.
using NamedValues = std::vector<std::pair<std::string, std::string>>;

/// \brief One node of a profiled graph.
struct ProfiledNode {
  std::string path;       ///< "encoder/scale"
  std::string kind;       ///< "kernel", "memcpy", "while", ...
  NamedValues structure;  ///< the kind's structural fields: {"function", "scale.f32"}, {"grid", "4x1x1"}, ...
  /// A kernel's arguments when the graph was first launched (later changes: LaunchProfile::
  /// arguments), by parameter name ("#0" where the registry does not know the kernel). Pointers
  /// into a named buffer read "x+256", graph memory "'scratch' + 64", a condition "condition of
  /// 'loop'".
  NamedValues arguments;
  std::uint32_t parent = no_position;  ///< position of the node whose body holds it
  std::uint32_t body = 0;              ///< which body of `parent`
  std::vector<std::uint32_t> after;    ///< positions of the nodes it depends on
  NodeId id = no_node;                 ///< its id in the Graph that was profiled first
  /// A library node's: how many native nodes its call recorded (kernels, copies, ...) when the
  /// executable was built; its spans name their kernels (NodeSpan::kernel). 0 for other nodes.
  std::uint32_t recorded = 0;
};

/// \brief A graph as profiled: one per Graph object and topology launched.
struct ProfiledGraph {
  std::string name;  ///< "graph 1", or the name given to Profiler::name
  std::uint64_t uid = 0;
  std::uint64_t topology_hash = 0;
  std::vector<ProfiledNode> nodes;  ///< by plan position
};

/// \brief What the GPU did in a span.
enum class Activity : std::uint8_t { kernel, memcpy, memset };

/// \brief "kernel", "memcpy" or "memset".
const char* to_string(Activity activity) noexcept;

/// \brief One piece of GPU work of a launch, as CUPTI recorded it. A node inside a WHILE body
/// has one span per iteration.
struct NodeSpan {
  std::uint32_t node = no_position;  ///< plan position; no_position: CUPTI's node id matched no node
  Activity activity = Activity::kernel;
  std::uint64_t start_ns = 0;  ///< CUPTI's clock
  std::uint64_t end_ns = 0;
  std::uint32_t stream = 0;  ///< CUPTI's stream id
  std::uint64_t bytes = 0;   ///< copies and fills: bytes moved or set
  /// CUPTI's id of the node that ran it (graphNodeId: the graph's id in the upper 32 bits, the
  /// node's id local to that graph in the lower): what to report when `node` is no_position.
  std::uint64_t graph_node_id = 0;
  /// A kernel a library node recorded (ProfiledNode::recorded): its name, demangled without its
  /// parameters ("scale_kernel", "nvjet_hsh_64x32_..."); the trace names the span
  /// "<node path>/<kernel>". Empty for the spans of other nodes.
  std::string kernel;
};

/// \brief A CUDA runtime or driver call made by the host inside one launch call.
struct HostCall {
  std::string name;      ///< "cudaGraphLaunch", "cuGraphExecKernelNodeSetParams", ...
  std::string category;  ///< "launch", "update", "instantiate", "emit" or "cuda"
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

/// \brief One profiled launch.
struct LaunchProfile {
  std::uint32_t graph = 0;          ///< index into Profile::graphs
  LaunchReport report;              ///< what Runtime::launch said: hit, updated, instantiated...
  std::uint64_t host_start_ns = 0;  ///< around the Runtime::launch call, CUPTI's clock
  std::uint64_t host_end_ns = 0;
  std::vector<HostCall> calls;  ///< CUDA calls made inside it, by start
  std::vector<NodeSpan> spans;  ///< its GPU work, by start
  /// Kernels whose arguments changed since the graph's previous launch: (position, arguments).
  std::vector<std::pair<std::uint32_t, NamedValues>> arguments;
  /// The launch on its stream between two CUDA events (cudaEventElapsedTime), when measured.
  std::optional<double> events_us;
};

/// \brief Everything a Profiler gathered; the outputs below are made from this alone.
struct Profile {
  std::vector<ProfiledGraph> graphs;
  std::vector<LaunchProfile> launches;
  std::uint64_t dropped_records = 0;       ///< records CUPTI dropped (its buffers were full)
  std::uint64_t unattributed_records = 0;  ///< GPU records of graph launches that belong to no profiled launch
};

/// \brief Statistics of one node over the launches of its graph.
struct NodeStatistics {
  bool measured = false;     ///< it has spans (or, holding bodies, its bodies' nodes have)
  std::size_t runs = 0;      ///< its spans over all launches (a WHILE body's node: one per iteration)
  std::size_t launches = 0;  ///< launches in which it ran
  double median_us = 0;      ///< of its GPU time per launch, over the launches in which it ran
  double p90_us = 0;         ///< nearest rank
  double share = 0;          ///< see NodeTiming::share
  bool critical = false;     ///< see NodeTiming::critical
  std::uint32_t critical_after = no_position;
};

/// \brief One launch in numbers (microseconds).
struct LaunchStatistics {
  std::size_t launch = 0;  ///< index into Profile::launches
  double host_us = 0;      ///< the Runtime::launch call on the host
  double gpu_span_us = 0;  ///< first span's start to last span's end
  double node_sum_us = 0;  ///< the spans' durations added up
  double idle_us = 0;      ///< time inside the GPU span when no span ran
  std::optional<double> events_us;
  std::size_t unmapped = 0;  ///< spans that matched no node
};

/// \brief A graph's statistics: per node by plan position, per launch in launch order.
struct GraphStatistics {
  std::vector<NodeStatistics> nodes;
  std::vector<LaunchStatistics> launches;
};

/// \brief The statistics of graph `graph` (an index into profile.graphs).
GraphStatistics statistics(const Profile& profile, std::size_t graph);

/// \brief The per-node timings of graph `graph`, indexed by the NodeIds of a Graph whose plan is
/// `plan` (one of that topology: positions are matched), for DotOptions::timings.
/// \throws UsageError when `plan` has another number of nodes than the profiled graph.
NodeTimings node_timings(const Profile& profile, std::size_t graph, const Plan& plan);

/// \brief The profile as a table: per graph, per node its runs per launch, median and p90 µs
/// and share, a library node's recorded kernels in rows of their own under it
/// ("gemm/<kernel>": runs, median and p90 µs per launch); per launch the kind, host µs, GPU
/// span, node sum, idle gaps and events µs (the first 20 launches, then the median and p90 of all).
std::string profile_table(const Profile& profile);

/// \brief The profile as Chrome trace-event JSON: a host track with one span per launch call
/// (named by what it did: hit, updated, instantiated; its args hold events_us when measured)
/// and the CUDA calls inside it; per GPU
/// stream one track (and more lanes where spans overlap) with one span per node run, named by
/// the node's path, with its kind, kernel, launch shape and arguments; an arrow from each launch
/// call to its first GPU span. Timestamps in µs from the profile's first event.
std::string trace_json(const Profile& profile);

/// \brief Settings of a Profiler.
struct ProfilerOptions {
  /// Where kernel arguments are named and typed; null: KernelRegistry::global(). Must outlive
  /// the profiler.
  const KernelRegistry* registry = nullptr;
};

/// \brief Launches graphs through a Runtime and records what each node did on the GPU: CUPTI's
/// kernel, copy and fill records of the graph launch, mapped back to the nodes by CUPTI's graph
/// node ids (inside child graphs and conditional bodies too).
///
/// Making one loads CUPTI (FLOWDSL_CUPTI, else the library of the CUDA Toolkit the build used,
/// else libcupti.so.<major> from the loader's path), subscribes to it and enables its activity
/// records; destroying it disables them again. CUPTI allows one subscriber per process: one
/// Profiler at a time, and none while Nsight Systems or Compute watch the process.
///
/// CUPTI names the nodes of an executable when the executable is instantiated, so the profiler
/// clears the runtime's cache when it is made: every executable it launches is then
/// instantiated while it watches (the first launch of each graph is a miss).
///
/// Thread-safety: launch() may be called from several threads; launches through the profiled
/// Runtime that bypass the profiler are not recorded. The other members wait for the device.
class Profiler {
 public:
  /// \throws ProfilerError when CUPTI cannot be loaded, is too old or refuses to subscribe
  /// \throws UsageError when another Profiler is alive, or `runtime` runs in debug mode (node by
  ///         node: no graph launch to profile)
  explicit Profiler(Runtime& runtime, ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// \brief Launches `graph` on `stream` through the runtime and records the launch: the host
  /// time of the call, what it did, and, once collected, the GPU spans of its nodes.
  /// \throws what Runtime::launch throws; CudaError for the events around the launch
  LaunchReport launch(const Graph& graph, cudaStream_t stream = nullptr);
  LaunchReport launch(const Graph& graph, const StreamHandle& stream) { return launch(graph, stream.get()); }

  /// \brief Names `graph` in the outputs (default "graph 1", "graph 2", ... in order of first launch).
  void name(const Graph& graph, std::string name);

  /// \brief Waits for the device (cudaDeviceSynchronize), takes CUPTI's records and maps them to
  /// the launches and nodes; returns everything gathered so far.
  /// \throws CudaError, ProfilerError
  const Profile& collect();
  /// \brief collect(), then profile_table().
  std::string report();
  /// \brief collect(), then trace_json() written to `path`.
  /// \throws Error when the file cannot be written
  void write_trace(const std::string& path);
  /// \brief collect(), then node_timings() of `graph`'s topology, by `graph`'s NodeIds: for
  /// `DotOptions::timings`.
  /// \throws UsageError when no graph of that topology was launched through the profiler
  NodeTimings timings(const Graph& graph);
  /// \brief The file CUPTI was loaded from.
  std::string cupti_library() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flowdsl
