// SPDX-License-Identifier: Apache-2.0
// The Profiler: launches through a Runtime, timed on the host and between events on the
// stream, with the native nodes of each executable named to CUPTI's ids so that its records
// map back to nodes once collected.
#include "flowdsl/profiler.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cupti_session.hpp"
#include "log_internal.hpp"
#include "lower/recording.hpp"
#include "profile_graph.hpp"
#include "profile_records.hpp"

namespace flowdsl {

ProfilerError::ProfilerError(std::string message, std::string call, int result)
    : Error(message), call_(std::move(call)), result_(result) {}

namespace {

// The events around one launch, read once the device is idle.
struct LaunchEvents {
  std::size_t launch = 0;
  EventHandle start;
  EventHandle stop;
};

}  // namespace

struct Profiler::Impl {
  Impl(Runtime& r, const ProfilerOptions& options)
      : runtime(r), registry(options.registry != nullptr ? options.registry : &KernelRegistry::global()) {}

  std::uint32_t graph_index(const Graph& graph, const Plan& plan);
  void log_native_nodes(std::uint32_t index, std::uint64_t tag, const std::vector<cudaGraphNode_t>& nodes);
  std::vector<std::pair<std::uint32_t, NamedValues>> changed_arguments(const Graph& graph, std::uint32_t index);
  std::uint64_t name_executable(const Graph& graph, std::uint32_t index);
  LaunchEvents take_events();
  const Profile& collect();

  Runtime& runtime;
  const KernelRegistry* registry;
  profiling::CuptiSession session;
  profiling::Attribution attribution;
  Profile profile;
  std::vector<std::uint64_t> versions;  ///< per graph: the parameter version its arguments were taken at
  std::unordered_map<std::uint64_t, std::string> names;  ///< by Graph::uid
  std::vector<LaunchEvents> unread;                      ///< events of launches not collected yet
  std::vector<LaunchEvents> spare;                       ///< events read, for later launches
  std::vector<NodeId> changed;                           ///< scratch
  std::mutex mutex;
};

std::uint32_t Profiler::Impl::graph_index(const Graph& graph, const Plan& plan) {
  for (std::size_t g = profile.graphs.size(); g-- > 0;) {
    if (profile.graphs[g].uid == graph.uid() && profile.graphs[g].topology_hash == plan.topology_hash) {
      return static_cast<std::uint32_t>(g);
    }
  }
  ProfiledGraph added;
  const auto named = names.find(graph.uid());
  added.name = named != names.end() ? named->second : "graph " + std::to_string(profile.graphs.size() + 1);
  added.uid = graph.uid();
  added.topology_hash = plan.topology_hash;
  added.nodes = profiling::profiled_nodes(graph.description(), plan, *registry);
  profile.graphs.push_back(std::move(added));
  versions.push_back(graph.parameter_version());
  return static_cast<std::uint32_t>(profile.graphs.size() - 1);
}

// Kernels whose arguments changed since the graph's last launch, with their arguments now.
std::vector<std::pair<std::uint32_t, NamedValues>> Profiler::Impl::changed_arguments(const Graph& graph,
                                                                                     std::uint32_t index) {
  std::vector<std::pair<std::uint32_t, NamedValues>> out;
  if (graph.parameter_version() == versions[index]) return out;
  changed.clear();
  graph.changes_since(versions[index], changed);
  versions[index] = graph.parameter_version();
  const Plan& plan = graph.plan();
  for (NodeId id : changed) {
    NamedValues arguments = profiling::kernel_arguments(graph.description(), id, *registry);
    if (!arguments.empty()) out.emplace_back(plan.position[id], std::move(arguments));
  }
  return out;
}

namespace {

// ", its body graph <CUPTI's id>" of a native child graph node, or why it is unknown.
std::string child_body_id(const profiling::CuptiSession& session, cudaGraphNode_t node) {
  cudaGraph_t body = nullptr;
  if (const cudaError_t status = cudaGraphChildGraphNodeGetGraph(node, &body); status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string(", its body graph unknown: ") + cudaGetErrorName(status);
  }
  try {
    return ", its body graph " + std::to_string(session.graph_id(body));
  } catch (const ProfilerError& e) {
    return std::string(", its body graph unknown: ") + e.what();
  }
}

}  // namespace

// CUPTI's ids of the native nodes (by plan position) in the order CUDA numbers their copies in
// an executable's graph (NodeIds::add_flattened): the top-level nodes by local id, then level by
// level the nodes of the bodies of the level before, each body's by local id, bodies in the
// order of their nodes and of their index. (One level of bodies was seen on the H200; deeper
// levels follow the same rule by assumption.)
namespace {
std::vector<std::uint64_t> flattened_ids(const Description& d, const Plan& plan, const std::vector<std::uint64_t>& ids,
                                         const std::vector<std::vector<std::uint64_t>>& recorded) {
  if (ids.size() != plan.position.size()) return {};
  const auto by_local = [&](NodeId a, NodeId b) {
    return profiling::local_part(ids[plan.position[a]]) < profiling::local_part(ids[plan.position[b]]);
  };
  std::vector<NodeId> level;
  std::map<std::pair<NodeId, std::uint32_t>, std::vector<NodeId>> bodies;  // (parent, body) -> nodes
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (d.nodes[id].parent == no_node) {
      level.push_back(id);
    } else {
      bodies[{d.nodes[id].parent, d.nodes[id].body}].push_back(id);
    }
  }
  std::sort(level.begin(), level.end(), by_local);
  std::vector<std::uint64_t> out;
  while (!level.empty()) {
    std::vector<NodeId> next;
    for (NodeId id : level) out.push_back(ids[plan.position[id]]);
    for (NodeId id : level) {
      for (auto it = bodies.lower_bound({id, 0}); it != bodies.end() && it->first.first == id; ++it) {
        std::vector<NodeId> members = it->second;
        std::sort(members.begin(), members.end(), by_local);
        next.insert(next.end(), members.begin(), members.end());
      }
    }
    // A library node's recording is its body: its nodes stand for the library node itself.
    for (NodeId id : level) {
      const std::uint32_t position = plan.position[id];
      if (recorded.empty() || recorded[position].empty()) continue;
      for (std::size_t i = 0; i < recorded[position].size(); ++i) out.push_back(ids[position]);
    }
    level = std::move(next);
  }
  return out;
}

// The native nodes a library call recorded, by plan position (lowering::recordings), sorted
// by CUPTI's local id; empty elsewhere.
std::vector<std::vector<std::uint64_t>> recorded_ids(const profiling::CuptiSession& session, const Description& d,
                                                     const Plan& plan, const std::vector<cudaGraphNode_t>& natives) {
  const std::vector<cudaGraph_t> recorded = lowering::recordings(d, plan, natives);
  std::vector<std::vector<std::uint64_t>> out(natives.size());
  for (std::size_t position = 0; position < recorded.size(); ++position) {
    if (recorded[position] == nullptr) continue;
    for (cudaGraphNode_t node : lowering::nodes_of(recorded[position], "(profiler)")) {
      out[position].push_back(session.node_id(node));
    }
    std::sort(out[position].begin(), out[position].end(), [](std::uint64_t a, std::uint64_t b) {
      return profiling::local_part(a) < profiling::local_part(b);
    });
  }
  return out;
}
}  // namespace

