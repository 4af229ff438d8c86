// SPDX-License-Identifier: Apache-2.0
// The profiler without a GPU: CUPTI's records (made up here) mapped to launches and nodes,
// statistics and the critical path, the table, the Chrome trace, the DOT heat map rendered by
// Graphviz, argument text, the runtime's inspection hook, and CUPTI that cannot be loaded.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "graphviz.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"
#include "profiler/cupti_session.hpp"
#include "profiler/profile_graph.hpp"
#include "profiler/profile_records.hpp"

using flowdsl_test::contains;
#if defined(FLOWDSL_CATCH2_V3)
using Catch::Approx;
#endif

using flowdsl_test::require_dot_accepts;

namespace {

void scale_f32(int, float, const float*, float*) {}
void decide(const float*, float, flowdsl::Condition) {}

const flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    r.add("scale_f32", scale_f32, {"n", "alpha", "x", "y"});
    r.add("decide", decide, {"residual", "tolerance", "loop"});
    return true;
  }();
  (void)once;
  return r;
}

float buffer[1024];

// a -> {b, c} -> d: b is the longer branch.
flowdsl::Graph diamond() {
  flowdsl::Graph g;
  g.buffer("x", buffer, sizeof buffer);
  auto a = g.kernel("a", scale_f32).grid(1).block(32).args(256, 1.0f, buffer, buffer + 256);
  auto b = g.kernel("b", scale_f32).grid(4).block(64).args(256, 2.0f, buffer + 256, buffer + 512).after(a);
  auto c = g.kernel("c", scale_f32).grid(1).block(32).args(256, 3.0f, buffer + 256, buffer + 768).after(a);
  g.kernel("d", scale_f32).grid(1).block(32).args(256, 4.0f, buffer + 512, buffer).after(b, c);
  return g;
}

flowdsl::Profile profile_of(const flowdsl::Graph& g) {
  flowdsl::Profile profile;
  flowdsl::ProfiledGraph graph;
  graph.name = "diamond";
  graph.uid = g.uid();
  graph.topology_hash = g.plan().topology_hash;
  graph.nodes = flowdsl::profiling::profiled_nodes(g.description(), g.plan(), registry());
  profile.graphs.push_back(std::move(graph));
  return profile;
}

std::uint32_t position(const flowdsl::Graph& g, const char* path) {
  const flowdsl::Description& d = g.description();
  for (flowdsl::NodeId id = 0; id < d.nodes.size(); ++id) {
    if (flowdsl::node_path(d, id) == path) return g.plan().position[id];
  }
  FAIL("no node " << path);
  return flowdsl::no_position;
}

// A span from `start_us` to `end_us` on stream 7.
flowdsl::NodeSpan span(std::uint32_t node, std::uint64_t start_us, std::uint64_t end_us) {
  flowdsl::NodeSpan s;
  s.node = node;
  s.start_ns = start_us * 1000;
  s.end_ns = end_us * 1000;
  s.stream = 7;
  return s;
}

flowdsl::LaunchProfile launch_at(std::uint64_t host_start_us, std::uint64_t host_end_us,
                                 flowdsl::LaunchKind kind = flowdsl::LaunchKind::hit) {
  flowdsl::LaunchProfile l;
  l.report.kind = kind;
  l.host_start_ns = host_start_us * 1000;
  l.host_end_ns = host_end_us * 1000;
  return l;
}

// Three launches of the diamond, 1000 µs apart: a 10 µs, b 40/40/60 µs, c 20 µs, d 10 µs; in the
// second launch d starts 5 µs after b ends (an idle gap).
flowdsl::Profile diamond_profile(const flowdsl::Graph& g) {
  flowdsl::Profile profile = profile_of(g);
  const std::uint32_t a = position(g, "a"), b = position(g, "b"), c = position(g, "c"), d = position(g, "d");
  for (std::uint64_t i = 0; i < 3; ++i) {
    const std::uint64_t t = 1000 * i + 100;
    const std::uint64_t b_end = t + 10 + (i == 2 ? 60 : 40);
    const std::uint64_t d_start = b_end + (i == 1 ? 5 : 0);
    flowdsl::LaunchProfile l =
        launch_at(t - 50, t - 40, i == 0 ? flowdsl::LaunchKind::instantiated : flowdsl::LaunchKind::hit);
    l.spans = {span(a, t, t + 10), span(b, t + 10, b_end), span(c, t + 10, t + 30), span(d, d_start, d_start + 10)};
    std::sort(l.spans.begin(), l.spans.end(), [](const auto& x, const auto& y) { return x.start_ns < y.start_ns; });
    l.events_us = static_cast<double>(d_start + 10 - t) + 2.0;
    profile.launches.push_back(l);
  }
  return profile;
}


}  // namespace

