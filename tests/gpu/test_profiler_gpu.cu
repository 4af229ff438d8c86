// SPDX-License-Identifier: Apache-2.0
// The profiler on a real GPU, through CUPTI: every node of a graph found once per launch with a
// plausible time, a heavier node found longest, inside child graphs and WHILE bodies too; a
// trace JSON parses with one span per node run; back-to-back kernels add up to the launch's
// time between events. CUPTI that cannot be used here fails the tests with CUPTI's own text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "debug_log.hpp"
#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::PinnedBuffer;

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Busy for `ns` nanoseconds of the GPU's global timer, then writes `ns` into out[blockIdx.x].
__global__ void spin_kernel(unsigned long long ns, float* out) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<float>(ns);
}

__global__ void increment_kernel(int* counter) {
  if (threadIdx.x == 0) *counter += 1;
}

__global__ void mark_kernel(float* out) {
  if (threadIdx.x == 0) out[0] += 1.0f;
}

// A library call that enqueues two kernels: the profiler finds both under its node.
cudaError_t spin_then_mark(cudaStream_t stream, unsigned long long ns, float* out) {
  spin_kernel<<<1, 32, 0, stream>>>(ns, out);
  mark_kernel<<<1, 32, 0, stream>>>(out);
  return cudaGetLastError();
}

// 1 while *counter < limit: a WHILE around it runs `limit` times.
__global__ void keep_below_kernel(const int* counter, int limit, flowdsl::Condition cond) {
  if (threadIdx.x == 0) cond.set(*counter < limit ? 1u : 0u);
}

const flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("spin", spin_kernel, {"ns", "out"});
    return true;
  }();
  (void)once;
  return r;
}

// A Profiler, or the test's failure with CUPTI's reason: CUPTI that cannot be used is an error of
// the test machine, not a reason to skip.
std::unique_ptr<flowdsl::Profiler> make_profiler(flowdsl::Runtime& runtime) {
  flowdsl::ProfilerOptions options;
  options.registry = &registry();
  try {
    return std::make_unique<flowdsl::Profiler>(runtime, options);
  } catch (const flowdsl::ProfilerError& e) {
    FAIL("CUPTI cannot be used here: " << e.what());
  }
  return nullptr;
}

constexpr unsigned long long microseconds = 1000;  // in the global timer's nanoseconds

/// upload → three spinning branches → join → clear (a memset) → download: six nodes that run on
/// the GPU and one (the join) that does not.
struct ThreeBranches {
  explicit ThreeBranches(unsigned long long light_ns, unsigned long long heavy_ns = 0)
      : host_in(1 << 18), host_out(1 << 18), data(1 << 18), out(3) {
    auto up = g.memcpy("upload", data.get(), host_in.get(), data.bytes());
    for (int b = 0; b < 3; ++b) {
      const unsigned long long ns = b == 1 && heavy_ns != 0 ? heavy_ns : light_ns;
      branches.push_back(
          g.kernel("branch" + std::to_string(b), spin_kernel).grid(1).block(32).args(ns, out.get() + b).after(up));
    }
    auto join = g.empty("join").after(branches[0], branches[1], branches[2]);
    auto clear = g.memset("clear", data.get(), 0, data.bytes()).after(join);
    g.memcpy("download", host_out.get(), data.get(), data.bytes()).after(clear);
  }

  PinnedBuffer<float> host_in, host_out;
  DeviceBuffer<float> data, out;
  flowdsl::Graph g;
  std::vector<flowdsl::KernelNode<unsigned long long, float*>> branches;
};

const std::set<std::string> measured_nodes{"upload", "branch0", "branch1", "branch2", "clear", "download"};

// The node paths of a launch's spans, each as often as it ran.
std::multiset<std::string> paths_of(const flowdsl::Profile& profile, const flowdsl::LaunchProfile& launch) {
  std::multiset<std::string> paths;
  for (const flowdsl::NodeSpan& s : launch.spans) {
    paths.insert(s.node == flowdsl::no_position ? "(unmapped)" : profile.graphs[launch.graph].nodes[s.node].path);
  }
  return paths;
}

double span_us(const flowdsl::NodeSpan& s) { return static_cast<double>(s.end_ns - s.start_ns) / 1000.0; }

}  // namespace

