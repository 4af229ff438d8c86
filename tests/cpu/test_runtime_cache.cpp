// SPDX-License-Identifier: Apache-2.0
// The runtime's cache policy through a recording backend: hits, misses, per-node updates,
// refused updates, LRU eviction, statistics and concurrent launches, without a GPU.
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;
using flowdsl_test::make_runtime;
using flowdsl_test::Record;

namespace {

void scale(float*, float, int) {}

float x[16];

/// A chain of `n` kernel nodes; those in `changed` scale by 5 instead of 1.
flowdsl::Graph chain(int n, flowdsl::Dim3 grid = 1, const std::set<int>& changed = {}) {
  flowdsl::Graph g;
  std::string prev;
  for (int i = 0; i < n; ++i) {
    const float a = changed.count(i) != 0 ? 5.0f : 1.0f;
    auto k = g.kernel("k" + std::to_string(i), scale).grid(grid).block(1).args(x, a, i);
    if (!prev.empty()) k.after(prev);
    prev = k.name();
  }
  return g;
}

}  // namespace

TEST_CASE("The first launch instantiates, the next ones hit", "[runtime][cache]") {
  Record r;
  auto rt = make_runtime(r);
  auto g = chain(3);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::instantiated);
  const auto second = rt.launch(g);
  CHECK(second.kind == flowdsl::LaunchKind::hit);
  CHECK(second.nodes_updated == 0);
  rt.launch(g);
  const auto s = rt.statistics();
  CHECK(s.launches == 3);
  CHECK(s.misses == 1);
  CHECK(s.hits == 2);
  CHECK(s.node_updates == 0);
  CHECK(r.instantiations == 1);
  CHECK(r.updates == 0);
  CHECK(r.launches == 3);
}

TEST_CASE("One changed argument updates exactly one node and instantiates nothing", "[runtime][update]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  auto a = g.kernel("a", scale).launch(1, 1).args(x, 1.0f, 4);
  auto b = g.kernel("b", scale).launch(1, 1).args(x, 1.0f, 4).after(a);
  rt.launch(g);
  b.arg<1>(2.0f);
  b.arg<1>(3.0f);  // twice: still one node to update
  const auto report = rt.launch(g);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(r.instantiations == 1);
  CHECK(r.updates == 1);
  CHECK(rt.statistics().node_updates == 1);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::hit);
}

TEST_CASE("Update work follows the number of changed nodes, not the graph's size", "[runtime][update]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  std::vector<flowdsl::KernelNode<float*, float, int>> nodes;
  for (int i = 0; i < 10000; ++i) {
    nodes.push_back(g.kernel("k" + std::to_string(i), scale).launch(1, 1).args(x, 1.0f, i));
    if (i > 0) nodes.back().after(nodes[nodes.size() - 2]);
  }
  rt.launch(g);
  for (int k : {1, 10, 1000}) {
    const int before = r.updates;
    for (int i = 0; i < k; ++i) nodes[static_cast<std::size_t>(i * 7)].arg<1>(static_cast<float>(k));
    CHECK(rt.launch(g).nodes_updated == static_cast<std::size_t>(k));
    CHECK(r.updates - before == k);
  }
  CHECK(r.instantiations == 1);
}

TEST_CASE("A structural change instantiates a new executable; the old one stays cached", "[runtime][cache]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  auto k = g.kernel("k", scale).grid(1).block(1).args(x, 1.0f, 4);
  rt.launch(g);
  k.grid(2);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::instantiated);
  k.grid(1);
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::hit);  // back to the first topology
  CHECK(r.instantiations == 2);
  CHECK(rt.size() == 2);
}

TEST_CASE("The least recently launched executable is evicted first", "[runtime][lru]") {
  Record r;
  auto rt = make_runtime(r, /*capacity=*/2);
  auto a = chain(1);
  auto b = chain(2);
  auto c = chain(3);
  rt.launch(a);
  rt.launch(b);
  rt.launch(a);  // b is now the least recently used
  rt.launch(c);  // evicts b
  CHECK(rt.size() == 2);
  CHECK(r.live == 2);
  CHECK(rt.statistics().evictions == 1);
  CHECK(rt.launch(a).kind == flowdsl::LaunchKind::hit);
  CHECK(rt.launch(c).kind == flowdsl::LaunchKind::hit);
  CHECK(rt.launch(b).kind == flowdsl::LaunchKind::instantiated);  // evicts a
  const auto s = rt.statistics();
  CHECK(s.evictions == 2);
  CHECK(s.misses == 4);
  CHECK(s.hits == 3);
  rt.clear();
  CHECK(rt.size() == 0);
  CHECK(r.live == 0);
}