TEST_CASE("CUPTI's call names lose their version suffix and fall into what they do for a launch", "[profiler]") {
  using flowdsl::profiling::call_category;
  using flowdsl::profiling::call_name;
  CHECK(call_name("cudaGraphLaunch_v10000") == "cudaGraphLaunch");
  CHECK(call_name("cuGraphLaunch_ptsz") == "cuGraphLaunch_ptsz");
  CHECK(call_name("cuGraphLaunch") == "cuGraphLaunch");
  CHECK(call_name("cudaStreamSynchronize_v3020") == "cudaStreamSynchronize");
  CHECK(call_category("cudaGraphLaunch") == "launch");
  CHECK(call_category("cuGraphLaunch_ptsz") == "launch");
  CHECK(call_category("cudaGraphInstantiateWithParams") == "instantiate");
  CHECK(call_category("cuGraphUpload") == "instantiate");
  CHECK(call_category("cudaGraphExecKernelNodeSetParams") == "update");
  CHECK(call_category("cuGraphExecMemsetNodeSetParams") == "update");
  CHECK(call_category("cudaGraphExecDestroy") == "cuda");
  CHECK(call_category("cudaGraphAddNode") == "emit");
  CHECK(call_category("cuGraphCreate") == "emit");
  CHECK(call_category("cudaGraphConditionalHandleCreate") == "emit");
  CHECK(call_category("cudaEventRecord") == "cuda");
}

TEST_CASE("A node id leads to its plan position, through the copies instantiation made", "[profiler]") {
  flowdsl::profiling::NodeIds ids;
  ids.add(100, 100, 0);  // executable tagged 100: native nodes 100, 101, 102
  ids.add(101, 100, 1);
  ids.add(102, 100, 2);
  ids.add(200, 200, 0);  // another executable
  ids.add_clone(5001, 101);
  ids.add_clone(6001, 5001);  // a copy of a copy
  CHECK(ids.position(101, 100) == 1);
  CHECK(ids.position(5001, 100) == 1);
  CHECK(ids.position(6001, 100) == 1);
  CHECK(ids.position(102, 100) == 2);
  CHECK(ids.position(200, 100) == flowdsl::no_position);  // a node of another executable
  CHECK(ids.position(101, 200) == flowdsl::no_position);
  CHECK(ids.position(7777, 100) == flowdsl::no_position);  // unknown
  CHECK(ids.knows(100));
  CHECK_FALSE(ids.knows(5001));
}

TEST_CASE("A node of a copied graph leads to the node of the same local id in the graph copied", "[profiler]") {
  using flowdsl::profiling::graph_part;
  using flowdsl::profiling::local_part;
  constexpr std::uint64_t top = std::uint64_t{7} << 32, body = std::uint64_t{8} << 32;  // graphs 7 and 8
  flowdsl::profiling::NodeIds ids;
  ids.add(top | 1, top | 1, 0);   // a kernel
  ids.add(top | 2, top | 1, 1);   // a child node
  ids.add(body | 1, top | 1, 2);  // the kernel in its body
  ids.add_clone((std::uint64_t{20} << 32) | 1, top | 1);  // instantiation copied the top-level nodes
  ids.add_graph_clone(20, 7);
  ids.add_graph_clone(21, 8);  // and the body's graph, without a callback per node
  CHECK(graph_part(body | 1) == 8);
  CHECK(local_part(body | 1) == 1);
  CHECK(ids.position((std::uint64_t{21} << 32) | 1, top | 1) == 2);
  CHECK(ids.position((std::uint64_t{20} << 32) | 1, top | 1) == 0);  // the node copy first
  CHECK(ids.position((std::uint64_t{21} << 32) | 9, top | 1) == flowdsl::no_position);  // no such local id
  CHECK(ids.position((std::uint64_t{22} << 32) | 1, top | 1) == flowdsl::no_position);  // a graph not copied from ours
  CHECK(ids.graph_origins(21) == std::vector<std::uint32_t>{8});
  CHECK(ids.holds_graph(8));
  CHECK_FALSE(ids.holds_graph(21));
}

TEST_CASE("A body's node copied into the executable's graph leads to its node by the flattened order", "[profiler]") {
  // As seen on the H200: graph 13 holds a child (local 0), a memset (1) and a WHILE (2); the
  // child's body, graph 14, a kernel (0); the WHILE's body, graph 15, two kernels (0, 1). The
  // executable's graph 16 is a copy of 13 holding every node: 13's at locals 0..2, then the
  // child's kernel at 3 and the WHILE body's kernels at 4 and 5.
  const auto id = [](std::uint64_t graph, std::uint64_t local) { return graph << 32 | local; };
  flowdsl::profiling::NodeIds ids;
  const std::uint64_t tag = id(13, 0);
  ids.add(id(13, 0), tag, 0);  // encoder (child)
  ids.add(id(14, 0), tag, 1);  // encoder/inner
  ids.add(id(13, 1), tag, 2);  // zero (memset)
  ids.add(id(13, 2), tag, 3);  // count (while)
  ids.add(id(15, 0), tag, 4);  // count/increment
  ids.add(id(15, 1), tag, 5);  // count/decide
  ids.add_graph_clone(16, 13);
  ids.add_flattened(13, {id(13, 0), id(13, 1), id(13, 2), id(14, 0), id(15, 0), id(15, 1)});
  CHECK(ids.position(id(16, 1), tag) == 2);  // a top-level node: the same local id in graph 13
  CHECK(ids.position(id(16, 3), tag) == 1);
  CHECK(ids.position(id(16, 4), tag) == 4);
  CHECK(ids.position(id(16, 5), tag) == 5);
  CHECK(ids.position(id(16, 6), tag) == flowdsl::no_position);  // past every node
  CHECK(ids.position(id(17, 3), tag) == flowdsl::no_position);  // not a copy of graph 13
}

