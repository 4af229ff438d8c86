// SPDX-License-Identifier: Apache-2.0
// A family of graphs, one per batch bucket, through a recording backend: the bucket a batch
// runs, lazy and up-front instantiation, executables of their own, the memory reported, and
// bad buckets, batches and builders, without a GPU.
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;
using flowdsl_test::make_runtime;
using flowdsl_test::Record;

namespace {

void scale(float*, float, int) {}

float x[256];

/// The graph of bucket `b`: as a decode step's, the same kernels at every bucket (one topology),
/// sized by the bucket; `extra` more nodes make it a topology of its own.
flowdsl::Graph step(int b, int extra = 0) {
  flowdsl::Graph g;
  auto first = g.kernel("scale", scale).grid((b + 31) / 32).block(32).args(x, 2.0f, b);
  std::string last = first.name();
  for (int i = 0; i < extra; ++i) {
    auto k = g.kernel("more" + std::to_string(i), scale).grid(1).block(32).args(x, 1.0f, b).after(last);
    last = k.name();
  }
  return g;
}

}  // namespace

TEST_CASE("A launch runs the graph of the smallest bucket that holds its batch", "[family]") {
  Record r;
  auto rt = make_runtime(r, 16);
  std::vector<int> built;
  flowdsl::Family family(rt, {1, 2, 4, 8}, [&](int b) {
    built.push_back(b);
    return step(b);
  });
  CHECK(family.bucket_for(1) == 1);
  CHECK(family.bucket_for(3) == 4);
  CHECK(family.bucket_for(8) == 8);
  CHECK(built.empty());  // nothing is built before it is needed

  CHECK(family.launch(3).kind == flowdsl::LaunchKind::instantiated);
  CHECK(family.launch(4).kind == flowdsl::LaunchKind::hit);
  CHECK(built == std::vector<int>{4});
  CHECK(family.launch(1).kind == flowdsl::LaunchKind::instantiated);
  CHECK(built == std::vector<int>{4, 1});
  CHECK(family.graph_for(2).description().nodes[0].name == "scale");
  CHECK(built == std::vector<int>{4, 1, 2});
  CHECK(r.launches == 3);

  const auto s = family.statistics();
  REQUIRE(s.buckets.size() == 4);
  CHECK(s.buckets[0].launches == 1);
  CHECK(s.buckets[2].launches == 2);
  CHECK((s.buckets[1].built && !s.buckets[1].ready));  // built by graph_for, never launched
  CHECK(!s.buckets[3].built);
}

TEST_CASE("Buckets of one topology launched in turn keep executables of their own and update nothing",
          "[family][update]") {
  Record r;
  auto rt = make_runtime(r, 16);
  flowdsl::Family family(rt, flowdsl::Family::powers_of_two(8), [](int b) { return step(b); });
  for (int round = 0; round < 3; ++round) {
    for (int batch : {1, 5, 2, 8, 3}) family.launch(batch);
  }
  CHECK(r.instantiations == 4);  // one a bucket: 1, 8, 2, 4
  CHECK(r.updates == 0);
  const auto stats = rt.statistics();
  CHECK(stats.private_executables == 4);
  CHECK(stats.node_updates == 0);
  CHECK(stats.hits == 11);
}

TEST_CASE("prepare() instantiates every bucket up front, launching none", "[family][prepare]") {
  Record r;
  auto rt = make_runtime(r, 16);
  flowdsl::Family family(rt, {1, 2, 4, 8, 16}, [](int b) { return step(b); });
  family.prepare();
  CHECK(r.instantiations == 5);
  CHECK(r.launches == 0);
  CHECK(rt.statistics().prepared == 5);
  CHECK(rt.statistics().launches == 0);
  for (const auto& b : family.statistics().buckets) {
    CHECK(b.built);
    CHECK(b.ready);
    CHECK(b.launches == 0);
  }
  for (int batch = 1; batch <= 16; ++batch) CHECK(family.launch(batch).kind == flowdsl::LaunchKind::hit);
  CHECK(r.instantiations == 5);

  family.prepare();  // every bucket is ready: nothing to do
  CHECK(r.instantiations == 5);
  CHECK(rt.statistics().prepared == 5);
}