TEST_CASE("A refused update falls back to a new instantiation", "[runtime][fallback]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  auto a = g.kernel("a", scale).launch(1, 1).args(x, 1.0f, 4);
  auto b = g.kernel("b", scale).launch(1, 1).args(x, 1.0f, 4).after(a);
  rt.launch(g);
  r.refuse.insert(b.id());
  b.arg<2>(8);
  const auto report = rt.launch(g);
  CHECK(report.kind == flowdsl::LaunchKind::reinstantiated);
  CHECK(r.instantiations == 2);
  CHECK(rt.statistics().reinstantiations == 1);
  CHECK(rt.size() == 1);
  CHECK(r.live == 1);
  r.refuse.clear();
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::hit);  // the new executable holds the change
}

TEST_CASE("A Graph rebuilt with equal values launches on the cached executable without updates",
          "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  auto g1 = chain(5);
  rt.launch(g1);
  auto g2 = chain(5);  // another Graph object, the same values
  const auto report = rt.launch(g2);
  CHECK(report.kind == flowdsl::LaunchKind::hit);
  CHECK(report.nodes_updated == 0);
  CHECK(r.instantiations == 1);
  CHECK(r.updates == 0);
  const auto s = rt.statistics();
  CHECK(s.value_diffs == 1);
  CHECK(s.node_updates == 0);
  CHECK(rt.launch(g2).kind == flowdsl::LaunchKind::hit);  // now synchronised with g2: no comparison
  CHECK(rt.statistics().value_diffs == 1);
}

TEST_CASE("A rebuilt Graph updates only the nodes whose values differ from the executable's", "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  auto first = chain(10);
  rt.launch(first);
  flowdsl::Graph rebuilt;  // the same chain, three arguments changed
  std::string prev;
  for (int i = 0; i < 10; ++i) {
    const float a = i == 2 || i == 5 ? 7.0f : 1.0f;
    auto k = rebuilt.kernel("k" + std::to_string(i), scale).grid(1).block(1).args(i == 9 ? x + 4 : x, a, i);
    if (!prev.empty()) k.after(prev);
    prev = k.name();
  }
  const auto report = rt.launch(rebuilt);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 3);
  std::sort(r.updated.begin(), r.updated.end());
  CHECK(r.updated == std::vector<std::pair<std::string, std::uint32_t>>{{"k2", 2}, {"k5", 5}, {"k9", 9}});
  CHECK(rt.statistics().node_updates == 3);

  r.updated.clear();  // and back: the executable now holds the rebuilt graph's values
  CHECK(rt.launch(first).nodes_updated == 3);
  CHECK(r.updated.size() == 3);
  CHECK(r.instantiations == 1);
}

TEST_CASE("Two Graphs taking turns update only the nodes where they differ", "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph one, two;
  for (flowdsl::Graph* g : {&one, &two}) {
    auto up = g->memcpy("up", x, x + 8, 16);
    auto fill = g->memset("fill", x + 4, 0, g == &one ? 4 : 2, 4).after(up);
    auto k = g->kernel("k", scale).launch(1, 1).args(x, 1.0f, 3).after(fill);
    auto done = g->host("done", [](void*) {}, g == &one ? x : x + 1).after(k);
    auto event = reinterpret_cast<flowdsl::CudaEvent>(std::uintptr_t{g == &one ? 0x1000u : 0x2000u});
    g->record_event("ready", event).after(done);
    g->wait_event("wait", reinterpret_cast<flowdsl::CudaEvent>(std::uintptr_t{0x3000})).after(done);
  }
  rt.launch(one);
  for (int turn = 0; turn < 4; ++turn) {
    r.updated.clear();
    const auto report = rt.launch(turn % 2 == 0 ? two : one);
    CHECK(report.kind == flowdsl::LaunchKind::updated);
    CHECK(report.nodes_updated == 3);  // the fill's count, the host node's user data, the recorded event
    std::sort(r.updated.begin(), r.updated.end());
    CHECK(r.updated == std::vector<std::pair<std::string, std::uint32_t>>{{"done", 3}, {"fill", 1}, {"ready", 4}});
  }
  CHECK(rt.statistics().value_diffs == 4);
  CHECK(r.instantiations == 1);
}

TEST_CASE("Every setter call of the same Graph still counts as a change", "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  auto k = g.kernel("k", scale).launch(1, 1).args(x, 1.0f, 3);
  rt.launch(g);
  k.arg<1>(1.0f);  // the value it holds: the same Graph follows its change log, not the values
  CHECK(rt.launch(g).nodes_updated == 1);
  CHECK(rt.statistics().value_diffs == 0);
}