TEST_CASE("Kernel names are demangled without their parameters and return type", "[profiler][library]") {
  using flowdsl::profiling::kernel_name;
  CHECK(kernel_name("_Z11spin_kernelyPf") == "spin_kernel");
  CHECK(kernel_name("_ZN7flowdsl7kernels6detail5scaleIfEEviT_PKS3_PS3_") == "flowdsl::kernels::detail::scale<float>");
  CHECK(kernel_name("_ZN59_GLOBAL__N__ed0fda35_20_test_profiler_gpu_cu_f3b14384_1223011spin_kernelEyPf") == "spin_kernel");
  CHECK(kernel_name("nvjet_hsh_64x32_64x16_2x1_v_bz_coopA_TNN") == "nvjet_hsh_64x32_64x16_2x1_v_bz_coopA_TNN");
  CHECK(kernel_name("").empty());
}

TEST_CASE("A library node's recorded kernels keep their names in its spans and table rows", "[profiler][library]") {
  const flowdsl::Graph g = diamond();
  flowdsl::Profile profile = profile_of(g);
  const std::uint32_t b = position(g, "b");
  profile.graphs[0].nodes[b].recorded = 2;  // as if b were a library node that recorded two kernels
  profile.launches = {launch_at(100, 200, flowdsl::LaunchKind::instantiated)};
  flowdsl::profiling::Attribution attribution;
  for (std::uint32_t p = 0; p < 4; ++p) attribution.ids().add(900 + p, 900, p);
  attribution.expect(0, 900);
  flowdsl::profiling::Records records;
  using flowdsl::Activity;
  using flowdsl::profiling::ApiRecord;
  using flowdsl::profiling::GpuRecord;
  records.api = {ApiRecord{"cudaGraphLaunch_v10000", 2, 160'000, 190'000}};
  records.gpu = {
      GpuRecord{Activity::kernel, 900 + b, 2, 200'000, 210'000, 7, 0, 0, "_Z11spin_kernelyPf"},
      GpuRecord{Activity::kernel, 900 + b, 2, 210'000, 230'000, 7, 0, 0, "nvjet_hsh_64x32"},
      GpuRecord{Activity::kernel, 900 + position(g, "a"), 2, 180'000, 190'000, 7, 0, 0, "_Z9scale_f32iifPKfPf"},
  };
  attribution.add(std::move(records), profile);
  const flowdsl::LaunchProfile& launch = profile.launches[0];
  REQUIRE(launch.spans.size() == 3);
  CHECK(launch.spans[0].kernel.empty());  // a: a kernel node names no kernel of its own
  CHECK(launch.spans[1].kernel == "spin_kernel");
  CHECK(launch.spans[2].kernel == "nvjet_hsh_64x32");
  const std::string table = flowdsl::profile_table(profile);
  INFO(table);
  CHECK(table.find("b/spin_kernel") != std::string::npos);
  CHECK(table.find("b/nvjet_hsh_64x32") != std::string::npos);
  CHECK(flowdsl::trace_json(profile).find("\"b/nvjet_hsh_64x32\"") != std::string::npos);
}

