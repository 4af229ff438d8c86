// SPDX-License-Identifier: Apache-2.0
// A profile as people read it: a table, and Chrome trace-event JSON (Perfetto, chrome://tracing).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "flowdsl/profiler.hpp"
#include "percentiles.hpp"

namespace flowdsl {
namespace {

constexpr std::size_t listed_launches = 20;  // launches the table lists one by one

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string pad(std::string text, std::size_t width, bool right = false) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

std::string launch_kind(const LaunchReport& report) {
  std::string text = to_string(report.kind);
  if (report.kind == LaunchKind::updated) text += " " + std::to_string(report.nodes_updated);
  return text;
}

// The kernels a library node recorded, by name: per launch of graph `g` that ran them, their
// GPU time (us) and how often they ran.
struct RecordedKernel {
  std::vector<double> us;
  std::size_t runs = 0;
};
std::map<std::string, RecordedKernel> recorded_kernels(const Profile& profile, std::size_t g, std::uint32_t position) {
  std::map<std::string, RecordedKernel> out;
  for (const LaunchProfile& launch : profile.launches) {
    if (launch.graph != g) continue;
    std::map<std::string, double> in_launch;
    for (const NodeSpan& s : launch.spans) {
      if (s.node != position || s.kernel.empty()) continue;
      in_launch[s.kernel] += static_cast<double>(s.end_ns - s.start_ns) / 1000.0;
      ++out[s.kernel].runs;
    }
    for (const auto& [name, us] : in_launch) out[name].us.push_back(us);
  }
  return out;
}

void node_rows(const Profile& profile, std::size_t g, const GraphStatistics& stats, std::string& out) {
  const ProfiledGraph& graph = profile.graphs[g];
  std::vector<std::map<std::string, RecordedKernel>> recorded(graph.nodes.size());
  std::size_t width = 4, kind_width = 8;
  for (std::uint32_t p = 0; p < graph.nodes.size(); ++p) {
    const ProfiledNode& node = graph.nodes[p];
    width = std::max(width, node.path.size());
    kind_width = std::max(kind_width, node.kind.size() + 1);
    if (node.recorded == 0) continue;
    recorded[p] = recorded_kernels(profile, g, p);
    for (const auto& [name, kernel] : recorded[p]) width = std::max(width, node.path.size() + 1 + name.size());
  }
  const std::size_t launches = std::max<std::size_t>(stats.launches.size(), 1);
  out += "  " + pad("node", width) + "  " + pad("kind", kind_width) + pad("runs", 7, true) +
         pad("median us", 12, true) + pad("p90 us", 11, true) + pad("share", 8, true) + "\n";
  for (std::size_t p = 0; p < graph.nodes.size(); ++p) {
    const NodeStatistics& s = stats.nodes[p];
    std::string row = "  " + pad(graph.nodes[p].path, width) + "  " + pad(graph.nodes[p].kind, kind_width);
    if (s.measured) {
      row += pad(format("%.1f", static_cast<double>(s.runs) / static_cast<double>(launches)), 7, true) +
             pad(format("%.2f", s.median_us), 12, true) + pad(format("%.2f", s.p90_us), 11, true) +
             pad(format("%.1f%%", 100.0 * s.share), 8, true);
    } else {
      row += pad("-", 7, true) + pad("-", 12, true) + pad("-", 11, true) + pad("-", 8, true);
    }
    out += row + (s.critical ? "  *" : "") + "\n";
    // A library node's kernels, each under the node's path: its share is the node's.
    for (const auto& [name, kernel] : recorded[p]) {
      out += "  " + pad(graph.nodes[p].path + "/" + name, width) + "  " + pad("kernel", kind_width) +
             pad(format("%.1f", static_cast<double>(kernel.runs) / static_cast<double>(launches)), 7, true) +
             pad(format("%.2f", profiling::median(kernel.us)), 12, true) +
             pad(format("%.2f", profiling::p90(kernel.us)), 11, true) + "\n";
    }
  }
}

std::string launch_row(const std::string& label, const std::string& kind, double host, double span, double sum,
                       double idle, const std::optional<double>& events, std::size_t unmapped) {
  std::string row = "  " + pad(label, 8) + pad(kind, 16) + pad(format("%.2f", host), 10, true) +
                    pad(format("%.2f", span), 14, true) + pad(format("%.2f", sum), 14, true) +
                    pad(format("%.2f", idle), 10, true) + pad(events ? format("%.2f", *events) : "-", 12, true);
  if (unmapped > 0) row += "  " + std::to_string(unmapped) + " unmapped";
  return row + "\n";
}

void launch_rows(const Profile& profile, const GraphStatistics& stats, std::string& out) {
  out += "  " + pad("launch", 8) + pad("kind", 16) + pad("host us", 10, true) + pad("GPU span us", 14, true) +
         pad("node sum us", 14, true) + pad("idle us", 10, true) + pad("events us", 12, true) + "\n";
  std::vector<double> host, span, sum, idle, events;
  for (std::size_t i = 0; i < stats.launches.size(); ++i) {
    const LaunchStatistics& l = stats.launches[i];
    host.push_back(l.host_us);
    span.push_back(l.gpu_span_us);
    sum.push_back(l.node_sum_us);
    idle.push_back(l.idle_us);
    if (l.events_us) events.push_back(*l.events_us);
    if (i < listed_launches) {
      // Its number among all launches, so that it can be found in the trace.
      out += launch_row(std::to_string(l.launch + 1), launch_kind(profile.launches[l.launch].report), l.host_us,
                        l.gpu_span_us, l.node_sum_us, l.idle_us, l.events_us, l.unmapped);
    }
  }
  if (stats.launches.size() > listed_launches) {
    out += "  (" + std::to_string(stats.launches.size() - listed_launches) + " more launches not listed)\n";
  }
  const auto optional = [&](const std::vector<double>& v, double value) {
    return v.empty() ? std::optional<double>() : std::optional<double>(value);
  };
  out += launch_row("median", "", profiling::median(host), profiling::median(span), profiling::median(sum),
                    profiling::median(idle), optional(events, profiling::median(events)), 0);
  out += launch_row("p90", "", profiling::p90(host), profiling::p90(span), profiling::p90(sum), profiling::p90(idle),
                    optional(events, profiling::p90(events)), 0);
}

// Spans of each stream spread over lanes, so that no two spans of a lane overlap (the spans of a
// graph launch share its stream but run side by side). Returns a track id per span.
std::map<std::pair<std::size_t, std::size_t>, int> lanes(const Profile& profile, nlohmann::json& events) {
  std::map<std::uint32_t, std::vector<std::pair<std::size_t, std::size_t>>> by_stream;
  for (std::size_t l = 0; l < profile.launches.size(); ++l) {
    for (std::size_t s = 0; s < profile.launches[l].spans.size(); ++s) {
      by_stream[profile.launches[l].spans[s].stream].emplace_back(l, s);
    }
  }
  std::map<std::pair<std::size_t, std::size_t>, int> track;
  int next_tid = 1;
  for (auto& [stream, spans] : by_stream) {
    const auto span = [&](const std::pair<std::size_t, std::size_t>& at) -> const NodeSpan& {
      return profile.launches[at.first].spans[at.second];
    };
    std::stable_sort(spans.begin(), spans.end(),
                     [&](const auto& a, const auto& b) { return span(a).start_ns < span(b).start_ns; });
    std::vector<std::pair<std::uint64_t, int>> lane_end;  // (end of its last span, track id)
    for (const auto& at : spans) {
      auto lane =
          std::find_if(lane_end.begin(), lane_end.end(), [&](const auto& l) { return l.first <= span(at).start_ns; });
      if (lane == lane_end.end()) {
        const int tid = next_tid++;
        const std::string name = "stream " + std::to_string(stream) +
                                 (lane_end.empty() ? std::string() : " (" + std::to_string(lane_end.size() + 1) + ")");
        events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 2}, {"tid", tid}, {"args", {{"name", name}}}});
        events.push_back(
            {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", 2}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
        lane_end.emplace_back(0, tid);
        lane = std::prev(lane_end.end());
      }
      lane->first = span(at).end_ns;
      track[at] = lane->second;
    }
  }
  return track;
}

nlohmann::json named_values(const NamedValues& values) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : values) out[name] = value;
  return out;
}

}  // namespace

