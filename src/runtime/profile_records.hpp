// CUPTI's records as plain data, and their attribution to profiled launches and nodes. Neither
// CUDA nor CUPTI is needed here: the cpu tests feed it made-up records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
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
};

/// A CUDA runtime or driver call CUPTI saw made.
struct ApiRecord {
  std::string name;  ///< as CUPTI names it: "cudaGraphLaunch_v10000", "cuGraphLaunch"
  std::uint32_t correlation = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

/// What CUPTI delivered: activity records, and the native nodes instantiation copied (CUPTI's
/// ids of the copy and of the node it was copied from).
struct Records {
  std::vector<GpuRecord> gpu;
  std::vector<ApiRecord> api;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> clones;  ///< (copy, original)
  std::uint64_t dropped = 0;

  void append(Records&& other);
};

/// "cudaGraphLaunch_v10000" -> "cudaGraphLaunch": the name without CUPTI's version suffix.
std::string call_name(std::string_view cupti_name);
/// What a call does for a launch: "launch" (cudaGraphLaunch), "update" (cudaGraphExec...SetParams
/// and the like), "instantiate" (cudaGraphInstantiate..., cudaGraphUpload), "emit" (creating
/// graphs and adding nodes) or "cuda" (anything else).
std::string call_category(std::string_view name);

/// CUPTI's ids of the native nodes of executables: each names the node at a plan position of one
/// executable (tagged by the id of its first native node, which no other executable shares).
/// Instantiation copies every node, and CUPTI may report a copy's id; copies lead back to the
/// original.
class NodeIds {
 public:
  void add(std::uint64_t id, std::uint64_t executable, std::uint32_t position);
  void add_clone(std::uint64_t copy, std::uint64_t original);
  bool knows(std::uint64_t id) const { return originals_.count(id) != 0; }
  /// The position of the node behind `id` (itself or the original of a copy) in `executable`;
  /// no_position when unknown or a node of another executable.
  std::uint32_t position(std::uint64_t id, std::uint64_t executable) const;

 private:
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> originals_;
  std::unordered_map<std::uint64_t, std::uint64_t> clones_;  ///< copy -> original
};

/// Moves records into a Profile: each API call made inside a launch's host window joins that
/// launch's calls, and a graph-launch call among them claims, by its correlation id, the GPU
/// records it launched; those are mapped to nodes by their graph node id.
class Attribution {
 public:
  /// Launch `launch` (an index into Profile::launches, given in launch order) ran executable
  /// `executable` (a NodeIds tag).
  void expect(std::size_t launch, std::uint64_t executable);
  NodeIds& ids() { return ids_; }
  const NodeIds& ids() const { return ids_; }

  /// Attributes `records` to `profile`'s launches. Records of graph launches that belong to no
  /// expected launch are counted in Profile::unattributed_records; other records (work outside
  /// graphs, calls outside launches) are dropped.
  void add(Records records, Profile& profile);

 private:
  std::size_t launch_at(const Profile& profile, std::uint64_t time_ns) const;

  NodeIds ids_;
  std::vector<std::pair<std::size_t, std::uint64_t>> launches_;    ///< (launch, executable), in launch order
  std::unordered_map<std::uint32_t, std::size_t> by_correlation_;  ///< graph-launch call -> index into launches_
};

}  // namespace flowdsl::profiling
