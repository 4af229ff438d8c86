// SPDX-License-Identifier: Apache-2.0
// Attribution of CUPTI's records: calls to the launch whose host window holds them, GPU work to
// the launch whose graph-launch call started it, and to the node CUPTI names by its id.
#include "profile_records.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>

#include "log_internal.hpp"

namespace flowdsl::profiling {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// Instantiation copies a graph; a copy of a copy is not expected, but the walk is bounded anyway.
constexpr int max_copy_depth = 4;
// Unresolved records described in the log per add(), at most.
constexpr std::size_t max_logged_records = 32;
// How far (ns) a launch's correlated record may lie outside its events' device times before
// those times are not trusted (the clocks of records and events are CUPTI's both).
constexpr std::uint64_t event_slack_ns = 1000;

bool within(std::uint64_t t, std::uint64_t from, std::uint64_t to) { return from != 0 && from <= t && t <= to; }

}  // namespace

void Records::append(Records&& other) {
  gpu.insert(gpu.end(), std::make_move_iterator(other.gpu.begin()), std::make_move_iterator(other.gpu.end()));
  api.insert(api.end(), std::make_move_iterator(other.api.begin()), std::make_move_iterator(other.api.end()));
  clones.insert(clones.end(), other.clones.begin(), other.clones.end());
  events.insert(events.end(), other.events.begin(), other.events.end());
  graph_clones.insert(graph_clones.end(), other.graph_clones.begin(), other.graph_clones.end());
  created.insert(created.end(), other.created.begin(), other.created.end());
  executables.insert(executables.end(), other.executables.begin(), other.executables.end());
  dropped += other.dropped;
}

std::string kernel_name(const std::string& mangled) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                        std::free);
  if (status != 0 || demangled == nullptr) return mangled;  // a C name ("nvjet_..."), or none
  // A kernel in an unnamed namespace: "(anonymous namespace)::scale(...)" reads "scale".
  std::string text(demangled.get());
  constexpr std::string_view anonymous = "(anonymous namespace)::";
  for (std::size_t at = text.find(anonymous); at != std::string::npos; at = text.find(anonymous, at)) {
    text.erase(at, anonymous.size());
  }
  std::string_view name(text);
  // Cut the parameters: the first '(' outside template brackets.
  int depth = 0;
  std::size_t end = name.size();
  for (std::size_t i = 0; i < name.size() && end == name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == '(' && depth == 0) end = i;
  }
  name = name.substr(0, end);
  // A template's demangled name starts with its return type: "void scale<float>".
  depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == ' ' && depth == 0) start = i + 1;
  }
  return std::string(name.substr(start));
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

void NodeIds::add_graph_clone(std::uint32_t copy, std::uint32_t original) {
  if (copy != original) graph_clones_[copy] = original;
}

void NodeIds::add_flattened(std::uint32_t graph, std::vector<std::uint64_t> flattened) {
  flattened_[graph] = std::move(flattened);
}

// The node itself, or the original its copies lead back to.
std::optional<NodeLocation> NodeIds::find_copy(std::uint64_t id) const {
  for (int depth = 0; depth <= max_copy_depth; ++depth) {
    if (const auto it = originals_.find(id); it != originals_.end()) return it->second;
    const auto copy = clones_.find(id);
    if (copy == clones_.end()) return std::nullopt;
    id = copy->second;
  }
  return std::nullopt;
}

std::optional<NodeLocation> NodeIds::locate(std::uint64_t id) const {
  if (std::optional<NodeLocation> found = find_copy(id)) return found;
  // A node of a graph copied without a callback per node: the same local id in the graph it
  // was copied from (a copy keeps its nodes in order).
  const std::uint32_t local = local_part(id);
  const std::vector<std::uint32_t> origins = graph_origins(graph_part(id));
  for (const std::uint32_t origin : origins) {
    if (std::optional<NodeLocation> found = find_copy(std::uint64_t{origin} << 32 | local)) return found;
  }
  // A node of a body, copied into the executable's graph after that graph's own nodes (seen on
  // the H200, CUDA 13.0: a child graph's kernel and a WHILE body's kernels carry the ids of the
  // executable's graph, numbered after its top-level nodes).
  for (const std::uint32_t origin : origins) {
    const auto flat = flattened_.find(origin);
    if (flat != flattened_.end() && local < flat->second.size()) {
      if (std::optional<NodeLocation> found = find_copy(flat->second[local])) return found;
    }
  }
  return std::nullopt;
}

std::uint32_t NodeIds::position(std::uint64_t id, std::uint64_t executable) const {
  const std::optional<NodeLocation> found = locate(id);
  return found && found->executable == executable ? found->position : no_position;
}

std::vector<std::uint32_t> NodeIds::graph_origins(std::uint32_t graph) const {
  std::vector<std::uint32_t> out;
  for (int depth = 0; depth <= max_copy_depth; ++depth) {
    const auto it = graph_clones_.find(graph);
    if (it == graph_clones_.end()) break;
    graph = it->second;
    out.push_back(graph);
  }
  return out;
}