TEST_CASE("Records join the launch whose graph-launch call started them, mapped to its nodes", "[profiler]") {
  const flowdsl::Graph g = diamond();
  flowdsl::Profile profile = profile_of(g);
  profile.launches = {launch_at(100, 200, flowdsl::LaunchKind::instantiated), launch_at(1100, 1200)};
  profile.launches[0].graph = 0;
  profile.launches[1].graph = 0;

  flowdsl::profiling::Attribution attribution;
  for (std::uint32_t p = 0; p < 4; ++p) attribution.ids().add(900 + p, 900, p);  // natives 900..903
  attribution.expect(0, 900);
  attribution.expect(1, 900);

  flowdsl::profiling::Records records;
  records.clones = {{5000, 900}, {5001, 901}, {5002, 902}, {5003, 903}};  // instantiation's copies
  using flowdsl::profiling::ApiRecord;
  using flowdsl::profiling::GpuRecord;
  records.api = {
      ApiRecord{"cudaGraphInstantiateWithParams_v12000", 1, 110'000, 150'000},
      ApiRecord{"cudaGraphLaunch_v10000", 2, 160'000, 190'000},
      ApiRecord{"cuGraphLaunch", 3, 165'000, 185'000},
      ApiRecord{"cudaGraphLaunch_v10000", 4, 1150'000, 1160'000},
      ApiRecord{"cudaGraphLaunch_v10000", 5, 5000'000, 5010'000},  // outside every launch
  };
  using flowdsl::Activity;
  records.gpu = {
      GpuRecord{Activity::kernel, 5003, 3, 260'000, 270'000, 7, 0},     // d, by the driver call's id
      GpuRecord{Activity::kernel, 5000, 3, 200'000, 210'000, 7, 0},     // a
      GpuRecord{Activity::memcpy, 901, 2, 210'000, 250'000, 7, 4096},   // b by its original id, the runtime call's
      GpuRecord{Activity::kernel, 5002, 3, 210'000, 230'000, 7, 0},     // c
      GpuRecord{Activity::kernel, 4242, 4, 1200'000, 1210'000, 7, 0},   // launch 2: an id no node has
      GpuRecord{Activity::kernel, 5001, 4, 1210'000, 1250'000, 7, 0},   // launch 2: b
      GpuRecord{Activity::kernel, 5001, 5, 5020'000, 5030'000, 7, 0},   // the graph launch not profiled
      GpuRecord{Activity::kernel, 0, 4, 1300'000, 1310'000, 7, 0},      // not graph work: ignored
  };
  records.dropped = 3;
  attribution.add(std::move(records), profile);

  const flowdsl::LaunchProfile& first = profile.launches[0];
  REQUIRE(first.spans.size() == 4);
  const std::vector<std::uint32_t> want{position(g, "a"), position(g, "b"), position(g, "c"), position(g, "d")};
  std::vector<std::uint32_t> got;
  for (const flowdsl::NodeSpan& s : first.spans) got.push_back(s.node);
  CHECK(got == want);  // sorted by start
  CHECK(first.spans[1].activity == Activity::memcpy);
  CHECK(first.spans[1].bytes == 4096);
  REQUIRE(first.calls.size() == 3);
  CHECK(first.calls[0].name == "cudaGraphInstantiateWithParams");
  CHECK(first.calls[0].category == "instantiate");
  CHECK(first.calls[1].category == "launch");

  const flowdsl::LaunchProfile& second = profile.launches[1];
  REQUIRE(second.spans.size() == 2);
  CHECK(second.spans[0].node == flowdsl::no_position);
  CHECK(second.spans[1].node == position(g, "b"));
  CHECK(profile.unattributed_records == 1);
  CHECK(profile.dropped_records == 3);
}

