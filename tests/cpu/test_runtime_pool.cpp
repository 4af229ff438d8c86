// SPDX-License-Identifier: Apache-2.0
// The runtime's pools of executables through a recording backend, without a GPU: a launch on a
// stream gets an executable that is not busy on another stream, its Graph's own when free; pools
// are bounded, counted in the statistics and the capacity, evicted executable by executable;
// threads on their own streams never share an executable while one of them enqueues it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;
using flowdsl_test::Record;

namespace {

void scale(float*, float, int) {}
void square(const float*, float*, int) {}

float x[64];
float y[64];

/// A chain of `n` kernels (one topology per `n`) scaling by `a`.
flowdsl::Graph chain(int n, float a = 1.0f) {
  flowdsl::Graph g;
  std::string prev;
  for (int i = 0; i < n; ++i) {
    auto k = g.kernel("k" + std::to_string(i), scale).launch(1, 1).args(x, a, i);
    if (!prev.empty()) k.after(prev);
    prev = k.name();
  }
  return g;
}

/// A stream handle the recording backend never dereferences.
cudaStream_t stream(std::uintptr_t n) { return reinterpret_cast<cudaStream_t>(0x1000 + n); }

flowdsl::Runtime pooled_runtime(Record& r, std::size_t capacity = 32, std::size_t per_topology = 8) {
  flowdsl::RuntimeOptions options;
  options.capacity = capacity;
  options.executables_per_topology = per_topology;
  return flowdsl::Runtime(options, std::make_unique<flowdsl_test::RecordingBackend>(r));
}

std::pair<int, cudaStream_t> last_launch(Record& r) {
  const std::lock_guard lock(r.launch_mutex);
  return r.launched.back();
}

}  // namespace

TEST_CASE("One stream keeps one executable, and no launch marks its end", "[runtime][pool]") {
  Record r;
  auto rt = pooled_runtime(r);
  auto one = chain(3);
  auto two = chain(3, 2.0f);
  for (int i = 0; i < 4; ++i) {
    rt.launch(one, stream(1));
    rt.launch(two, stream(1));  // what was launched on this stream runs before it anyway
  }
  CHECK(r.instantiations == 1);
  CHECK(r.marks == 0);
  CHECK(rt.statistics().busy_misses == 0);
}

TEST_CASE("A launch on another stream while the executable may still run gets another executable", "[runtime][pool]") {
  Record r;
  auto rt = pooled_runtime(r);
  auto one = chain(3);
  auto two = chain(3);
  CHECK(rt.launch(one, stream(1)).kind == flowdsl::LaunchKind::instantiated);
  const auto second = rt.launch(two, stream(2));  // the first launch's end was not marked: it may still run
  CHECK(second.kind == flowdsl::LaunchKind::instantiated);
  CHECK(last_launch(r) == std::make_pair(1, stream(2)));
  CHECK(rt.launch(one, stream(1)).kind == flowdsl::LaunchKind::hit);
  CHECK(last_launch(r) == std::make_pair(0, stream(1)));
  CHECK(rt.launch(two, stream(2)).kind == flowdsl::LaunchKind::hit);
  CHECK(last_launch(r) == std::make_pair(1, stream(2)));
  const auto s = rt.statistics();
  CHECK(s.misses == 2);
  CHECK(s.busy_misses == 1);
  CHECK(s.hits == 2);
  CHECK(s.node_updates == 0);
  CHECK(rt.size() == 2);
  CHECK(r.marks == 3);  // from the launch on the second stream on, every launch's end is marked
  CHECK(r.overlaps == 0);
}

TEST_CASE("A Graph gets its own executable back once its launch on another stream has ended", "[runtime][pool]") {
  Record r;
  auto rt = pooled_runtime(r);
  auto one = chain(3);
  auto two = chain(3, 2.0f);
  rt.launch(one, stream(1));  // executable 0
  rt.launch(two, stream(2));  // executable 1
  rt.launch(one, stream(1));  // executable 0 again, its end marked now
  SECTION("ended: its own, with nothing to update") {
    r.end_all();
    const auto report = rt.launch(one, stream(2));
    CHECK(report.kind == flowdsl::LaunchKind::hit);
    CHECK(last_launch(r) == std::make_pair(0, stream(2)));
  }
  SECTION("still running: the one last launched on this stream, updated by value") {
    const auto report = rt.launch(one, stream(2));
    CHECK(report.kind == flowdsl::LaunchKind::updated);
    CHECK(report.nodes_updated == 3);
    CHECK(last_launch(r) == std::make_pair(1, stream(2)));
    CHECK(rt.statistics().value_diffs == 1);
  }
  CHECK(r.instantiations == 2);
}