std::string profile_table(const Profile& profile) {
  std::string out;
  for (std::size_t g = 0; g < profile.graphs.size(); ++g) {
    const ProfiledGraph& graph = profile.graphs[g];
    const GraphStatistics stats = statistics(profile, g);
    out += graph.name + ": " + std::to_string(graph.nodes.size()) + " nodes, " + std::to_string(stats.launches.size()) +
           " launch" + (stats.launches.size() == 1 ? "" : "es") +
           " (GPU time per launch; share of all node time; * on the critical path)\n";
    node_rows(profile, g, stats, out);
    out += "\n";
    launch_rows(profile, stats, out);
    out += "\n";
  }
  if (profile.dropped_records > 0) {
    out += "CUPTI dropped " + std::to_string(profile.dropped_records) + " records: the figures miss some work\n";
  }
  if (profile.unattributed_records > 0) {
    out += std::to_string(profile.unattributed_records) + " records of graph launches belong to no profiled launch\n";
  }
  return out;
}

std::string trace_json(const Profile& profile) {
  std::uint64_t origin = std::numeric_limits<std::uint64_t>::max();
  for (const LaunchProfile& l : profile.launches) {
    origin = std::min(origin, l.host_start_ns);
    for (const NodeSpan& s : l.spans) origin = std::min(origin, s.start_ns);
  }
  const auto us = [&](std::uint64_t t) { return static_cast<double>(t - origin) / 1000.0; };
  const auto duration = [](std::uint64_t start, std::uint64_t end) {
    return static_cast<double>(end - start) / 1000.0;
  };

  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "host"}}}});
  events.push_back(
      {{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "Runtime::launch"}}}});
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 2}, {"args", {{"name", "GPU"}}}});
  const auto track = lanes(profile, events);

  std::vector<std::vector<NamedValues>> arguments(profile.graphs.size());  // per graph, per node: as of the launch
  for (std::size_t g = 0; g < profile.graphs.size(); ++g) {
    for (const ProfiledNode& node : profile.graphs[g].nodes) arguments[g].push_back(node.arguments);
  }
  for (std::size_t l = 0; l < profile.launches.size(); ++l) {
    const LaunchProfile& launch = profile.launches[l];
    const ProfiledGraph& graph = profile.graphs[launch.graph];
    for (const auto& [position, values] : launch.arguments) arguments[launch.graph][position] = values;
    const int number = static_cast<int>(l + 1);
    nlohmann::json launch_args = {{"launch", number},
                                  {"graph", graph.name},
                                  {"kind", to_string(launch.report.kind)},
                                  {"nodes_updated", launch.report.nodes_updated}};
    if (launch.events_us) launch_args["events_us"] = *launch.events_us;  // the launch on its stream
    events.push_back({{"ph", "X"},
                      {"name", "launch " + std::to_string(number) + ": " + launch_kind(launch.report)},
                      {"cat", "launch"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", us(launch.host_start_ns)},
                      {"dur", duration(launch.host_start_ns, launch.host_end_ns)},
                      {"args", std::move(launch_args)}});
    std::uint64_t flow_from = launch.host_start_ns;
    for (const HostCall& call : launch.calls) {
      events.push_back({{"ph", "X"},
                        {"name", call.name},
                        {"cat", call.category},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", us(call.start_ns)},
                        {"dur", duration(call.start_ns, call.end_ns)}});
      if (call.category == "launch" && flow_from == launch.host_start_ns) flow_from = call.start_ns;
    }
    for (std::size_t s = 0; s < launch.spans.size(); ++s) {
      const NodeSpan& span = launch.spans[s];
      nlohmann::json args = {{"launch", number}, {"graph", graph.name}};
      std::string name = "(unmapped node)";
      if (span.node != no_position) {
        const ProfiledNode& node = graph.nodes[span.node];
        name = span.kernel.empty() ? node.path : node.path + "/" + span.kernel;
        args["kind"] = node.kind;
        for (const auto& [field, value] : node.structure) args[field] = value;
        if (!arguments[launch.graph][span.node].empty())
          args["arguments"] = named_values(arguments[launch.graph][span.node]);
      }
      if (span.activity != Activity::kernel) args["bytes"] = span.bytes;
      events.push_back({{"ph", "X"},
                        {"name", name},
                        {"cat", to_string(span.activity)},
                        {"pid", 2},
                        {"tid", track.at({l, s})},
                        {"ts", us(span.start_ns)},
                        {"dur", duration(span.start_ns, span.end_ns)},
                        {"args", std::move(args)}});
    }
    if (!launch.spans.empty()) {  // spans are sorted by start: the first is the launch's first node
      events.push_back({{"ph", "s"},
                        {"id", number},
                        {"name", "launch"},
                        {"cat", "flow"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", us(flow_from)}});
      events.push_back({{"ph", "f"},
                        {"bp", "e"},
                        {"id", number},
                        {"name", "launch"},
                        {"cat", "flow"},
                        {"pid", 2},
                        {"tid", track.at({l, 0})},
                        {"ts", us(launch.spans.front().start_ns)}});
    }
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)},
                          {"displayTimeUnit", "ns"},
                          {"otherData",
                           {{"producer", "flowdsl::Profiler"},
                            {"dropped_records", profile.dropped_records},
                            {"unattributed_records", profile.unattributed_records}}}};
  return trace.dump(1);
}

}  // namespace flowdsl