namespace {

// Three launches of the diamond (host calls at 100-200, 300-400 and 500-600 µs), each of one
// graph-launch call (correlation ids 1, 2, 3) and, when `events`, with its start and stop events
// recorded around the call (correlation ids 11/12, 21/22, 31/32) at the device times given.
struct ThreeLaunches {
  explicit ThreeLaunches(std::vector<std::pair<std::uint64_t, std::uint64_t>> events = {}) : profile(profile_of(g)) {
    profile.launches = {launch_at(100, 200, flowdsl::LaunchKind::instantiated), launch_at(300, 400), launch_at(500, 600)};
    for (flowdsl::LaunchProfile& l : profile.launches) l.graph = 0;
    for (std::uint32_t p = 0; p < 4; ++p) attribution.ids().add(900 + p, 900, p);
    using flowdsl::profiling::ApiRecord;
    for (std::uint32_t l = 0; l < 3; ++l) {
      const std::uint64_t host = 100'000 + 200'000 * std::uint64_t{l};  // the launch call's window
      flowdsl::profiling::EventCalls calls;
      if (!events.empty()) calls = {host - 5'000, host, host + 100'000, host + 105'000};
      attribution.expect(l, 900, calls);
      records.api.push_back(ApiRecord{"cudaGraphLaunch_v10000", l + 1, host + 50'000, host + 60'000});
      if (events.empty()) continue;
      const std::uint32_t start = 10 * (l + 1) + 1, stop = start + 1;
      records.api.push_back(ApiRecord{"cudaEventRecord_v3020", start, host - 4'000, host - 3'000});
      records.api.push_back(ApiRecord{"cudaEventRecord_v3020", stop, host + 101'000, host + 102'000});
      records.events.push_back({start, 7, events[l].first});
      records.events.push_back({stop, 7, events[l].second});
    }
    records.api.push_back(ApiRecord{"cudaGraphLaunch_v10000", 4, 800'000, 810'000});  // not profiled
  }

  std::vector<std::uint32_t> nodes_of(std::size_t l) const {
    std::vector<std::uint32_t> out;
    for (const flowdsl::NodeSpan& s : profile.launches[l].spans) out.push_back(s.node);
    return out;
  }

  const flowdsl::Graph g = diamond();
  flowdsl::Profile profile;
  flowdsl::profiling::Attribution attribution;
  flowdsl::profiling::Records records;
  const std::uint32_t a = position(g, "a"), b = position(g, "b"), c = position(g, "c");
};

}  // namespace

TEST_CASE("Records no graph-launch call claims join the launch of their executable whose work had begun",
          "[profiler]") {
  ThreeLaunches t;
  using flowdsl::Activity;
  using flowdsl::profiling::GpuRecord;
  t.records.gpu = {
      GpuRecord{Activity::kernel, 900, 1, 200'000, 210'000, 7, 0},  // launch 1: a, correlated
      GpuRecord{Activity::kernel, 901, 0, 220'000, 230'000, 7, 0},  // b of launch 1: no correlation id
      GpuRecord{Activity::kernel, 901, 0, 240'000, 250'000, 7, 0},  // b again (a WHILE body's node)
      // Launch 2's first correlated record starts at 420'000: b at 380'000, after its launch
      // call, is still launch 1's.
      GpuRecord{Activity::kernel, 901, 0, 380'000, 390'000, 7, 0},
      GpuRecord{Activity::kernel, 900, 2, 420'000, 430'000, 7, 0},
      GpuRecord{Activity::kernel, 902, 77, 450'000, 460'000, 7, 0},  // launch 2 (the correlation of no call)
      GpuRecord{Activity::kernel, 902, 0, 700'000, 710'000, 7, 0},   // launch 3: begun at its call, 500'000
      GpuRecord{Activity::kernel, 4242, 0, 700'000, 710'000, 7, 0},  // an id of no node: unattributed
      GpuRecord{Activity::kernel, 901, 0, 50'000, 60'000, 7, 0},     // before any launch: unattributed
      GpuRecord{Activity::kernel, 901, 4, 820'000, 830'000, 7, 0},   // a launch not profiled: unattributed
  };
  t.attribution.add(std::move(t.records), t.profile);
  CHECK(t.nodes_of(0) == std::vector<std::uint32_t>{t.a, t.b, t.b, t.b});
  CHECK(t.nodes_of(1) == std::vector<std::uint32_t>{t.a, t.c});
  CHECK(t.nodes_of(2) == std::vector<std::uint32_t>{t.c});
  CHECK(t.profile.launches[0].spans[1].graph_node_id == 901);
  CHECK(t.profile.unattributed_records == 3);
}

TEST_CASE("The device times of the events around each launch bound its work when they agree with its records",
          "[profiler]") {
  using flowdsl::Activity;
  using flowdsl::profiling::GpuRecord;
  const std::vector<GpuRecord> gpu{
      GpuRecord{Activity::kernel, 900, 1, 200'000, 210'000, 7, 0},
      GpuRecord{Activity::kernel, 900, 2, 420'000, 430'000, 7, 0},
      // Still launch 2's work, though launch 3's call (at 500'000) came before it.
      GpuRecord{Activity::kernel, 902, 0, 620'000, 630'000, 7, 0},
      GpuRecord{Activity::kernel, 902, 0, 700'000, 710'000, 7, 0},  // launch 3
      GpuRecord{Activity::kernel, 902, 0, 900'000, 910'000, 7, 0},  // after every stop event: unattributed
  };
  SECTION("events that enclose every launch's correlated records decide") {
    ThreeLaunches t({{190'000, 300'000}, {410'000, 640'000}, {650'000, 800'000}});
    t.records.gpu = gpu;
    t.attribution.add(std::move(t.records), t.profile);
    CHECK(t.nodes_of(0) == std::vector<std::uint32_t>{t.a});
    CHECK(t.nodes_of(1) == std::vector<std::uint32_t>{t.a, t.c});
    CHECK(t.nodes_of(2) == std::vector<std::uint32_t>{t.c});
    CHECK(t.profile.unattributed_records == 1);
  }
  SECTION("events on another clock are not used: the launch whose work had begun is") {
    ThreeLaunches t({{1'190'000, 1'300'000}, {1'410'000, 1'640'000}, {1'650'000, 1'800'000}});
    t.records.gpu = gpu;
    t.attribution.add(std::move(t.records), t.profile);
    CHECK(t.nodes_of(1) == std::vector<std::uint32_t>{t.a});
    CHECK(t.nodes_of(2) == std::vector<std::uint32_t>{t.c, t.c, t.c});
    CHECK(t.profile.unattributed_records == 0);
  }
}

TEST_CASE("Statistics: medians and p90 per node, shares, and per launch span, node sum and idle gaps", "[profiler]") {
  const flowdsl::Graph g = diamond();
  const flowdsl::Profile profile = diamond_profile(g);
  const flowdsl::GraphStatistics stats = flowdsl::statistics(profile, 0);
  const auto& b = stats.nodes[position(g, "b")];
  CHECK(b.measured);
  CHECK(b.runs == 3);
  CHECK(b.launches == 3);
  CHECK(b.median_us == Approx(40));
  CHECK(b.p90_us == Approx(60));
  CHECK(b.share == Approx(140.0 / 260.0));
  CHECK(stats.nodes[position(g, "c")].share == Approx(60.0 / 260.0));

  REQUIRE(stats.launches.size() == 3);
  CHECK(stats.launches[0].host_us == Approx(10));
  CHECK(stats.launches[0].gpu_span_us == Approx(60));
  CHECK(stats.launches[0].node_sum_us == Approx(80));
  CHECK(stats.launches[0].idle_us == Approx(0));
  CHECK(stats.launches[1].gpu_span_us == Approx(65));
  CHECK(stats.launches[1].idle_us == Approx(5));
  CHECK(stats.launches[2].gpu_span_us == Approx(80));
  REQUIRE(stats.launches[0].events_us.has_value());
  CHECK(*stats.launches[0].events_us == Approx(62));
}

TEST_CASE("The critical path follows the chain with the largest median time", "[profiler]") {
  const flowdsl::Graph g = diamond();
  const flowdsl::GraphStatistics stats = flowdsl::statistics(diamond_profile(g), 0);
  const std::uint32_t a = position(g, "a"), b = position(g, "b"), c = position(g, "c"), d = position(g, "d");
  CHECK(stats.nodes[a].critical);
  CHECK(stats.nodes[b].critical);
  CHECK_FALSE(stats.nodes[c].critical);
  CHECK(stats.nodes[d].critical);
  CHECK(stats.nodes[a].critical_after == flowdsl::no_position);
  CHECK(stats.nodes[b].critical_after == a);
  CHECK(stats.nodes[d].critical_after == b);
}

TEST_CASE("A WHILE body's node runs once per iteration; the loop node spans its body's work", "[profiler]") {
  flowdsl::Graph g;
  auto first = g.kernel("first", scale_f32).grid(1).block(32).args(8, 1.0f, buffer, buffer + 8);
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1}).after(first);
  loop.body().kernel("step", decide).grid(1).block(32).args(buffer, 0.5f, loop.condition());
  g.kernel("last", scale_f32).grid(1).block(32).args(8, 1.0f, buffer, buffer + 8).after(loop);
  flowdsl::Profile profile = profile_of(g);
  const std::uint32_t step = position(g, "loop/step"), last = position(g, "last");
  for (std::uint64_t i = 0; i < 2; ++i) {
    const std::uint64_t t = 1000 * i;
    flowdsl::LaunchProfile l = launch_at(t, t + 5);
    l.spans = {span(position(g, "first"), t + 10, t + 20), span(step, t + 20, t + 25), span(step, t + 25, t + 30),
               span(step, t + 30, t + 35), span(last, t + 40, t + 50)};
    profile.launches.push_back(l);
  }
  const flowdsl::GraphStatistics stats = flowdsl::statistics(profile, 0);
  CHECK(stats.nodes[step].runs == 6);
  CHECK(stats.nodes[step].launches == 2);
  CHECK(stats.nodes[step].median_us == Approx(15));
  const auto& whole = stats.nodes[position(g, "loop")];
  CHECK(whole.measured);
  CHECK(whole.runs == 0);
  CHECK(whole.median_us == Approx(15));
  CHECK(whole.share == Approx(stats.nodes[step].share));
  CHECK(whole.share == Approx(15.0 / 35.0));
  CHECK(whole.critical);
  CHECK(stats.nodes[step].critical);  // inside a node on the path, its body's path
  CHECK(stats.nodes[last].critical_after == position(g, "loop"));
}