TEST_CASE("An executable whose launch has ended serves a new stream", "[runtime][pool]") {
  Record r;
  auto rt = pooled_runtime(r);
  auto g = chain(3);
  rt.launch(g, stream(1));  // executable 0, unmarked
  rt.launch(g, stream(2));  // executable 1: the first may still run
  r.end_all();
  rt.launch(g, stream(3));  // executable 1 has ended (executable 0 was never marked)
  CHECK(last_launch(r) == std::make_pair(1, stream(3)));
  CHECK(r.instantiations == 2);
}

TEST_CASE("A full pool launches its least recently used executable again, after its running launch",
          "[runtime][pool]") {
  Record r;
  auto rt = pooled_runtime(r, 32, /*per_topology=*/2);
  std::vector<flowdsl::Graph> graphs;
  for (int i = 0; i < 4; ++i) graphs.push_back(chain(3, static_cast<float>(i)));
  std::vector<flowdsl::LaunchReport> reports;
  for (int i = 0; i < 4; ++i) reports.push_back(rt.launch(graphs[static_cast<std::size_t>(i)], stream(i)));
  CHECK(reports[0].kind == flowdsl::LaunchKind::instantiated);
  CHECK(reports[1].kind == flowdsl::LaunchKind::instantiated);
  CHECK(reports[2].kind == flowdsl::LaunchKind::updated);  // executable 0, values compared
  CHECK(reports[3].kind == flowdsl::LaunchKind::updated);  // executable 1
  {
    const std::lock_guard lock(r.launch_mutex);
    CHECK(r.launched ==
          std::vector<std::pair<int, cudaStream_t>>{{0, stream(0)}, {1, stream(1)}, {0, stream(2)}, {1, stream(3)}});
  }
  const auto s = rt.statistics();
  CHECK(s.busy_launches == 2);
  CHECK(s.busy_misses == 1);
  CHECK(rt.size() == 2);
  CHECK(r.instantiations == 2);
}

TEST_CASE("Executables of every pool count against the capacity and are evicted one by one", "[runtime][pool][lru]") {
  Record r;
  auto rt = pooled_runtime(r, /*capacity=*/3);
  auto a = chain(2);
  auto b = chain(5);
  for (int i = 0; i < 3; ++i) rt.launch(a, stream(i));  // executables 0, 1, 2 of a
  CHECK(rt.size() == 3);
  CHECK(rt.launch(b, stream(0)).kind == flowdsl::LaunchKind::instantiated);  // evicts a's executable 0
  CHECK(rt.size() == 3);
  CHECK(r.live == 3);
  CHECK(rt.statistics().evictions == 1);
  // a on stream 0: its executable there is gone, the others may still run: another one, which
  // evicts the least recently used (a's executable 1, on stream 1).
  CHECK(rt.launch(a, stream(0)).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.statistics().evictions == 2);
  CHECK(rt.launch(a, stream(2)).kind == flowdsl::LaunchKind::hit);  // executable 2 is still there
  CHECK(rt.launch(b, stream(0)).kind == flowdsl::LaunchKind::hit);
  CHECK(rt.size() == 3);
  CHECK(r.live == 3);
  rt.clear();
  CHECK(rt.size() == 0);
  CHECK(r.live == 0);
}

TEST_CASE("A pool whose last executable is evicted goes, and its topology misses again", "[runtime][pool][lru]") {
  Record r;
  auto rt = pooled_runtime(r, /*capacity=*/1);
  auto a = chain(2);
  auto b = chain(4);
  rt.launch(a, stream(0));
  rt.launch(b, stream(0));
  CHECK(rt.size() == 1);
  const auto e = rt.explain(a, stream(0));
  CHECK(e.kind == flowdsl::LaunchKind::instantiated);
  CHECK(e.executables == 0);
  CHECK(rt.launch(a, stream(0)).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.statistics().evictions == 2);
}

