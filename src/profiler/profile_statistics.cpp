// SPDX-License-Identifier: Apache-2.0
// What a profile says in numbers: per node its time per launch (median, p90), share and whether
// it lies on the critical path; per launch the GPU span, the node time, the idle gaps.
#include <algorithm>
#include <limits>
#include <map>

#include "flowdsl/profiler.hpp"
#include "percentiles.hpp"

namespace flowdsl {
namespace {

// Time covered by at least one span, for spans sorted by start.
std::uint64_t covered_ns(const std::vector<NodeSpan>& spans) {
  std::uint64_t covered = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const NodeSpan& s : spans) {
    if (open && s.start_ns <= open_end) {
      open_end = std::max(open_end, s.end_ns);
      continue;
    }
    if (open) covered += open_end - open_start;
    open = true;
    open_start = s.start_ns;
    open_end = s.end_ns;
  }
  return open ? covered + open_end - open_start : covered;
}

// The critical path: per body, the chain of dependent nodes with the largest sum of weights; in
// a node on it that holds bodies, the body whose own path is longest, and so on down.
class CriticalPath {
 public:
  CriticalPath(const ProfiledGraph& graph, GraphStatistics& stats) : graph_(graph), stats_(stats) {
    for (std::uint32_t p = 0; p < graph.nodes.size(); ++p) {
      bodies_[{graph.nodes[p].parent, graph.nodes[p].body}].push_back(p);  // ascending: topological in a body
    }
  }

  void mark() {
    if (bodies_.count({no_position, 0}) != 0) mark_body({no_position, 0});
  }

 private:
  using BodyKey = std::pair<std::uint32_t, std::uint32_t>;
  struct Longest {
    double length = 0;
    std::uint32_t end = no_position;
  };

  double weight(std::uint32_t p) const { return stats_.nodes[p].measured ? stats_.nodes[p].median_us : 0.0; }

  // Longest path through one body; fills dist_ and pred_ for its nodes.
  Longest longest(const BodyKey& key) {
    Longest best;
    for (std::uint32_t p : bodies_.at(key)) {
      double before = 0;
      std::uint32_t pred = no_position;
      for (std::uint32_t q : graph_.nodes[p].after) {
        if (pred == no_position || dist_[q] > before) {
          before = dist_[q];
          pred = q;
        }
      }
      dist_[p] = before + weight(p);
      pred_[p] = pred;
      if (best.end == no_position || dist_[p] > best.length) best = {dist_[p], p};
    }
    return best;
  }

  void mark_body(const BodyKey& key) {
    const Longest path = longest(key);
    std::vector<std::uint32_t> on_path;
    for (std::uint32_t p = path.end; p != no_position; p = pred_[p]) on_path.push_back(p);
    for (std::uint32_t p : on_path) {
      stats_.nodes[p].critical = true;
      stats_.nodes[p].critical_after = pred_[p];
    }
    for (std::uint32_t p : on_path) {
      // The longest of the node's bodies (an IF or SWITCH runs one of them per launch).
      std::optional<BodyKey> longest_body;
      double length = -1;
      for (auto it = bodies_.lower_bound({p, 0}); it != bodies_.end() && it->first.first == p; ++it) {
        const double l = longest(it->first).length;
        if (l > length) {
          length = l;
          longest_body = it->first;
        }
      }
      if (longest_body) mark_body(*longest_body);
    }
  }

  const ProfiledGraph& graph_;
  GraphStatistics& stats_;
  std::map<BodyKey, std::vector<std::uint32_t>> bodies_;
  std::map<std::uint32_t, double> dist_;
  std::map<std::uint32_t, std::uint32_t> pred_;
};

}  // namespace

const char* to_string(Activity activity) noexcept {
  switch (activity) {
    case Activity::kernel:
      return "kernel";
    case Activity::memcpy:
      return "memcpy";
    case Activity::memset:
      return "memset";
  }
  return "?";
}