namespace {

void set_condition(flowdsl::Condition) {}

/// Two IF nodes whose conditions two kernels set; `swap_order`: the conditions are taken in the
/// other order (their symbols get the other indices); `cross`: each kernel sets the other IF's.
flowdsl::Graph two_ifs(bool swap_order, bool cross) {
  flowdsl::Graph g;
  auto a = g.if_then("a", flowdsl::ConditionDefault{1});
  auto b = g.if_then("b", flowdsl::ConditionDefault{1});
  a.body().empty("work");
  b.body().empty("work");
  flowdsl::Condition ca, cb;
  if (swap_order) {
    cb = b.condition();
    ca = a.condition();
  } else {
    ca = a.condition();
    cb = b.condition();
  }
  g.kernel("set_a", set_condition).launch(1, 1).args(cross ? cb : ca).before(a);
  g.kernel("set_b", set_condition).launch(1, 1).args(cross ? ca : cb).before(b);
  return g;
}

}  // namespace

TEST_CASE("Conditions are compared by the node they stand for, not by their bits alone", "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  const auto a = two_ifs(false, false);
  rt.launch(a);
  SECTION("the same conditions taken in the same order: nothing to update") {
    const auto again = two_ifs(false, false);
    CHECK(rt.launch(again).kind == flowdsl::LaunchKind::hit);
  }
  SECTION("equal bits naming other nodes: both kernels are updated") {
    const auto crossed = two_ifs(true, true);  // set_a holds symbol 0 as in `a`, but symbol 0 is b's here
    REQUIRE(crossed.topology_hash() == a.topology_hash());
    CHECK(rt.launch(crossed).nodes_updated == 2);
  }
  SECTION("the same nodes under other symbol indices count as different") {
    const auto swapped = two_ifs(true, false);
    CHECK(rt.launch(swapped).nodes_updated == 2);
    CHECK(rt.launch(two_ifs(true, false)).kind == flowdsl::LaunchKind::hit);  // held: the swapped indices
  }
  CHECK(r.instantiations == 1);
}

TEST_CASE("A value equal to the executable's is still checked against the rebuilt Graph", "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  float buffer[16];
  flowdsl::Graph first;
  first.memcpy("copy", buffer, buffer + 8, 16);
  rt.launch(first);
  flowdsl::Graph second;
  second.buffer("b", buffer, 40);
  auto copy = second.memcpy("copy", buffer, buffer + 2, 8);
  (void)second.plan();                   // every parameter checked here...
  copy.set(buffer, buffer + 8, 16);      // ...then the first graph's values, past the end of 'b'
  CHECK_THROWS_WITH(rt.launch(second), contains("node 'copy' (memcpy): reads 16 bytes at offset 32 of buffer 'b'"));
  CHECK(r.launches == 1);
  copy.set(buffer, buffer + 4, 16);
  CHECK(rt.launch(second).nodes_updated == 1);
}

TEST_CASE("A refused update on a rebuilt Graph re-instantiates from it", "[runtime][value-diff][fallback]") {
  Record r;
  auto rt = make_runtime(r);
  auto first = chain(4);
  rt.launch(first);
  auto second = chain(4, 1, {2});
  r.refuse_position = 2;
  CHECK(rt.launch(second).kind == flowdsl::LaunchKind::reinstantiated);
  r.refuse_position.reset();
  CHECK(r.instantiations == 2);
  r.updated.clear();
  CHECK(rt.launch(first).nodes_updated == 1);  // the new executable holds the second graph's values
  CHECK(r.updated == std::vector<std::pair<std::string, std::uint32_t>>{{"k2", 2}});
}

TEST_CASE("After an update that failed part-way, the next Graph updates every node", "[runtime][value-diff]") {
  Record r;
  auto rt = make_runtime(r);
  auto first = chain(5);
  rt.launch(first);
  auto second = chain(5, 1, {1, 3});
  r.fail_position = 3;  // k1 is applied, then k3 fails
  CHECK_THROWS_AS(rt.launch(second), flowdsl::CudaError);
  r.fail_position.reset();
  CHECK(r.launches == 1);
  CHECK(rt.launch(first).nodes_updated == 5);  // what the executable holds is not known any more
  CHECK(rt.launch(second).nodes_updated == 2);
}

TEST_CASE("An invalid changed parameter is reported and nothing is launched", "[runtime][errors]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  auto copy = g.memcpy("copy", x, x + 8, 16);
  rt.launch(g);
  copy.set(x, nullptr, 16);
  CHECK_THROWS_WITH(rt.launch(g), contains("node 'copy' (memcpy): source pointer is null"));
  CHECK(r.launches == 1);
  CHECK(r.updates == 0);
  copy.set(x, x + 4, 16);
  CHECK(rt.launch(g).nodes_updated == 1);
  CHECK(r.launches == 2);
}