TEST_CASE("Every node of a three-branch graph appears once per launch with a plausible time", "[profiler][gpu]") {
  ThreeBranches graph(50 * microseconds);
  flowdsl::Runtime runtime;
  auto profiler = make_profiler(runtime);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  constexpr int launches = 5;
  for (int i = 0; i < launches; ++i) {
    const flowdsl::LaunchReport report = profiler->launch(graph.g, stream);
    CHECK(report.kind == (i == 0 ? flowdsl::LaunchKind::instantiated : flowdsl::LaunchKind::hit));
  }
  const flowdsl::Profile& profile = profiler->collect();
  INFO(flowdsl::profile_table(profile));
  CHECK(profile.dropped_records == 0);
  REQUIRE(profile.graphs.size() == 1);
  REQUIRE(profile.launches.size() == launches);
  const std::multiset<std::string> once(measured_nodes.begin(), measured_nodes.end());
  for (const flowdsl::LaunchProfile& launch : profile.launches) {
    CHECK(paths_of(profile, launch) == once);
    REQUIRE(launch.events_us.has_value());
    for (const flowdsl::NodeSpan& s : launch.spans) {
      const std::string& path = profile.graphs[0].nodes[s.node].path;
      INFO(path << ": " << span_us(s) << " us of a launch of " << *launch.events_us << " us between events");
      CHECK(s.end_ns > s.start_ns);
      CHECK(span_us(s) <= *launch.events_us);
      if (path.rfind("branch", 0) == 0) CHECK(span_us(s) >= 45.0);  // spins 50 µs
    }
    // The launch call itself was seen on the host: a graph launch inside the host span.
    CHECK(std::any_of(launch.calls.begin(), launch.calls.end(),
                      [](const flowdsl::HostCall& c) { return c.category == "launch"; }));
  }
  // The first launch instantiated: its host span holds the instantiation.
  const auto& first_calls = profile.launches[0].calls;
  CHECK(std::any_of(first_calls.begin(), first_calls.end(),
                    [](const flowdsl::HostCall& c) { return c.category == "instantiate"; }));
  CHECK(graph.host_out[0] == 0.0f);  // the graph ran: the download copied the cleared data
}

TEST_CASE("A node made ten times heavier shows up as the longest, also after an update", "[profiler][gpu]") {
  ThreeBranches graph(20 * microseconds, 200 * microseconds);
  flowdsl::Runtime runtime;
  auto profiler = make_profiler(runtime);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  for (int i = 0; i < 4; ++i) profiler->launch(graph.g, stream);
  graph.branches[1].arg<0>(20 * microseconds);  // the heavy one becomes light, branch 2 heavy
  graph.branches[2].arg<0>(200 * microseconds);
  for (int i = 0; i < 4; ++i) {
    const flowdsl::LaunchReport report = profiler->launch(graph.g, stream);
    CHECK(report.kind == (i == 0 ? flowdsl::LaunchKind::updated : flowdsl::LaunchKind::hit));
  }
  const flowdsl::Profile& profile = profiler->collect();
  INFO(flowdsl::profile_table(profile));
  for (std::size_t l = 0; l < profile.launches.size(); ++l) {
    const flowdsl::LaunchProfile& launch = profile.launches[l];
    REQUIRE(!launch.spans.empty());
    const auto longest = std::max_element(launch.spans.begin(), launch.spans.end(),
                                          [](const auto& a, const auto& b) { return span_us(a) < span_us(b); });
    REQUIRE(longest->node != flowdsl::no_position);
    CHECK(profile.graphs[0].nodes[longest->node].path == (l < 4 ? "branch1" : "branch2"));
  }
  // The update is in the profile: the changed arguments of the fifth launch, by parameter name.
  const auto& changed = profile.launches[4].arguments;
  REQUIRE(changed.size() == 2);
  for (const auto& [position, arguments] : changed) {
    REQUIRE(!arguments.empty());
    CHECK(arguments[0].first == "ns");
    CHECK(arguments[0].second == (profile.graphs[0].nodes[position].path == "branch2" ? "200000" : "20000"));
  }
}

TEST_CASE("The trace parses with one span per node per launch and an arrow per launch", "[profiler][gpu]") {
  ThreeBranches graph(20 * microseconds);
  flowdsl::Runtime runtime;
  auto profiler = make_profiler(runtime);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  constexpr int launches = 3;
  for (int i = 0; i < launches; ++i) profiler->launch(graph.g, stream);
  const std::string path = "profiler_gpu_trace.json";
  profiler->write_trace(path);
  std::ifstream file(path);
  const nlohmann::json trace = nlohmann::json::parse(file);
  std::map<int, std::multiset<std::string>> spans;
  int arrows = 0, launch_spans = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "s") ++arrows;
    if (e.at("ph") != "X") continue;
    if (e.at("pid") == 2) spans[e.at("args").at("launch").get<int>()].insert(e.at("name").get<std::string>());
    if (e.at("pid") == 1 && e.contains("args")) ++launch_spans;
  }
  CHECK(launch_spans == launches);
  CHECK(arrows == launches);
  const std::multiset<std::string> once(measured_nodes.begin(), measured_nodes.end());
  REQUIRE(spans.size() == launches);
  for (const auto& [launch, names] : spans) {
    INFO("launch " << launch);
    CHECK(names == once);
  }
}