TEST_CASE("Node timings are indexed by the NodeIds of the graph drawn", "[profiler]") {
  flowdsl::Graph g;  // ids differ from positions: the child's body comes right after the child
  auto child = g.child("child");
  auto late = g.kernel("late", scale_f32).grid(1).block(32).args(8, 1.0f, buffer, buffer + 8);
  child.body().kernel("inner", scale_f32).grid(1).block(32).args(8, 2.0f, buffer, buffer + 8);
  late.after(child);
  flowdsl::Profile profile = profile_of(g);
  flowdsl::LaunchProfile l = launch_at(0, 5);
  l.spans = {span(position(g, "child/inner"), 10, 40), span(position(g, "late"), 40, 50)};
  profile.launches.push_back(l);

  const flowdsl::NodeTimings timings = flowdsl::node_timings(profile, 0, g.plan());
  const flowdsl::Description& d = g.description();
  REQUIRE(timings.nodes.size() == d.nodes.size());
  for (flowdsl::NodeId id = 0; id < d.nodes.size(); ++id) {
    INFO(flowdsl::node_path(d, id));
    const std::string path = flowdsl::node_path(d, id);
    const double want = path == "late" ? 10 : 30;  // the child spans its body's work
    CHECK(timings.nodes[id].measured);
    CHECK(timings.nodes[id].median_us == Approx(want));
    CHECK(timings.nodes[id].critical);
  }
  CHECK(timings.nodes[late.id()].critical_after == child.id());

  flowdsl::Graph other;
  other.kernel("only", scale_f32).grid(1).block(32).args(8, 1.0f, buffer, buffer + 8);
  CHECK_THROWS_AS(flowdsl::node_timings(profile, 0, other.plan()), flowdsl::UsageError);
}