TEST_CASE("A graph holding memory nodes keeps one executable, on any stream", "[runtime][pool][memory]") {
  Record r;
  auto rt = pooled_runtime(r);
  flowdsl::Graph g;
  auto tmp = g.alloc("tmp", 64 * sizeof(float));
  auto produce = g.kernel("produce", square).launch(1, 64).args(x, tmp.ptr<float>(), 64).after(tmp);
  auto consume = g.kernel("consume", square).launch(1, 64).args(tmp.ptr<float>(), y, 64).after(produce);
  g.free("free_tmp", tmp).after(consume);
  rt.launch(g, stream(1));
  CHECK(rt.launch(g, stream(2)).kind == flowdsl::LaunchKind::hit);  // after the launch on stream 1
  const auto s = rt.statistics();
  CHECK(s.private_executables == 1);
  CHECK(s.busy_launches == 1);
  CHECK(r.instantiations == 1);
  CHECK(r.marks == 0);  // nothing to choose from: no launch pays for marking its end
}

TEST_CASE("cudaStreamPerThread names another stream in each thread", "[runtime][pool]") {
  Record r;
  auto rt = pooled_runtime(r);
  auto g = chain(3);
  rt.launch(g, cudaStreamPerThread);
  CHECK(rt.launch(g, cudaStreamPerThread).kind == flowdsl::LaunchKind::hit);  // the same thread: one stream
  flowdsl::LaunchKind other{};
  std::thread([&] { other = rt.launch(g, cudaStreamPerThread).kind; }).join();
  CHECK(other == flowdsl::LaunchKind::instantiated);
  CHECK(rt.statistics().busy_misses == 1);
}

TEST_CASE("Explaining a launch says which executable of the pool it would get", "[runtime][pool][explain]") {
  Record r;
  auto rt = pooled_runtime(r, 32, /*per_topology=*/2);
  auto one = chain(3);
  auto two = chain(3, 2.0f);
  rt.launch(one, stream(1));
  const auto busy_miss = rt.explain(two, stream(2));
  CHECK(busy_miss.kind == flowdsl::LaunchKind::instantiated);
  CHECK(busy_miss.busy);
  CHECK(busy_miss.executables == 1);
  CHECK(busy_miss.text() ==
        "miss: the 1 cached executable of this topology may still run on other streams; "
        "another one is made");
  rt.launch(two, stream(2));
  const auto own = rt.explain(one, stream(1));
  CHECK(own.kind == flowdsl::LaunchKind::hit);
  CHECK_FALSE(own.busy);
  CHECK(own.executables == 2);
  const auto queued = rt.explain(one, stream(3));  // both may still run and the pool is full
  CHECK(queued.kind == flowdsl::LaunchKind::hit);  // the least recently used is one's own
  CHECK(queued.busy);
  CHECK_THAT(queued.text(), contains("; it runs after a launch on another stream (each of the 2 executables of this "
                                     "topology is busy and the pool is full)"));
  const auto before = rt.statistics();
  CHECK(rt.launch(one, stream(3)).kind == flowdsl::LaunchKind::hit);
  CHECK(rt.statistics().busy_launches == before.busy_launches + 1);
  CHECK(r.instantiations == 2);
}

TEST_CASE("Threads on their own streams never get an executable another thread is enqueueing",
          "[runtime][pool][threads]") {
  const std::size_t per_topology = GENERATE(std::size_t{8}, std::size_t{2});
  Record r;
  r.launch_time = std::chrono::microseconds(20);  // widens the window in which a launch is in flight
  auto rt = pooled_runtime(r, 32, per_topology);
  constexpr int threads = 8;
  constexpr int launches = 100;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&rt, t] {
      flowdsl::Graph g;
      auto k = g.kernel("k", scale).launch(1, 1).args(x, 1.0f, 0);
      for (int i = 0; i < launches; ++i) {
        k.arg<2>(i % 3);  // an update now and then, under the lock, while others launch
        rt.launch(g, stream(static_cast<std::uintptr_t>(t)));
      }
    });
  }
  for (auto& w : workers) w.join();
  const auto s = rt.statistics();
  CHECK(r.overlaps == 0);
  CHECK(s.launches == threads * launches);
  CHECK(s.hits + s.misses == threads * launches);
  CHECK(r.instantiations <= static_cast<int>(per_topology));
  CHECK(rt.size() == static_cast<std::size_t>(r.instantiations.load()));
  CHECK(r.launches == threads * launches);
}