// For diagnosis: CUPTI's id of every native node of a new executable, by path, and of the graph
// of each child node's body (the upper 32 bits of its nodes' ids should be that graph's id).
void Profiler::Impl::log_native_nodes(std::uint32_t index, std::uint64_t tag, const std::vector<cudaGraphNode_t>& nodes) {
  if (!detail::log().should_log(spdlog::level::debug)) return;
  const std::vector<ProfiledNode>& described = profile.graphs[index].nodes;
  for (std::uint32_t position = 0; position < nodes.size() && position < described.size(); ++position) {
    const std::uint64_t id = session.node_id(nodes[position]);
    // A native child graph node (a child node's body, a library node's recording), whatever kind
    // made it: CUDA says, no kind is named.
    std::string body;
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(nodes[position], &type) == cudaSuccess && type == cudaGraphNodeTypeGraph) {
      body = child_body_id(session, nodes[position]);
    }
    FLOWDSL_DEBUG("profiler: executable {}: node {} ({}) at position {} has id {} (graph {}, local {}){}", tag,
                  quoted_name(described[position].path), described[position].kind, position, id,
                  profiling::graph_part(id), profiling::local_part(id), body);
  }
}

// Tells the attribution CUPTI's ids of the native nodes of the executable `graph` just ran, once
// per executable; returns the executable's tag (the id of its first native node).
std::uint64_t Profiler::Impl::name_executable(const Graph& graph, std::uint32_t index) {
  std::uint64_t tag = 0;
  const bool found = runtime.inspect_executable(graph, [&](const Executable& executable) {
    const std::vector<cudaGraphNode_t>* nodes = executable.native_nodes();
    if (nodes == nullptr || nodes->empty()) {
      throw UsageError(
          "flowdsl: the runtime's executables have no native nodes to profile (only the CUDA backend's have)");
    }
    tag = session.node_id(nodes->front());
    if (attribution.ids().knows(tag)) return;
    std::vector<std::uint64_t> ids(nodes->size());
    for (std::uint32_t position = 0; position < nodes->size(); ++position) {
      ids[position] = session.node_id((*nodes)[position]);
      attribution.ids().add(ids[position], tag, position);
    }
    const std::vector<std::vector<std::uint64_t>> recorded =
        recorded_ids(session, graph.description(), graph.plan(), *nodes);
    for (std::uint32_t position = 0; position < recorded.size(); ++position) {
      profile.graphs[index].nodes[position].recorded = static_cast<std::uint32_t>(recorded[position].size());
      for (const std::uint64_t id : recorded[position]) attribution.ids().add(id, tag, position);
    }
    std::vector<std::uint64_t> flat = flattened_ids(graph.description(), graph.plan(), ids, recorded);
    if (!flat.empty()) {
      const std::uint32_t top_graph = profiling::graph_part(flat.front());  // before flat moves
      attribution.ids().add_flattened(top_graph, std::move(flat));
    }
    log_native_nodes(index, tag, *nodes);
  });
  if (!found) {
    detail::log().warn("profiler: the executable of a launch was not cached after it; its spans stay unmapped");
  }
  return tag;
}