GraphStatistics statistics(const Profile& profile, std::size_t graph_index) {
  const ProfiledGraph& graph = profile.graphs.at(graph_index);
  const std::size_t n = graph.nodes.size();
  GraphStatistics stats;
  stats.nodes.resize(n);
  std::vector<std::vector<double>> per_launch(n);  // µs per launch in which the node ran
  std::vector<double> total_ns(n, 0.0);            // own spans, then added up into the nodes holding them
  double all_ns = 0;

  std::vector<std::uint64_t> own(n), first(n), last(n);
  std::vector<std::size_t> count(n);
  for (std::size_t l = 0; l < profile.launches.size(); ++l) {
    const LaunchProfile& launch = profile.launches[l];
    if (launch.graph != graph_index) continue;
    LaunchStatistics ls;
    ls.launch = l;
    ls.host_us = static_cast<double>(launch.host_end_ns - launch.host_start_ns) / 1000.0;
    ls.events_us = launch.events_us;
    std::fill(own.begin(), own.end(), 0);
    std::fill(count.begin(), count.end(), 0);
    std::fill(first.begin(), first.end(), std::numeric_limits<std::uint64_t>::max());
    std::fill(last.begin(), last.end(), 0);
    std::uint64_t start = std::numeric_limits<std::uint64_t>::max(), end = 0, sum = 0;
    for (const NodeSpan& s : launch.spans) {
      const std::uint64_t duration = s.end_ns - s.start_ns;
      start = std::min(start, s.start_ns);
      end = std::max(end, s.end_ns);
      sum += duration;
      if (s.node == no_position) {
        ++ls.unmapped;
        continue;
      }
      own[s.node] += duration;
      ++count[s.node];
      for (std::uint32_t p = s.node; p != no_position; p = graph.nodes[p].parent) {  // itself and the nodes holding it
        first[p] = std::min(first[p], s.start_ns);
        last[p] = std::max(last[p], s.end_ns);
      }
    }
    if (!launch.spans.empty()) {
      ls.gpu_span_us = static_cast<double>(end - start) / 1000.0;
      ls.node_sum_us = static_cast<double>(sum) / 1000.0;
      ls.idle_us = static_cast<double>(end - start - covered_ns(launch.spans)) / 1000.0;
    }
    for (std::size_t p = 0; p < n; ++p) {
      if (count[p] > 0) {  // its own work
        per_launch[p].push_back(static_cast<double>(own[p]) / 1000.0);
        stats.nodes[p].runs += count[p];
        total_ns[p] += static_cast<double>(own[p]);
        all_ns += static_cast<double>(own[p]);
      } else if (last[p] > 0) {  // the work of its bodies: from the first start to the last end
        per_launch[p].push_back(static_cast<double>(last[p] - first[p]) / 1000.0);
      }
    }
    stats.launches.push_back(ls);
  }

  // A node holding bodies owns its bodies' nodes' time; children come after their parent.
  std::vector<double> held = total_ns;
  for (std::size_t p = n; p-- > 0;) {
    if (graph.nodes[p].parent != no_position) held[graph.nodes[p].parent] += held[p];
  }
  for (std::size_t p = 0; p < n; ++p) {
    NodeStatistics& s = stats.nodes[p];
    s.launches = per_launch[p].size();
    s.measured = s.launches > 0;
    if (!s.measured) continue;
    s.median_us = profiling::median(per_launch[p]);
    s.p90_us = profiling::p90(per_launch[p]);
    s.share = all_ns > 0 ? held[p] / all_ns : 0.0;
  }
  CriticalPath(graph, stats).mark();
  return stats;
}

NodeTimings node_timings(const Profile& profile, std::size_t graph, const Plan& plan) {
  const GraphStatistics stats = statistics(profile, graph);
  if (plan.position.size() != stats.nodes.size()) {
    throw UsageError("flowdsl: the profiled graph has " + std::to_string(stats.nodes.size()) +
                     " nodes, the plan given " + std::to_string(plan.position.size()) +
                     ": timings are matched by plan position, so the topology must be the same");
  }
  std::vector<NodeId> at(plan.position.size());
  for (NodeId id = 0; id < plan.position.size(); ++id) at[plan.position[id]] = id;
  NodeTimings out;
  out.nodes.resize(plan.position.size());
  for (NodeId id = 0; id < plan.position.size(); ++id) {
    const NodeStatistics& s = stats.nodes[plan.position[id]];
    NodeTiming& t = out.nodes[id];
    t.measured = s.measured;
    t.median_us = s.median_us;
    t.p90_us = s.p90_us;
    t.share = s.share;
    t.critical = s.critical;
    t.critical_after = s.critical_after == no_position ? no_node : at[s.critical_after];
  }
  return out;
}

}  // namespace flowdsl