bool NodeIds::holds_graph(std::uint32_t graph) const {
  return std::any_of(originals_.begin(), originals_.end(), [&](const auto& o) { return graph_part(o.first) == graph; });
}

void Attribution::expect(std::size_t launch, std::uint64_t executable, EventCalls calls) {
  launches_.emplace_back(launch, executable);
  gpu_start_.push_back(0);
  gpu_end_.push_back(0);
  event_calls_.push_back(calls);
  event_window_.emplace_back(0, 0);
}

// A cudaEventRecord (or the driver's cuEventRecord) made in the window of a launch's start or
// stop event: its correlation id will name that event's record. Windows come in launch order.
void Attribution::note_event_call(const ApiRecord& api) {
  const auto after = std::upper_bound(event_calls_.begin(), event_calls_.end(), api.start_ns,
                                      [](std::uint64_t t, const EventCalls& c) { return t < c.start_from; });
  if (after == event_calls_.begin()) return;
  const auto candidate = std::prev(after);
  const auto index = static_cast<std::size_t>(candidate - event_calls_.begin());
  if (within(api.start_ns, candidate->start_from, candidate->start_to)) {
    event_correlation_[api.correlation] = {index, true};
  } else if (within(api.start_ns, candidate->stop_from, candidate->stop_to)) {
    event_correlation_[api.correlation] = {index, false};
  }
}

// Whether every launch's correlated records lie between its events' device times: then those
// times share the records' clock and bound each launch's work.
bool Attribution::event_windows_hold() const {
  bool any = false;
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    const auto [from, to] = event_window_[i];
    if (from == 0 || to == 0 || gpu_start_[i] == 0) continue;
    any = true;
    if (gpu_start_[i] + event_slack_ns < from || gpu_end_[i] > to + event_slack_ns) {
      FLOWDSL_DEBUG("profiler: launch {}'s records span {}..{} ns, outside its events' device times {}..{}: events "
                    "not used to attribute records by time",
                    launches_[i].first + 1, gpu_start_[i], gpu_end_[i], from, to);
      return false;
    }
  }
  return any;
}

// The launch of `executable` that ran `gpu`, by time; launches_.size() when none.
std::size_t Attribution::launch_by_time(const Profile& profile, const GpuRecord& gpu, std::uint64_t executable,
                                        bool by_events) const {
  std::size_t found = launches_.size();
  std::uint64_t begun = 0;
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    if (launches_[i].second != executable) continue;
    if (by_events && event_window_[i].first != 0 && event_window_[i].second != 0) {
      if (within(gpu.start_ns, event_window_[i].first, event_window_[i].second)) return i;
      continue;
    }
    // Launches of one executable run in launch order: one has begun once its first correlated
    // record started, and not before its launch call nor before the launch ahead of it.
    begun = std::max({begun, profile.launches[launches_[i].first].host_start_ns, gpu_start_[i]});
    if (begun > gpu.start_ns) break;
    found = i;
  }
  return found;
}

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

void Attribution::attribute(const GpuRecord& gpu, std::size_t index, Profile& profile) {
  const auto& [launch_index, executable] = launches_[index];
  LaunchProfile& launch = profile.launches[launch_index];
  std::uint32_t position = ids_.position(gpu.graph_node_id, executable);
  const std::vector<ProfiledNode>& nodes = profile.graphs[launch.graph].nodes;
  if (position != no_position && position >= nodes.size()) position = no_position;
  launch.spans.push_back(
      NodeSpan{position, gpu.activity, gpu.start_ns, gpu.end_ns, gpu.stream, gpu.bytes, gpu.graph_node_id, {}});
  // Work recorded from a library call: its node's name alone would not tell its kernels apart.
  if (position != no_position && nodes[position].recorded != 0 && gpu.activity == Activity::kernel) {
    launch.spans.back().kernel = kernel_name(gpu.kernel);
    if (gpu.kernel.empty())
      FLOWDSL_DEBUG("profiler: a kernel of {} came without a name", quoted_name(nodes[position].path));
  }
}