LaunchEvents Profiler::Impl::take_events() {
  if (spare.empty()) return LaunchEvents{0, make_event(), make_event()};
  LaunchEvents events = std::move(spare.back());
  spare.pop_back();
  return events;
}

const Profile& Profiler::Impl::collect() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (collecting a profile)");
  attribution.add(session.take(), profile);
  for (LaunchEvents& events : unread) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, events.start.get(), events.stop.get()), "cudaEventElapsedTime");
    profile.launches[events.launch].events_us = 1000.0 * static_cast<double>(ms);
    spare.push_back(std::move(events));
  }
  unread.clear();
  return profile;
}

Profiler::Profiler(Runtime& runtime, ProfilerOptions options) {
  if (runtime.debug()) {
    throw UsageError("flowdsl: a Runtime in debug mode runs graphs node by node: there is no graph launch to profile");
  }
  impl_ = std::make_unique<Impl>(runtime, options);
  // CUPTI names an executable's nodes when it is instantiated: executables made before the
  // session began could not be mapped.
  runtime.clear();
}

Profiler::~Profiler() = default;

LaunchReport Profiler::launch(const Graph& graph, cudaStream_t stream) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mutex);
  const Plan& plan = graph.plan();  // a ValidationError leaves nothing recorded, as Runtime::launch does
  const std::uint32_t index = m.graph_index(graph, plan);
  LaunchEvents events = m.take_events();
  profiling::EventCalls calls;  // where the event calls lie, so that their records can be told
  calls.start_from = m.session.timestamp();
  check(cudaEventRecord(events.start.get(), stream), "cudaEventRecord (before a profiled launch)");
  LaunchProfile record;
  record.graph = index;
  record.host_start_ns = m.session.timestamp();
  calls.start_to = record.host_start_ns;
  try {
    record.report = m.runtime.launch(graph, stream);
  } catch (...) {
    m.spare.push_back(std::move(events));
    throw;
  }
  record.host_end_ns = m.session.timestamp();
  calls.stop_from = record.host_end_ns;
  check(cudaEventRecord(events.stop.get(), stream), "cudaEventRecord (after a profiled launch)");
  calls.stop_to = m.session.timestamp();
  record.arguments = m.changed_arguments(graph, index);
  const std::uint64_t executable = m.name_executable(graph, index);
  events.launch = m.profile.launches.size();
  m.profile.launches.push_back(std::move(record));
  m.attribution.expect(events.launch, executable, calls);
  m.unread.push_back(std::move(events));
  return m.profile.launches.back().report;
}

void Profiler::name(const Graph& graph, std::string name) {
  std::lock_guard lock(impl_->mutex);
  for (ProfiledGraph& g : impl_->profile.graphs) {
    if (g.uid == graph.uid()) g.name = name;
  }
  impl_->names[graph.uid()] = std::move(name);
}

const Profile& Profiler::collect() {
  std::lock_guard lock(impl_->mutex);
  return impl_->collect();
}

std::string Profiler::report() {
  std::lock_guard lock(impl_->mutex);
  return profile_table(impl_->collect());
}

void Profiler::write_trace(const std::string& path) {
  std::lock_guard lock(impl_->mutex);
  const std::string text = trace_json(impl_->collect());
  std::ofstream file(path, std::ios::binary);
  if (!(file << text) || !file.flush()) throw Error("flowdsl: cannot write the trace to " + quoted_name(path));
}

NodeTimings Profiler::timings(const Graph& graph) {
  std::lock_guard lock(impl_->mutex);
  const Profile& profile = impl_->collect();
  const Plan& plan = graph.plan();
  std::size_t found = profile.graphs.size();
  for (std::size_t g = 0; g < profile.graphs.size(); ++g) {
    if (profile.graphs[g].topology_hash != plan.topology_hash) continue;
    if (found == profile.graphs.size() || profile.graphs[g].uid == graph.uid()) found = g;  // its own graph first
  }
  if (found == profile.graphs.size()) {
    throw UsageError("flowdsl: no graph of this topology was launched through the profiler");
  }
  return node_timings(profile, found, plan);
}

std::string Profiler::cupti_library() const { return impl_->session.library(); }

}  // namespace flowdsl