TEST_CASE("Back-to-back kernels add up to the launch's time between events", "[profiler][gpu]") {
  DeviceBuffer<float> out(4);
  flowdsl::Graph g;
  for (int k = 0; k < 4; ++k) {
    auto node =
        g.kernel("k" + std::to_string(k), spin_kernel).grid(1).block(32).args(500 * microseconds, out.get() + k);
    if (k > 0) node.after("k" + std::to_string(k - 1));
  }
  flowdsl::Runtime runtime;
  auto profiler = make_profiler(runtime);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  const flowdsl::EventHandle start = flowdsl::make_event(), stop = flowdsl::make_event();
  std::vector<double> events_us;
  for (int i = 0; i < 5; ++i) {
    CUDA_REQUIRE(cudaEventRecord(start.get(), stream.get()));
    profiler->launch(g, stream);
    CUDA_REQUIRE(cudaEventRecord(stop.get(), stream.get()));
    CUDA_REQUIRE(cudaEventSynchronize(stop.get()));
    float ms = 0;
    CUDA_REQUIRE(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    events_us.push_back(1000.0 * ms);
  }
  const flowdsl::Profile& profile = profiler->collect();
  const flowdsl::GraphStatistics stats = flowdsl::statistics(profile, 0);
  INFO(flowdsl::profile_table(profile));
  REQUIRE(stats.launches.size() == events_us.size());
  for (std::size_t i = 0; i < events_us.size(); ++i) {
    const flowdsl::LaunchStatistics& l = stats.launches[i];
    INFO("launch " << i + 1 << ": node sum " << l.node_sum_us << " us, GPU span " << l.gpu_span_us << " us, events "
                   << events_us[i] << " us");
    CHECK(profile.launches[i].spans.size() == 4);
    CHECK(l.node_sum_us >= 4 * 500.0 * 0.99);
    if (i == 0) continue;  // the first launch instantiates: our events also time the upload (H200: +480 us)
    CHECK(std::abs(l.node_sum_us - events_us[i]) <= 0.10 * events_us[i]);
    CHECK(std::abs(l.gpu_span_us - events_us[i]) <= 0.10 * events_us[i]);
    REQUIRE(l.events_us.has_value());  // the profiler's own events, inside ours (timer resolution aside)
    CHECK(*l.events_us <= events_us[i] + 1.0);
  }
}

// On the H200 (CUDA 13.0, driver 580) CUDA copies a body's nodes into the executable's graph,
// numbered after its own nodes, and a WHILE body's records carry no correlation id of the graph
// launch: the profiler maps them by that numbering and attributes them by time. Passed on the
// H200 on 2026-12-01. It prints every span it saw with CUPTI's node id, and runs with flowdsl's
// log at debug level: the profiler names each native node's id and describes each record it
// could not resolve, so that a driver numbering copies otherwise says so.
TEST_CASE("Nodes inside a child graph and a WHILE body are mapped, the body's once per iteration",
          "[profiler][gpu]") {
  const flowdsl_test::DebugLog debug_log;
  constexpr int iterations = 3;
  DeviceBuffer<float> out(1);
  DeviceBuffer<int> counter(1);
  flowdsl::Graph g;
  auto enc = g.child("encoder");
  enc.body().kernel("inner", spin_kernel).grid(1).block(32).args(10 * microseconds, out.get());
  auto zero = g.memset("zero", counter.get(), 0, 1, 4).after(enc);
  auto loop = g.while_loop("count", flowdsl::ConditionDefault{1}).after(zero);
  auto inc = loop.body().kernel("increment", increment_kernel).launch(1, 32).args(counter.get());
  loop.body()
      .kernel("decide", keep_below_kernel)
      .launch(1, 32)
      .args(counter.get(), iterations, loop.condition())
      .after(inc);

  flowdsl::Runtime runtime;
  auto profiler = make_profiler(runtime);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  for (int i = 0; i < 3; ++i) profiler->launch(g, stream);
  const flowdsl::Profile& profile = profiler->collect();
  INFO(flowdsl::profile_table(profile));
  std::printf("nested bodies: %zu launches, %llu records unattributed, %llu dropped\n", profile.launches.size(),
              static_cast<unsigned long long>(profile.unattributed_records),
              static_cast<unsigned long long>(profile.dropped_records));
  for (std::size_t l = 0; l < profile.launches.size(); ++l) {
    for (const flowdsl::NodeSpan& s : profile.launches[l].spans) {
      const std::uint64_t id = s.graph_node_id;
      std::printf("  launch %zu: %-16s %-7s node id %llu (graph %llu, local %llu) at %llu ns, stream %u\n", l + 1,
                  s.node == flowdsl::no_position ? "(unmapped)" : profile.graphs[0].nodes[s.node].path.c_str(),
                  flowdsl::to_string(s.activity), static_cast<unsigned long long>(id),
                  static_cast<unsigned long long>(id >> 32), static_cast<unsigned long long>(id & 0xffffffffu),
                  static_cast<unsigned long long>(s.start_ns), s.stream);
    }
  }
  CHECK(profile.unattributed_records == 0);
  const std::multiset<std::string> want{"encoder/inner",   "zero",         "count/increment", "count/increment",
                                        "count/increment", "count/decide", "count/decide",    "count/decide"};
  for (const flowdsl::LaunchProfile& launch : profile.launches) CHECK(paths_of(profile, launch) == want);
  CHECK(counter.download()[0] == iterations);

  const flowdsl::GraphStatistics stats = flowdsl::statistics(profile, 0);
  const std::vector<flowdsl::ProfiledNode>& nodes = profile.graphs[0].nodes;
  for (std::size_t p = 0; p < nodes.size(); ++p) {
    INFO(nodes[p].path);
    if (nodes[p].path == "count/increment") CHECK(stats.nodes[p].runs == 3 * iterations);
    if (nodes[p].path == "encoder" || nodes[p].path == "count") CHECK(stats.nodes[p].measured);  // through their bodies
  }
  const flowdsl::NodeTimings timings = profiler->timings(g);
  flowdsl::DotOptions options;
  options.timings = &timings;
  CHECK(flowdsl::to_dot(g, options).find("median") != std::string::npos);
}

TEST_CASE("A library node's recorded kernels are mapped to it, each by its name", "[profiler][gpu][library]") {
  const flowdsl_test::DebugLog debug_log;
  DeviceBuffer<float> out(4);
  flowdsl::Graph g;
  auto first = g.kernel("first", spin_kernel).grid(1).block(32).args(5 * microseconds, out.get());
  auto lib = g.library("lib", spin_then_mark).args(10 * microseconds, out.get() + 1).after(first);
  // A child body after it: its kernel is numbered after the recording's nodes, and must still map.
  auto enc = g.child("encoder").after(lib);
  enc.body().kernel("inner", spin_kernel).grid(1).block(32).args(5 * microseconds, out.get() + 2);
  g.kernel("last", spin_kernel).grid(1).block(32).args(5 * microseconds, out.get() + 3).after(enc);

  flowdsl::Runtime runtime;
  auto profiler = make_profiler(runtime);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  for (int i = 0; i < 3; ++i) profiler->launch(g, stream);
  const flowdsl::Profile& profile = profiler->collect();
  const std::string table = flowdsl::profile_table(profile);
  INFO(table);
  CHECK(profile.unattributed_records == 0);
  const std::multiset<std::string> want{"first", "lib", "lib", "encoder/inner", "last"};
  for (const flowdsl::LaunchProfile& launch : profile.launches) {
    CHECK(paths_of(profile, launch) == want);
    std::multiset<std::string> kernels;
    for (const flowdsl::NodeSpan& s : launch.spans) {
      if (!s.kernel.empty()) kernels.insert(s.kernel);
    }
    CHECK(kernels == std::multiset<std::string>{"mark_kernel", "spin_kernel"});
  }
  for (const flowdsl::ProfiledNode& node : profile.graphs[0].nodes) {
    INFO(node.path);
    CHECK(node.recorded == (node.path == "lib" ? 2u : 0u));
  }
  CHECK_THAT(table, flowdsl_test::contains("lib/spin_kernel"));
  CHECK_THAT(table, flowdsl_test::contains("lib/mark_kernel"));
  const nlohmann::json trace = nlohmann::json::parse(flowdsl::trace_json(profile));
  std::set<std::string> names;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X") names.insert(e.value("name", ""));
  }
  CHECK(names.count("lib/spin_kernel") == 1);
  CHECK(names.count("lib/mark_kernel") == 1);
}