TEST_CASE("Kernel arguments read as names: buffers with offsets, graph memory, conditions", "[profiler]") {
  flowdsl::Graph g;
  g.buffer("x", buffer, sizeof buffer);
  auto scratch = g.alloc("scratch", 4096);
  auto k =
      g.kernel("k", scale_f32).grid(1).block(32).args(64, 2.5f, buffer + 64, scratch.ptr<float>() + 16).after(scratch);
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1}).after(k);
  auto inner_kernel = loop.body().kernel("decide", decide).grid(1).block(32).args(buffer, 0.5f, loop.condition());
  g.free("release", scratch).after(loop);

  const flowdsl::NamedValues args = flowdsl::profiling::kernel_arguments(g.description(), k.id(), registry());
  REQUIRE(args.size() == 4);
  CHECK(args[0] == std::make_pair(std::string("n"), std::string("64")));
  CHECK(args[1] == std::make_pair(std::string("alpha"), std::string("2.5")));
  CHECK(args[2] == std::make_pair(std::string("x"), std::string("x+256")));
  CHECK(args[3] == std::make_pair(std::string("y"), std::string("'scratch' + 64")));
  const flowdsl::NamedValues inner =
      flowdsl::profiling::kernel_arguments(g.description(), inner_kernel.id(), registry());
  REQUIRE(inner.size() == 3);
  CHECK(inner[2].second == "condition of 'loop'");

  static flowdsl::KernelRegistry empty;  // an unregistered kernel: slots by index, values as bytes
  const flowdsl::NamedValues unnamed = flowdsl::profiling::kernel_arguments(g.description(), k.id(), empty);
  REQUIRE(unnamed.size() == 4);
  CHECK(unnamed[0].first == "#0");
  CHECK(unnamed[0].second == "0x00000040");
  CHECK(unnamed[2].second == "x+256");  // a pointer slot is known without the registry

  const std::vector<flowdsl::ProfiledNode> nodes =
      flowdsl::profiling::profiled_nodes(g.description(), g.plan(), registry());
  const flowdsl::ProfiledNode& node = nodes[g.plan().position[k.id()]];
  CHECK(node.path == "k");
  CHECK(node.kind == "kernel");
  CHECK(std::find(node.structure.begin(), node.structure.end(),
                  std::make_pair(std::string("grid"), std::string("1x1x1"))) != node.structure.end());
  CHECK(node.after == std::vector<std::uint32_t>{g.plan().position[scratch.id()]});
}

TEST_CASE("The trace is Chrome trace-event JSON: host launch spans, one span per node run, arrows", "[profiler]") {
  const flowdsl::Graph g = diamond();
  flowdsl::Profile profile = diamond_profile(g);
  profile.launches[0].calls = {flowdsl::HostCall{"cudaGraphLaunch", "launch", 52'000, 58'000}};
  profile.launches[1].arguments = {{position(g, "b"), {{"n", "256"}, {"alpha", "9"}, {"x", "x+256"}, {"y", "x+512"}}}};

  const nlohmann::json trace = nlohmann::json::parse(flowdsl::trace_json(profile));
  REQUIRE(trace.at("traceEvents").is_array());
  std::map<int, std::multiset<std::string>> gpu_spans;  // launch -> node paths
  std::map<int, std::set<std::uint64_t>> tids_of_launch;
  int host_spans = 0, calls = 0, starts = 0, finishes = 0;
  std::map<int, std::string> thread_names;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name")
      thread_names[e.at("tid").get<int>() + 100 * e.at("pid").get<int>()] = e.at("args").at("name");
    if (ph == "s") ++starts;
    if (ph == "f") {
      ++finishes;
      CHECK(e.at("bp") == "e");
    }
    if (ph != "X") continue;
    CHECK(e.at("ts").get<double>() >= 0);
    CHECK(e.at("dur").get<double>() >= 0);
    if (e.at("pid") == 1 && e.at("cat") == "launch" && e.contains("args")) {
      ++host_spans;
      CHECK(e.at("args").at("events_us").get<double>() > 0);
    } else if (e.at("pid") == 1) {
      ++calls;
    } else {
      const int launch = e.at("args").at("launch");
      gpu_spans[launch].insert(e.at("name").get<std::string>());
      CHECK(e.at("args").at("kind") == "kernel");
      CHECK(e.at("args").contains("grid"));
      if (launch == 2 && e.at("name") == "b") CHECK(e.at("args").at("arguments").at("alpha") == "9");
      if (launch == 3 && e.at("name") == "b") CHECK(e.at("args").at("arguments").at("alpha") == "9");  // still
      if (launch == 1 && e.at("name") == "b") CHECK(e.at("args").at("arguments").at("alpha") == "2");
      if (e.at("name") == "a") CHECK(e.at("args").at("arguments").at("y") == "x+1024");
      tids_of_launch[launch].insert(e.at("tid").get<std::uint64_t>());
    }
  }
  CHECK(host_spans == 3);
  CHECK(calls == 1);
  CHECK(starts == 3);
  CHECK(finishes == 3);
  const std::multiset<std::string> each_once{"a", "b", "c", "d"};
  for (int launch = 1; launch <= 3; ++launch) CHECK(gpu_spans[launch] == each_once);
  CHECK(tids_of_launch[1].size() == 2);  // b and c overlap: two lanes of stream 7
  CHECK(thread_names[101] == "Runtime::launch");
  CHECK(thread_names[201] == "stream 7");
  CHECK(thread_names[202] == "stream 7 (2)");
  CHECK(trace.at("otherData").at("producer") == "flowdsl::Profiler");
}