TEST_CASE("Repeated launches taken without the lock never share an executable with any other launch",
          "[runtime][pool][threads][repeat]") {
  Record r;
  r.launch_time = std::chrono::microseconds(5);
  auto rt = pooled_runtime(r, /*capacity=*/8, /*per_topology=*/2);
  constexpr int launches = 2000;
  std::atomic<int> total{0};
  std::vector<std::thread> workers;
  // Four Graphs of their own topologies, each on its own stream: repeated launches.
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      const flowdsl::Graph g = chain(t + 1);
      for (int i = 0; i < launches; ++i, ++total) rt.launch(g, stream(static_cast<std::uintptr_t>(t)));
    });
  }
  // One Graph launched by two threads on one stream: one claims the slot, the other takes the lock.
  const flowdsl::Graph shared = chain(5);
  (void)shared.plan();  // lowered before threads share it
  for (int t = 0; t < 2; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < launches; ++i, ++total) rt.launch(shared, stream(5));
    });
  }
  // Two Graphs of the first thread's topology taking turns on another stream: updates under the
  // lock, which take that pool's slots back while the first thread claims them.
  workers.emplace_back([&] {
    flowdsl::Graph a = chain(1, 2.0f);
    flowdsl::Graph b = chain(1, 3.0f);
    for (int i = 0; i < launches; ++i, total += 2) {
      rt.launch(a, stream(6));
      rt.launch(b, stream(6));
    }
  });
  // New topologies (evictions: the capacity is 8) and clear(), which take every slot back.
  workers.emplace_back([&] {
    for (int i = 0; i < launches / 10; ++i, ++total) {
      rt.launch(chain(6 + i % 4), stream(7));
      if (i % 7 == 0) rt.clear();
      (void)rt.statistics();
    }
  });
  for (auto& w : workers) w.join();
  const auto s = rt.statistics();
  CHECK(r.overlaps == 0);
  CHECK(s.launches == static_cast<std::uint64_t>(total.load()));
  CHECK(s.hits + s.misses == s.launches);
  CHECK(r.launches == total.load());
  CHECK(r.live == static_cast<int>(rt.size()));  // nothing kept alive past its eviction
  rt.clear();
  CHECK(r.live == 0);
}

TEST_CASE("A repeated launch whose end cannot be marked was still enqueued: it counts as a launch",
          "[runtime][pool][repeat][errors]") {
  Record r;
  auto rt = pooled_runtime(r, /*capacity=*/2, /*per_topology=*/2);
  auto g = chain(3);
  auto other = chain(4);
  CHECK(rt.launch(g, stream(1)).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.launch(g, stream(2)).kind == flowdsl::LaunchKind::instantiated);  // a second stream: ends marked
  CHECK(rt.launch(other, stream(3)).kind == flowdsl::LaunchKind::instantiated);  // evicts g's executable of stream 1
  CHECK(rt.launch(g, stream(2)).kind == flowdsl::LaunchKind::hit);  // its pool holds one executable again
  const int marks = r.marks;
  CHECK(rt.launch(g, stream(2)).kind == flowdsl::LaunchKind::hit);  // repeated, its end marked
  CHECK(r.marks == marks + 1);
  r.failing_marks = 1;
  CHECK_THROWS_AS(rt.launch(g, stream(2)), flowdsl::CudaError);
  const auto s = rt.statistics();
  CHECK(r.launches == 6);
  CHECK(s.launches == 6);  // enqueued before its mark failed
  CHECK(s.hits == 3);
  CHECK(rt.launch(g, stream(2)).kind == flowdsl::LaunchKind::hit);  // the executable was handed back
  CHECK(r.marks == marks + 2);
  CHECK(r.overlaps == 0);
}