void Attribution::add(Records records, Profile& profile) {
  for (const auto& [copy, original] : records.clones) ids_.add_clone(copy, original);
  for (const auto& [copy, original] : records.graph_clones) ids_.add_graph_clone(copy, original);
  for (const auto& [node, graph] : records.created) created_[node] = graph;
  for (const auto& [executable, graph] : records.executables) executables_[executable] = graph;
  profile.dropped_records += records.dropped;

  std::vector<std::size_t> touched;  // launches that got records, to sort once
  for (ApiRecord& api : records.api) {
    std::string name = call_name(api.name);
    std::string category = call_category(name);
    if (category == "launch") launch_calls_.insert(api.correlation);
    if (name.find("EventRecord") != std::string::npos) note_event_call(api);
    const std::size_t index = launch_at(profile, api.start_ns);
    if (index == launches_.size()) continue;
    LaunchProfile& launch = profile.launches[launches_[index].first];
    if (category == "launch") by_correlation_[api.correlation] = index;
    launch.calls.push_back(HostCall{std::move(name), std::move(category), api.start_ns, api.end_ns});
    touched.push_back(launches_[index].first);
  }

  for (const EventRecord& event : records.events) {
    const auto it = event_correlation_.find(event.correlation);
    if (it == event_correlation_.end() || event.device_ns == 0) continue;
    auto& [from, to] = event_window_[it->second.first];
    (it->second.second ? from : to) = event.device_ns;
  }

  // By correlation first: that also tells when each launch's GPU work began and ended.
  std::vector<const GpuRecord*> uncorrelated;
  std::vector<std::pair<const GpuRecord*, const char*>> unresolved;  // for the log
  for (const GpuRecord& gpu : records.gpu) {
    if (gpu.graph_node_id == 0) continue;  // not work of a graph launch
    const auto it = by_correlation_.find(gpu.correlation);
    if (it == by_correlation_.end()) {
      if (launch_calls_.count(gpu.correlation) == 0) {
        uncorrelated.push_back(&gpu);
      } else {
        ++profile.unattributed_records;  // launched by a call outside every profiled launch
        unresolved.emplace_back(&gpu, "its graph launch was not profiled");
      }
      continue;
    }
    std::uint64_t& start = gpu_start_[it->second];
    start = start == 0 ? gpu.start_ns : std::min(start, gpu.start_ns);
    gpu_end_[it->second] = std::max(gpu_end_[it->second], gpu.end_ns);
    attribute(gpu, it->second, profile);
    touched.push_back(launches_[it->second].first);
    if (profile.launches[launches_[it->second].first].spans.back().node == no_position) {
      unresolved.emplace_back(&gpu, "its id maps to no node of the launch's executable");
    }
  }

  // Then by time, for records no graph-launch call claims: the launch of the node's executable
  // whose events enclose the record on the device, else the last one whose work had begun.
  const bool by_events = !uncorrelated.empty() && event_windows_hold();
  for (const GpuRecord* gpu : uncorrelated) {
    const std::optional<NodeLocation> node = ids_.locate(gpu->graph_node_id);
    const std::size_t found = node ? launch_by_time(profile, *gpu, node->executable, by_events) : launches_.size();
    if (found == launches_.size()) {
      ++profile.unattributed_records;
      unresolved.emplace_back(gpu, node ? "no launch of its executable was running when it started"
                                        : "no graph-launch call has its correlation id and its id maps to no node");
      continue;
    }
    attribute(*gpu, found, profile);
    touched.push_back(launches_[found].first);
  }
  if (!uncorrelated.empty() || !unresolved.empty()) {
    FLOWDSL_DEBUG("profiler: {} GPU records, {} without a graph-launch call's correlation id (attributed by time, {}), "
                  "{} unresolved; CUPTI reported {} node copies, {} graph copies, {} nodes created, {} executables, "
                  "{} events",
                  records.gpu.size(), uncorrelated.size(), by_events ? "between events" : "after the launch began",
                  unresolved.size(), records.clones.size(), records.graph_clones.size(), records.created.size(),
                  records.executables.size(), records.events.size());
  }
  if (!unresolved.empty()) log_unresolved(unresolved);

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

// What CUPTI said about the ids of records that found no node or no launch, each id once: the
// lead's next device run reads from this why nested bodies do not map.
void Attribution::log_unresolved(const std::vector<std::pair<const GpuRecord*, const char*>>& unresolved) const {
  if (!detail::log().should_log(spdlog::level::debug)) return;
  std::unordered_set<std::uint64_t> seen;
  for (const auto& [gpu, why] : unresolved) {
    if (!seen.insert(gpu->graph_node_id).second) continue;
    if (seen.size() > max_logged_records) {
      FLOWDSL_DEBUG("profiler: more unresolved records not described");
      break;
    }
    const std::uint32_t graph = graph_part(gpu->graph_node_id);
    std::string origins;
    for (std::uint32_t g : ids_.graph_origins(graph)) origins += " <- " + std::to_string(g);
    const auto created = created_.find(gpu->graph_node_id);
    const auto executable = executables_.find(gpu->graph_id);
    FLOWDSL_DEBUG(
        "profiler: {} record, node id {} (graph {}, local {}), record graphId {}{}, correlation {}{}: {}; its graph {} "
        "copied from{}; created inside a graph: {}; a profiled executable's node lies in graph {}: {}",
        to_string(gpu->activity), gpu->graph_node_id, graph, local_part(gpu->graph_node_id), gpu->graph_id,
        executable != executables_.end() ? " (an executable of graph " + std::to_string(executable->second) + ")" : "",
        gpu->correlation, launch_calls_.count(gpu->correlation) != 0 ? " (a graph-launch call)" : " (no graph-launch call)",
        why, graph, origins.empty() ? std::string(" nothing CUPTI reported") : origins,
        created != created_.end() ? "in graph " + std::to_string(created->second) : std::string("no"), graph,
        ids_.holds_graph(graph) ? "yes" : "no");
  }
}

}  // namespace flowdsl::profiling
