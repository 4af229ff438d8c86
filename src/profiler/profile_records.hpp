// SPDX-License-Identifier: Apache-2.0
// CUPTI's records as plain data, and their attribution to profiled launches and nodes. Neither
// CUDA nor CUPTI is needed here: the cpu tests feed it made-up records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "flowdsl/profiler.hpp"

namespace flowdsl::profiling {

/// A kernel, copy or fill CUPTI saw run.
struct GpuRecord {
  Activity activity = Activity::kernel;
  std::uint64_t graph_node_id = 0;  ///< CUPTI's id of the node that ran it; 0 outside graph launches
  std::uint32_t correlation = 0;    ///< the id of the API call that launched it
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t stream = 0;
  std::uint64_t bytes = 0;
  std::uint32_t graph_id = 0;  ///< CUPTI's id of the graph that launched it (read for diagnosis only)
  std::string kernel = {};     ///< a kernel's name as CUPTI gives it (mangled); empty for copies and fills
};

/// A CUDA runtime or driver call CUPTI saw made.
struct ApiRecord {
  std::string name;  ///< as CUPTI names it: "cudaGraphLaunch_v10000", "cuGraphLaunch"
  std::uint32_t correlation = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

/// A CUDA event recorded on a stream, with the device's time of it (CUPTI's clock).
struct EventRecord {
  std::uint32_t correlation = 0;  ///< the id of the cudaEventRecord call
  std::uint32_t stream = 0;
  std::uint64_t device_ns = 0;
};

/// The host windows (CUPTI's clock) in which a profiled launch recorded its start event (just
/// before the launch call) and its stop event (just after); zero when it recorded none.
struct EventCalls {
  std::uint64_t start_from = 0, start_to = 0;
  std::uint64_t stop_from = 0, stop_to = 0;
};

/// What CUPTI delivered: activity records, the native nodes and graphs instantiation copied
/// (CUPTI's ids of the copy and of what it was copied from), and, for diagnosis, the nodes
/// created inside graphs and the executables created while the session watched.
struct Records {
  std::vector<GpuRecord> gpu;
  std::vector<ApiRecord> api;
  std::vector<EventRecord> events;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> clones;        ///< nodes: (copy, original)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> graph_clones;  ///< graphs: (copy, original)
  std::vector<std::pair<std::uint64_t, std::uint32_t>> created;       ///< nodes created: (node, its graph)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> executables;   ///< (executable, its graph)
  std::uint64_t dropped = 0;

  void append(Records&& other);
};

/// "_Z12scale_kerneliPf" -> "scale_kernel": a kernel's name demangled, without its parameters
/// and its return type; a name that does not demangle is returned as it is.
std::string kernel_name(const std::string& mangled);

/// "cudaGraphLaunch_v10000" -> "cudaGraphLaunch": the name without CUPTI's version suffix.
std::string call_name(std::string_view cupti_name);
/// What a call does for a launch: "launch" (cudaGraphLaunch), "update" (cudaGraphExec...SetParams
/// and the like), "instantiate" (cudaGraphInstantiate..., cudaGraphUpload), "emit" (creating
/// graphs and adding nodes) or "cuda" (anything else).
std::string call_category(std::string_view name);

/// A node of a profiled executable: the executable's tag and the node's plan position.
struct NodeLocation {
  std::uint64_t executable = 0;
  std::uint32_t position = 0;
};

/// CUPTI's node id packs the id of the graph holding the node (upper 32 bits) and the node's id
/// local to that graph (lower 32 bits), as cudaGraphNodeGetLocalId and cudaGraphGetId of CUDA
/// 13.1 name them.
constexpr std::uint32_t graph_part(std::uint64_t node_id) { return static_cast<std::uint32_t>(node_id >> 32); }
constexpr std::uint32_t local_part(std::uint64_t node_id) { return static_cast<std::uint32_t>(node_id); }

/// CUPTI's ids of the native nodes of executables: each names the node at a plan position of one
/// executable (tagged by the id of its first native node, which no other executable shares).
/// Instantiation copies every node, and CUPTI may report a copy's id; copies lead back to the
/// original. A node of a copied graph (a child graph's or a conditional body's, copied inside
/// the executable) for which CUPTI reported no node copy leads back to the node with the same
/// local id in the graph it was copied from.
class NodeIds {
 public:
  void add(std::uint64_t id, std::uint64_t executable, std::uint32_t position);
  void add_clone(std::uint64_t copy, std::uint64_t original);
  void add_graph_clone(std::uint32_t copy, std::uint32_t original);
  /// The ids of an executable's native nodes in the order CUDA numbers their copies in the
  /// executable's graph: `graph`'s own nodes by local id, then the nodes of the bodies they hold
  /// (child graphs, conditional bodies), level by level, each body's by local id. A copy of
  /// `graph` whose node has local id L then stands for flattened[L].
  void add_flattened(std::uint32_t graph, std::vector<std::uint64_t> flattened);
  bool knows(std::uint64_t id) const { return originals_.count(id) != 0; }
  /// The node behind `id`: itself, the original of a copy, or the node of the same local id in
  /// a graph that `id`'s graph was copied from; none when unknown.
  std::optional<NodeLocation> locate(std::uint64_t id) const;
  /// locate(id)'s position when the node belongs to `executable`, else no_position.
  std::uint32_t position(std::uint64_t id, std::uint64_t executable) const;
  /// The chain of graphs `graph` was copied from, nearest first (diagnosis).
  std::vector<std::uint32_t> graph_origins(std::uint32_t graph) const;
  /// Whether some node of a profiled executable lies in `graph` (diagnosis).
  bool holds_graph(std::uint32_t graph) const;