TEST_CASE("The table lists every node with its figures and every launch", "[profiler]") {
  const flowdsl::Graph g = diamond();
  const std::string table = flowdsl::profile_table(diamond_profile(g));
  INFO(table);
  CHECK_THAT(table, contains("diamond: 4 nodes, 3 launches"));
  CHECK_THAT(table, contains("  b     kernel      1.0       40.00      60.00   53.8%  *"));
  CHECK_THAT(table, contains("  c     kernel      1.0       20.00      20.00   23.1%\n"));
  CHECK_THAT(table,
             contains("  1       instantiated         10.00         60.00         80.00      0.00       62.00\n"));
  CHECK_THAT(table,
             contains("  2       hit                  10.00         65.00         80.00      5.00       67.00\n"));
  CHECK_THAT(table,
             contains("  median                       10.00         65.00         80.00      0.00       67.00\n"));
}

TEST_CASE("The heat map colours nodes by share, labels median times and draws the critical path", "[profiler][dot]") {
  flowdsl::Graph g = diamond();
  const flowdsl::NodeTimings timings = flowdsl::node_timings(diamond_profile(g), 0, g.plan());
  flowdsl::DotOptions options;
  options.timings = &timings;
  options.registry = &registry();
  const std::string dot = flowdsl::to_dot(g, options);
  const auto id = [&](const char* name) { return std::to_string(g.node(name).id()); };
  CHECK_THAT(dot, contains("median 40.0 \xc2\xb5s (54%)\", fillcolor=\"0.000 1.000 1.000\""));  // b: the largest share
  CHECK_THAT(dot, contains("median 20.0 \xc2\xb5s (23%)\", fillcolor=\"0.000 0.429 1.000\""));  // c: 60 / 140
  CHECK_THAT(dot, contains("n" + id("a") + " -> n" + id("b") + " [color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("n" + id("b") + " -> n" + id("d") + " [color=blue, penwidth=3];"));
  CHECK_THAT(dot, contains("n" + id("a") + " -> n" + id("c") + ";"));
  CHECK_THAT(dot, contains("n" + id("c") + " -> n" + id("d") + ";"));
  require_dot_accepts(dot, "profiler_heat_map.dot");

  flowdsl::NodeTimings short_of_nodes = timings;
  short_of_nodes.nodes.pop_back();
  options.timings = &short_of_nodes;
  CHECK_THROWS_AS(flowdsl::to_dot(g, options), flowdsl::UsageError);
}

TEST_CASE("A heat map of bodies renders, nodes without GPU work marked", "[profiler][dot]") {
  flowdsl::Graph g;
  auto up = g.kernel("first", scale_f32).grid(1).block(32).args(8, 1.0f, buffer, buffer + 8);
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1}).after(up);
  loop.body().kernel("step", decide).grid(1).block(32).args(buffer, 0.5f, loop.condition());
  g.empty("join").after(loop);
  flowdsl::Profile profile = profile_of(g);
  flowdsl::LaunchProfile l = launch_at(0, 5);
  l.spans = {span(position(g, "first"), 10, 20), span(position(g, "loop/step"), 20, 30)};
  profile.launches.push_back(l);
  const flowdsl::NodeTimings timings = flowdsl::node_timings(profile, 0, g.plan());
  flowdsl::DotOptions options;
  options.timings = &timings;
  const std::string dot = flowdsl::to_dot(g, options);
  CHECK_THAT(dot, contains("not measured\", fillcolor=white"));
  require_dot_accepts(dot, "profiler_heat_map_bodies.dot");
}

TEST_CASE("A Profiler refuses a runtime in debug mode before loading CUPTI", "[profiler]") {
  flowdsl_test::Record record;
  flowdsl::RuntimeOptions options;
  options.debug = true;
  flowdsl::Runtime runtime(options, std::make_unique<flowdsl_test::RecordingBackend>(record));
  CHECK_THROWS_WITH(flowdsl::Profiler(runtime), contains("debug mode"));
}

TEST_CASE("CUPTI that cannot be loaded is a ProfilerError naming what was tried", "[profiler]") {
  ::unsetenv("FLOWDSL_CUPTI");
  const std::vector<std::string> defaults = flowdsl::profiling::cupti_candidates();
  REQUIRE(defaults.size() == 2);
  CHECK_THAT(defaults[0], contains("libcupti.so."));  // the CUDA Toolkit's, from the build
  CHECK(defaults[1] == "libcupti.so." + std::to_string(CUDART_VERSION / 1000));

  ::setenv("FLOWDSL_CUPTI", "/nonexistent/libcupti.so.13", 1);
  CHECK(flowdsl::profiling::cupti_candidates() == std::vector<std::string>{"/nonexistent/libcupti.so.13"});
  flowdsl_test::Record record;
  flowdsl::Runtime runtime = flowdsl_test::make_runtime(record);
  for (int attempt = 0; attempt < 2; ++attempt) {  // a failed attempt leaves no session behind
    try {
      flowdsl::Profiler profiler(runtime);
      FAIL("a Profiler was made without CUPTI");
    } catch (const flowdsl::ProfilerError& e) {
      CHECK_THAT(std::string(e.what()), contains("CUPTI cannot be loaded"));
      CHECK_THAT(std::string(e.what()), contains("/nonexistent/libcupti.so.13"));
      CHECK_THAT(std::string(e.what()), contains("FLOWDSL_CUPTI"));
      CHECK(e.call().empty());
    }
  }
  ::unsetenv("FLOWDSL_CUPTI");
}
