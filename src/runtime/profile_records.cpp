// Attribution of CUPTI's records: calls to the launch whose host window holds them, GPU work to
// the launch whose graph-launch call started it, and to the node CUPTI names by its id.
#include "profile_records.hpp"

#include <algorithm>
#include <iterator>

namespace flowdsl::profiling {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// Instantiation copies a graph; a copy of a copy is not expected, but the walk is bounded anyway.
constexpr int max_copy_depth = 4;

}  // namespace

void Records::append(Records&& other) {
  gpu.insert(gpu.end(), std::make_move_iterator(other.gpu.begin()), std::make_move_iterator(other.gpu.end()));
  api.insert(api.end(), std::make_move_iterator(other.api.begin()), std::make_move_iterator(other.api.end()));
  clones.insert(clones.end(), other.clones.begin(), other.clones.end());
  dropped += other.dropped;
}

std::string call_name(std::string_view cupti_name) {
  const std::size_t suffix = cupti_name.rfind("_v");
  if (suffix == std::string_view::npos || suffix + 2 == cupti_name.size()) return std::string(cupti_name);
  const std::string_view digits = cupti_name.substr(suffix + 2);
  const bool version = std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  return std::string(version ? cupti_name.substr(0, suffix) : cupti_name);
}

std::string call_category(std::string_view name) {
  if (contains(name, "GraphLaunch")) return "launch";
  if (contains(name, "GraphInstantiate") || contains(name, "GraphUpload")) return "instantiate";
  if (starts_with(name, "cudaGraphExec") || starts_with(name, "cuGraphExec")) {
    const bool changes = contains(name, "SetParams") || contains(name, "Update") || contains(name, "SetEvent") ||
                         contains(name, "SetEnabled");
    return changes ? "update" : "cuda";
  }
  if (contains(name, "GraphCreate") || contains(name, "GraphAdd") || contains(name, "ConditionalHandleCreate")) {
    return "emit";
  }
  return "cuda";
}

void NodeIds::add(std::uint64_t id, std::uint64_t executable, std::uint32_t position) {
  originals_[id] = {executable, position};
}

void NodeIds::add_clone(std::uint64_t copy, std::uint64_t original) { clones_[copy] = original; }

std::uint32_t NodeIds::position(std::uint64_t id, std::uint64_t executable) const {
  for (int depth = 0; depth <= max_copy_depth; ++depth) {
    if (const auto it = originals_.find(id); it != originals_.end()) {
      return it->second.first == executable ? it->second.second : no_position;
    }
    const auto copy = clones_.find(id);
    if (copy == clones_.end()) return no_position;
    id = copy->second;
  }
  return no_position;
}

void Attribution::expect(std::size_t launch, std::uint64_t executable) { launches_.emplace_back(launch, executable); }

// The index into launches_ of the launch whose host window holds `time_ns`, or launches_.size().
std::size_t Attribution::launch_at(const Profile& profile, std::uint64_t time_ns) const {
  // Windows do not overlap (the profiler serialises its launches) and come in launch order.
  const auto after = std::upper_bound(launches_.begin(), launches_.end(), time_ns, [&](std::uint64_t t, const auto& l) {
    return t < profile.launches[l.first].host_start_ns;
  });
  if (after == launches_.begin()) return launches_.size();
  const auto candidate = std::prev(after);
  const LaunchProfile& launch = profile.launches[candidate->first];
  return time_ns <= launch.host_end_ns ? static_cast<std::size_t>(candidate - launches_.begin()) : launches_.size();
}

void Attribution::add(Records records, Profile& profile) {
  for (const auto& [copy, original] : records.clones) ids_.add_clone(copy, original);
  profile.dropped_records += records.dropped;

  std::vector<std::size_t> touched;  // launches that got records, to sort once
  for (ApiRecord& api : records.api) {
    const std::size_t index = launch_at(profile, api.start_ns);
    if (index == launches_.size()) continue;
    LaunchProfile& launch = profile.launches[launches_[index].first];
    std::string name = call_name(api.name);
    std::string category = call_category(name);
    if (category == "launch") by_correlation_[api.correlation] = index;
    launch.calls.push_back(HostCall{std::move(name), std::move(category), api.start_ns, api.end_ns});
    touched.push_back(launches_[index].first);
  }
  for (const GpuRecord& gpu : records.gpu) {
    if (gpu.graph_node_id == 0) continue;  // not work of a graph launch
    const auto it = by_correlation_.find(gpu.correlation);
    if (it == by_correlation_.end()) {
      ++profile.unattributed_records;
      continue;
    }
    const auto& [launch_index, executable] = launches_[it->second];
    LaunchProfile& launch = profile.launches[launch_index];
    std::uint32_t position = ids_.position(gpu.graph_node_id, executable);
    if (position != no_position && position >= profile.graphs[launch.graph].nodes.size()) position = no_position;
    launch.spans.push_back(NodeSpan{position, gpu.activity, gpu.start_ns, gpu.end_ns, gpu.stream, gpu.bytes});
    touched.push_back(launch_index);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (std::size_t index : touched) {
    LaunchProfile& launch = profile.launches[index];
    std::stable_sort(launch.calls.begin(), launch.calls.end(),
                     [](const HostCall& a, const HostCall& b) { return a.start_ns < b.start_ns; });
    std::stable_sort(launch.spans.begin(), launch.spans.end(),
                     [](const NodeSpan& a, const NodeSpan& b) { return a.start_ns < b.start_ns; });
  }
}

}  // namespace flowdsl::profiling