 private:
  std::optional<NodeLocation> find_copy(std::uint64_t id) const;

  std::unordered_map<std::uint64_t, NodeLocation> originals_;
  std::unordered_map<std::uint64_t, std::uint64_t> clones_;        ///< copy -> original
  std::unordered_map<std::uint32_t, std::uint32_t> graph_clones_;  ///< copy -> original
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> flattened_;  ///< see add_flattened
};

/// Moves records into a Profile: each API call made inside a launch's host window joins that
/// launch's calls, and a graph-launch call among them claims, by its correlation id, the GPU
/// records it launched; those are mapped to nodes by their graph node id. A record of a node of
/// a profiled executable whose correlation id is that of no graph-launch call CUPTI reported
/// (on the H200, a WHILE body's kernels) joins, by time, the launch of that executable whose
/// start and stop events enclose it on the device; without those events' device times, the last
/// launch of that executable whose GPU work had begun when the record started (launches of one
/// executable run one after another).
class Attribution {
 public:
  /// Launch `launch` (an index into Profile::launches, given in launch order) ran executable
  /// `executable` (a NodeIds tag).
  void expect(std::size_t launch, std::uint64_t executable, EventCalls calls = {});
  NodeIds& ids() { return ids_; }
  const NodeIds& ids() const { return ids_; }

  /// Attributes `records` to `profile`'s launches. Records of graph launches that belong to no
  /// expected launch are counted in Profile::unattributed_records; other records (work outside
  /// graphs, calls outside launches) are dropped. Records left unmapped or unattributed are
  /// described in the library's log at debug level, with what CUPTI reported about their ids.
  void add(Records records, Profile& profile);

 private:
  std::size_t launch_at(const Profile& profile, std::uint64_t time_ns) const;
  void note_event_call(const ApiRecord& api);
  bool event_windows_hold() const;
  std::size_t launch_by_time(const Profile& profile, const GpuRecord& gpu, std::uint64_t executable,
                             bool by_events) const;
  void attribute(const GpuRecord& gpu, std::size_t index, Profile& profile);
  void log_unresolved(const std::vector<std::pair<const GpuRecord*, const char*>>& unresolved) const;

  NodeIds ids_;
  std::vector<std::pair<std::size_t, std::uint64_t>> launches_;    ///< (launch, executable), in launch order
  // Per launches_ entry: the start of its first correlated record and the end of its last (0:
  // none yet), its event calls, and the device times of its start and stop events (0: unknown).
  std::vector<std::uint64_t> gpu_start_, gpu_end_;
  std::vector<EventCalls> event_calls_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> event_window_;
  std::unordered_map<std::uint32_t, std::pair<std::size_t, bool>> event_correlation_;  ///< call -> (launch, is start)
  std::unordered_map<std::uint32_t, std::size_t> by_correlation_;  ///< graph-launch call -> index into launches_
  std::unordered_set<std::uint32_t> launch_calls_;                 ///< every graph-launch call seen
  std::unordered_map<std::uint64_t, std::uint32_t> created_;       ///< node created inside a graph -> the graph (diagnosis)
  std::unordered_map<std::uint32_t, std::uint32_t> executables_;   ///< executable -> its graph (diagnosis)
};

}  // namespace flowdsl::profiling