TEST_CASE("The family reports each bucket's device memory and the total", "[family][memory]") {
  Record r;
  r.memory_per_node = 1000;
  auto rt = make_runtime(r, 16);
  // Bucket b has 1 + b nodes: 2, 3, 5 and 9 nodes.
  flowdsl::Family family(rt, {1, 2, 4, 8}, [](int b) { return step(b, b); });
  family.launch(2);
  auto s = family.statistics();
  CHECK(s.buckets[1].device_memory == 3000);
  CHECK(s.buckets[0].device_memory == 0);
  CHECK(s.device_memory == 3000);
  CHECK(s.largest_device_memory == 3000);

  family.prepare();
  s = family.statistics();
  CHECK(s.device_memory == 2000 + 3000 + 5000 + 9000);
  CHECK(s.largest_device_memory == 9000);
  for (const auto& b : s.buckets) CHECK(b.ready);
  CHECK(rt.statistics().executable_bytes == 19000);  // the runtime's gauge agrees

  rt.clear();  // the runtime dropped them: nothing is held
  s = family.statistics();
  CHECK(s.device_memory == 0);
  CHECK(rt.statistics().executable_bytes == 0);
  for (const auto& b : s.buckets) {
    CHECK(b.built);
    CHECK(!b.ready);
  }
}

TEST_CASE("A bucket evicted from a runtime too small for the family is instantiated again", "[family][evict]") {
  Record r;
  auto rt = make_runtime(r, 2);  // three buckets: a warning is logged
  flowdsl::Family family(rt, {1, 2, 4}, [](int b) { return step(b); });
  family.launch(1);
  family.launch(2);
  family.launch(4);  // evicts bucket 1
  CHECK(!family.statistics().buckets[0].ready);
  CHECK(family.launch(1).kind == flowdsl::LaunchKind::instantiated);
  CHECK(r.instantiations == 4);
  CHECK(rt.size() == 2);
}

TEST_CASE("powers_of_two() gives 1, 2, 4, ... and the largest bucket", "[family]") {
  CHECK(flowdsl::Family::powers_of_two(1) == std::vector<int>{1});
  CHECK(flowdsl::Family::powers_of_two(256) == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256});
  CHECK(flowdsl::Family::powers_of_two(48) == std::vector<int>{1, 2, 4, 8, 16, 32, 48});
  CHECK(flowdsl::Family::powers_of_two(0x7fffffff).size() == 32);
  CHECK_THROWS_WITH(flowdsl::Family::powers_of_two(0), contains("largest bucket 0 is not positive"));
}

TEST_CASE("Bad buckets, builders and batches are refused with a message naming them", "[family][errors]") {
  Record r;
  auto rt = make_runtime(r);
  const auto build = [](int b) { return step(b); };
  using flowdsl::Family;
  CHECK_THROWS_AS(Family(rt, {}, build), flowdsl::UsageError);
  CHECK_THROWS_WITH(Family(rt, {}, build), contains("no bucket"));
  CHECK_THROWS_WITH(Family(rt, {1, 4, 2}, build), contains("buckets must be positive and increasing, not 1, 4, 2"));
  CHECK_THROWS_WITH(Family(rt, {0, 1}, build), contains("not 0, 1"));
  CHECK_THROWS_WITH(Family(rt, {2, 2}, build), contains("not 2, 2"));
  CHECK_THROWS_WITH(Family(rt, {1}, Family::Builder{}), contains("no builder"));

  Family family(rt, {1, 2, 4}, build);
  CHECK_THROWS_WITH(family.launch(5), contains("batch 5 exceeds the largest bucket, 4"));
  CHECK_THROWS_WITH(family.launch(0), contains("batch 0 is not positive"));
  CHECK_THROWS_WITH(family.graph_for(-3), contains("batch -3 is not positive"));
  CHECK(r.instantiations == 0);
  CHECK(family.launch(4).kind == flowdsl::LaunchKind::instantiated);  // still usable
}