TEST_CASE("An invalid parameter is caught on a miss too, although the plan was cached", "[runtime][errors]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  auto copy = g.memcpy("copy", x, x + 8, 16);
  (void)g.plan();
  copy.set(x, x + 8, 0);
  CHECK_THROWS_WITH(rt.launch(g), contains("node 'copy' (memcpy): copies zero bytes"));
  CHECK(r.instantiations == 0);
  CHECK(rt.size() == 0);
}

TEST_CASE("An invalid graph leaves the runtime untouched", "[runtime][errors]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph g;
  g.empty("a").after("missing");
  CHECK_THROWS_AS(rt.launch(g), flowdsl::ValidationError);
  const auto s = rt.statistics();
  CHECK(s.launches == 0);
  CHECK(s.misses == 0);
  CHECK(rt.size() == 0);
}

TEST_CASE("Several threads launch through one runtime", "[runtime][threads]") {
  Record r;
  auto rt = make_runtime(r, 4);
  constexpr int threads = 4;
  constexpr int launches = 500;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&rt, t] {
      flowdsl::Graph g;
      auto k = g.kernel("k", scale).grid(static_cast<std::uint32_t>(t + 1)).block(1).args(x, 1.0f, 0);
      for (int i = 0; i < launches; ++i) {
        k.arg<2>(i);
        rt.launch(g);
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto s = rt.statistics();
  CHECK(s.launches == threads * launches);
  CHECK(s.misses == threads);
  CHECK(s.hits == threads * (launches - 1));
  CHECK(s.node_updates == threads * (launches - 1));
  CHECK(r.launches == threads * launches);
}

TEST_CASE("Graphs declaring equal topologies in other orders update the right native nodes", "[runtime][update]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph first;
  auto a = first.kernel("a", scale).grid(1).block(1).args(x, 1.0f, 1);
  first.kernel("b", scale).grid(2).block(1).args(x, 1.0f, 2).after(a);
  flowdsl::Graph second;  // the same chain, declared consumer first, other arguments
  auto bee = second.kernel("bee", scale).grid(2).block(1).args(x, 2.0f, 2);
  second.kernel("ay", scale).grid(1).block(1).args(x, 3.0f, 1).before(bee);
  REQUIRE(first.topology_hash() == second.topology_hash());

  rt.launch(first);
  rt.launch(second);  // shares the executable: both nodes differ
  REQUIRE(r.updated.size() == 2);
  std::sort(r.updated.begin(), r.updated.end());
  CHECK(r.updated[0] == std::make_pair(std::string("ay"), std::uint32_t{0}));   // the producer's native node
  CHECK(r.updated[1] == std::make_pair(std::string("bee"), std::uint32_t{1}));  // the consumer's
}

TEST_CASE("inspect_executable visits the executable a launch would use and changes nothing", "[runtime]") {
  Record r;
  flowdsl::Runtime runtime = make_runtime(r);
  const flowdsl::Graph g = chain(3);
  int visits = 0;
  CHECK_FALSE(runtime.inspect_executable(g, [&](const flowdsl::Executable&) { ++visits; }));  // nothing cached
  runtime.launch(g);
  const flowdsl::RuntimeStatistics before = runtime.statistics();
  const bool found = runtime.inspect_executable(g, [&](const flowdsl::Executable& e) {
    ++visits;
    CHECK(e.native_nodes() == nullptr);  // a backend without native nodes
  });
  CHECK(found);
  CHECK(visits == 1);
  const flowdsl::RuntimeStatistics after = runtime.statistics();
  CHECK(after.launches == before.launches);
  CHECK(after.hits == before.hits);
  CHECK(after.misses == before.misses);
  CHECK(r.instantiations == 1);
  CHECK(r.launches == 1);
}

TEST_CASE("A launch that fails is not counted and leaves its executable to the next launch", "[runtime][errors]") {
  Record r;
  auto rt = make_runtime(r);
  auto g = chain(3);
  rt.launch(g);
  r.failing_launches = 1;
  CHECK_THROWS_AS(rt.launch(g), flowdsl::CudaError);
  auto s = rt.statistics();
  CHECK(s.launches == 1);
  CHECK(s.hits == 1);  // it had its executable
  CHECK(rt.launch(g).kind == flowdsl::LaunchKind::hit);  // not left in flight: no second executable
  s = rt.statistics();
  CHECK(s.launches == 2);
  CHECK(r.instantiations == 1);
  // A miss whose launch fails keeps its new executable.
  auto other = chain(4);
  r.failing_launches = 1;
  CHECK_THROWS_AS(rt.launch(other), flowdsl::CudaError);
  CHECK(rt.launch(other).kind == flowdsl::LaunchKind::hit);
  CHECK(rt.statistics().launches == 3);
}