TEST_CASE("A Graph launched again on its stream gets the executable it holds, and every change is still seen",
          "[runtime][pool][repeat]") {
  Record r;
  auto rt = pooled_runtime(r, /*capacity=*/64, /*per_topology=*/2);
  auto a = chain(3, 1.0f);
  auto b = chain(3, 2.0f);  // a's topology, other values
  CHECK(rt.launch(a, stream(1)).kind == flowdsl::LaunchKind::instantiated);
  for (int i = 0; i < 3; ++i) {
    CHECK(rt.launch(a, stream(1)).kind == flowdsl::LaunchKind::hit);
    CHECK(last_launch(r) == std::pair{0, stream(1)});
  }
  // Another Graph on that executable: the next launch of `a` compares values and updates.
  CHECK(rt.launch(b, stream(1)).nodes_updated == 3);
  const auto back = rt.launch(a, stream(1));
  CHECK(back.kind == flowdsl::LaunchKind::updated);
  CHECK(back.nodes_updated == 3);
  CHECK(rt.launch(a, stream(1)).kind == flowdsl::LaunchKind::hit);
  // A change of a parameter, then of the structure, of the same Graph.
  a.node<flowdsl::KernelNode<float*, float, int>>("k1").arg<1>(4.0f);
  CHECK(rt.launch(a, stream(1)).nodes_updated == 1);
  a.node<flowdsl::KernelNode<float*, float, int>>("k1").grid(2);
  CHECK(rt.launch(a, stream(1)).kind == flowdsl::LaunchKind::instantiated);
  a.node<flowdsl::KernelNode<float*, float, int>>("k1").grid(1);
  CHECK(rt.launch(a, stream(1)).kind == flowdsl::LaunchKind::hit);  // the first topology again
  CHECK(last_launch(r).first == 0);
  // Another stream while the executable may still run: another executable; then two in the pool.
  CHECK(rt.launch(a, stream(2)).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.launch(a, stream(2)).kind == flowdsl::LaunchKind::hit);
  CHECK(last_launch(r).second == stream(2));
  const auto s = rt.statistics();
  CHECK(s.launches == static_cast<std::uint64_t>(r.launches.load()));
  CHECK(s.hits + s.misses == s.launches);
}

TEST_CASE("Many Graphs taking turns each hit their own executable, and evicted ones miss", "[runtime][pool][repeat]") {
  constexpr int graphs = 20;  // more than the runtime remembers recent launches of
  Record r;
  auto rt = pooled_runtime(r, /*capacity=*/graphs);
  std::vector<flowdsl::Graph> gs;
  for (int n = 1; n <= graphs; ++n) gs.push_back(chain(n));
  for (auto& g : gs) CHECK(rt.launch(g, stream(1)).kind == flowdsl::LaunchKind::instantiated);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < graphs; ++i) {
      CHECK(rt.launch(gs[static_cast<std::size_t>(i)], stream(1)).kind == flowdsl::LaunchKind::hit);
      CHECK(last_launch(r).first == i);
    }
  }
  // One more topology evicts the least recently used (the first Graph's): it misses, then hits.
  auto extra = chain(graphs + 1);
  rt.launch(extra, stream(1));
  CHECK(rt.statistics().evictions == 1);
  CHECK(rt.launch(gs[0], stream(1)).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.launch(gs[0], stream(1)).kind == flowdsl::LaunchKind::hit);
  rt.clear();
  CHECK(rt.launch(gs[1], stream(1)).kind == flowdsl::LaunchKind::instantiated);
}

TEST_CASE("Threads launching unchanged Graphs never get an executable another thread is enqueueing",
          "[runtime][pool][threads][repeat]") {
  const std::size_t per_topology = GENERATE(std::size_t{8}, std::size_t{2});
  Record r;
  r.launch_time = std::chrono::microseconds(20);
  auto rt = pooled_runtime(r, 32, per_topology);
  constexpr int threads = 8;
  constexpr int launches = 200;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&rt, t] {
      flowdsl::Graph g = chain(2);  // one topology for every thread
      for (int i = 0; i < launches; ++i) rt.launch(g, stream(static_cast<std::uintptr_t>(t)));
    });
  }
  for (auto& w : workers) w.join();
  const auto s = rt.statistics();
  CHECK(r.overlaps == 0);
  CHECK(s.launches == threads * launches);
  CHECK(s.hits + s.misses == threads * launches);
  CHECK(r.instantiations <= static_cast<int>(per_topology));
  CHECK(r.launches == threads * launches);
}