TEST_CASE("A builder or an instantiation that fails leaves the family usable", "[family][errors]") {
  Record r;
  auto rt = make_runtime(r, 16);
  int failures = 1;
  flowdsl::Family family(rt, {1, 2, 4}, [&](int b) {
    if (b == 2 && failures > 0) {
      --failures;
      throw std::runtime_error("no weights for bucket 2");
    }
    return step(b);
  });
  CHECK_THROWS_WITH(family.prepare(), contains("no weights for bucket 2"));
  auto s = family.statistics();
  CHECK(s.buckets[0].ready);  // made ready before the failure
  CHECK(!s.buckets[1].built);
  CHECK(!s.buckets[2].built);

  r.failing_instantiations = 1;
  CHECK_THROWS_AS(family.prepare(), flowdsl::CudaError);  // bucket 2 built, its instantiation fails
  s = family.statistics();
  CHECK((s.buckets[1].built && !s.buckets[1].ready));
  CHECK(rt.size() == 1);

  family.prepare();
  CHECK(r.instantiations == 3);
  for (int batch = 1; batch <= 4; ++batch) CHECK(family.launch(batch).kind == flowdsl::LaunchKind::hit);
}

TEST_CASE("Runtime::prepare makes a graph's first launch a hit, and does nothing for a cached topology",
          "[runtime][prepare]") {
  Record r;
  auto rt = make_runtime(r);
  flowdsl::Graph a = step(4);
  CHECK(rt.prepare(a).kind == flowdsl::LaunchKind::instantiated);
  CHECK(r.launches == 0);
  CHECK(rt.launch(a).kind == flowdsl::LaunchKind::hit);
  flowdsl::Graph b = step(8);  // the same topology, shared: its launch updates what differs
  CHECK(rt.prepare(b).kind == flowdsl::LaunchKind::hit);
  CHECK(r.instantiations == 1);
  CHECK(rt.launch(b).kind == flowdsl::LaunchKind::updated);
  b.own_executable(true);  // now its own
  CHECK(rt.prepare(b).kind == flowdsl::LaunchKind::instantiated);
  CHECK(rt.launch(b).kind == flowdsl::LaunchKind::hit);
  CHECK(rt.launch(a).kind == flowdsl::LaunchKind::updated);  // the shared one still holds b's values
  const auto s = rt.statistics();
  CHECK(s.prepared == 2);
  CHECK(s.misses == 2);
  CHECK(s.private_executables == 1);
  CHECK(s.launches == 4);
}

TEST_CASE("A family shares graphs the caller keeps: their parameter changes reach the next launch",
          "[family][shared]") {
  Record r;
  auto rt = make_runtime(r, 16);
  std::vector<std::shared_ptr<flowdsl::Graph>> kept;
  std::vector<std::function<void(float)>> set_scale;  // of each kept graph's node
  flowdsl::Family family(rt, {2, 4}, [&](int b) -> std::shared_ptr<flowdsl::Graph> {
    if (b == 4 && kept.empty()) return nullptr;  // a builder that gives nothing
    auto g = std::make_shared<flowdsl::Graph>();
    auto k = g->kernel("scale", scale).grid(1).block(32).args(x, 2.0f, b);
    set_scale.push_back([k](float a) mutable { k.arg<1>(a); });
    kept.push_back(g);
    return g;
  });
  CHECK_THROWS_WITH(family.launch(3), contains("the builder gave no graph for bucket 4"));
  CHECK(family.launch(1).kind == flowdsl::LaunchKind::instantiated);
  REQUIRE(kept.size() == 1);
  CHECK(&family.graph_for(2) == kept[0].get());
  CHECK(kept[0]->description().own_executable);
  set_scale[0](3.0f);
  const auto report = family.launch(2);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(family.launch(4).kind == flowdsl::LaunchKind::instantiated);
}
