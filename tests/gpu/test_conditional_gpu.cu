// SPDX-License-Identifier: Apache-2.0
// Conditional nodes on a GPU, launched through a Runtime: IF with and without ELSE, WHILE,
// SWITCH, a WHILE inside an IF, a condition set from a child graph, parameters updated in place
// inside bodies, a second Graph of the same topology sharing the executable, the condition
// kernels by registered name; and CUDA's rules refused before anything reaches CUDA. Results
// against host references on random data, outputs poisoned before every launch; count.i32
// reading back what the device decided.
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"
#include "gpu_support.cuh"

namespace fk = flowdsl::kernels;
using flowdsl::LaunchKind;
using flowdsl_test::contains;
using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

__global__ void increment_kernel(int* counter) {
  if (threadIdx.x == 0) *counter += 1;
}

__global__ void increment_f32_kernel(float* counter) {
  if (threadIdx.x == 0) *counter += 1.0f;
}

/// What condition.less does, on an int: 1 while *counter < limit.
__global__ void keep_below_kernel(const int* counter, int limit, flowdsl::Condition cond) {
  if (threadIdx.x == 0) cond.set(*counter < limit ? 1u : 0u);
}

void nothing(void*) {}

constexpr int n = 1 << 14;

/// x random on the device, y for a result, the sum of x (fk::sum) and its host value in double.
struct Data {
  explicit Data(unsigned seed)
      : host(random_floats(n, seed)), x(n), y(n), total(1), partials(fk::sum_max_partials) {
    x.upload(host);
    for (float v : host) sum += v;
  }
  /// A threshold 1 above or below the sum of x: float rounding of the device's sum (in double,
  /// then rounded once) is far smaller.
  float above() const { return static_cast<float>(sum + 1.0); }
  float below() const { return static_cast<float>(sum - 1.0); }

  std::vector<float> host;
  DeviceBuffer<float> x, y, total;
  DeviceBuffer<double> partials;
  double sum = 0;
};

std::vector<float> scaled(const std::vector<float>& v, float a) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = a * v[i];
  return out;
}

/// Whether every element still holds the poison (all bits set): nothing wrote it.
bool untouched(const DeviceBuffer<float>& buffer) {
  const std::vector<float> got = buffer.download();
  for (float v : got) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    if (bits != 0xFFFFFFFFu) return false;
  }
  return true;
}

/// Runs graphs through one Runtime on one stream and waits for them.
struct Runner {
  flowdsl::LaunchReport run(const flowdsl::Graph& g) {
    const flowdsl::LaunchReport report = runtime.launch(g, stream);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CUDA_REQUIRE(cudaGetLastError());
    return report;
  }
  flowdsl::Runtime runtime;
  flowdsl::StreamHandle stream = flowdsl::make_stream();
};

/// counter = 0, then a WHILE (`ConditionDefault{1}`) whose body increments it and decides
/// (keep_below) whether to go on: counts to `limit`, at least once.
struct Counter {
  Counter(fk::Into where, int limit) : counter(1) {
    auto zero = where.builder().memset("zero", counter.get(), 0, 1, 4);
    loop = where.builder().while_loop("count", flowdsl::ConditionDefault{1}).after(zero);
    auto inc = loop.body().kernel("increment", increment_kernel).launch(1, 32).args(counter.get());
    decide = loop.body().kernel("decide", keep_below_kernel).launch(1, 32).args(counter.get(), limit, loop.condition()).after(inc);
  }
  int value() const { return counter.download()[0]; }

  DeviceBuffer<int> counter;
  flowdsl::ConditionalNode loop{nullptr, 0};
  flowdsl::KernelNode<const int*, int, flowdsl::Condition> decide{nullptr, 0};
};

}  // namespace

TEST_CASE("An IF runs its body only when a kernel ahead of it says so from the data", "[conditional][gpu][if]") {
  Data d(3);
  flowdsl::Graph g;
  auto copy = g.memcpy("copy", d.y.get(), d.x.get(), d.x.bytes());
  auto total = fk::sum(g, "total", n, d.x.get(), d.partials.get(), d.total.get());
  auto twice = g.if_then("twice");
  auto decide = fk::condition_greater(g, "decide", d.total.get(), d.below(), twice.condition()).after(total.finish);
  twice.after(decide, copy);
  fk::scale(twice.body(), "scale", n, 2.0f, d.x.get(), d.y.get());

  Runner r;
  d.y.poison();
  CHECK(r.run(g).kind == LaunchKind::instantiated);  // sum > threshold: y = 2 x
  CHECK(mismatches(d.y.download(), scaled(d.host, 2.0f)) == 0);

  decide.arg<1>(d.above());  // sum < threshold: the body is skipped, y stays the copy of x
  d.y.poison();
  const flowdsl::LaunchReport report = r.run(g);
  CHECK(report.kind == LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(mismatches(d.y.download(), d.host) == 0);
  CHECK(r.runtime.statistics().misses == 1);
  CHECK(r.runtime.statistics().reinstantiations == 0);
}

TEST_CASE("An IF with an ELSE runs one body or the other", "[conditional][gpu][if]") {
  Data d(5);
  flowdsl::Graph g;
  auto total = fk::sum(g, "total", n, d.x.get(), d.partials.get(), d.total.get());
  auto branch = g.if_else("branch");
  auto decide = fk::condition_less(g, "decide", d.total.get(), d.above(), branch.condition()).after(total.finish);
  branch.after(decide);
  fk::scale(branch.body(0), "twice", n, 2.0f, d.x.get(), d.y.get());
  fk::scale(branch.body(1), "negate", n, -0.5f, d.x.get(), d.y.get());

  Runner r;
  for (const bool less : {true, false, true}) {
    INFO((less ? "sum below the threshold" : "sum above the threshold"));
    decide.arg<1>(less ? d.above() : d.below());
    d.y.poison();
    r.run(g);
    CHECK(mismatches(d.y.download(), scaled(d.host, less ? 2.0f : -0.5f)) == 0);
  }
  CHECK(r.runtime.statistics().misses == 1);
}

TEST_CASE("A WHILE counts on the device, and an argument changed in its body is an update", "[conditional][gpu][while][update]") {
  flowdsl::Graph g;
  Counter c(g, 1000);
  Runner r;
  c.counter.poison();
  CHECK(r.run(g).kind == LaunchKind::instantiated);
  CHECK(c.value() == 1000);  // one launch, 1000 iterations

  c.decide.arg<1>(37);  // inside the WHILE's body
  c.counter.poison();
  const flowdsl::LaunchReport report = r.run(g);
  CHECK(report.kind == LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(c.value() == 37);

  c.counter.poison();
  CHECK(r.run(g).kind == LaunchKind::hit);
  CHECK(c.value() == 37);

  c.decide.arg<1>(0);  // the default 1 runs the body once before the first test
  r.run(g);
  CHECK(c.value() == 1);
  CHECK(r.runtime.statistics().misses == 1);
  CHECK(r.runtime.statistics().reinstantiations == 0);
}

TEST_CASE("A WHILE without a default is tested before its first iteration", "[conditional][gpu][while]") {
  DeviceBuffer<int> counter(1);
  flowdsl::Graph g;
  auto zero = g.memset("zero", counter.get(), 0, 1, 4);
  auto loop = g.while_loop("count");
  auto enter = g.kernel("enter", keep_below_kernel).launch(1, 32).args(counter.get(), 5, loop.condition()).after(zero);
  loop.after(enter);
  auto inc = loop.body().kernel("increment", increment_kernel).launch(1, 32).args(counter.get());
  auto again = loop.body().kernel("again", keep_below_kernel).launch(1, 32).args(counter.get(), 5, loop.condition()).after(inc);

  Runner r;
  counter.poison();
  r.run(g);
  CHECK(counter.download()[0] == 5);
  enter.arg<1>(0);
  again.arg<1>(0);
  counter.poison();
  CHECK(r.run(g).nodes_updated == 2);
  CHECK(counter.download()[0] == 0);  // the body never ran
}

TEST_CASE("A SWITCH runs the case a kernel picks, and none for a value out of range", "[conditional][gpu][switch]") {
  Data d(7);
  DeviceBuffer<std::int32_t> selector(1);
  flowdsl::Graph g;
  auto pick = g.switch_cases("pick", 3);
  auto decide = fk::condition_case(g, "decide", selector.get(), 0, 2, pick.condition());
  pick.after(decide);
  for (int c = 0; c < 3; ++c) fk::scale(pick.body(c), "scale" + std::to_string(c), n, c + 1.0f, d.x.get(), d.y.get());

  Runner r;
  for (const std::int32_t value : {0, 2, 3, 1, -1, 0, 7}) {
    INFO("selector " << value);
    selector.upload({value});  // data, not a parameter: every launch after the first is a hit
    d.y.poison();
    const flowdsl::LaunchReport report = r.run(g);
    if (value >= 0 && value < 3) {
      CHECK(mismatches(d.y.download(), scaled(d.host, value + 1.0f)) == 0);
    } else {
      CHECK(untouched(d.y));
    }
    CHECK(report.kind == (r.runtime.statistics().launches == 1 ? LaunchKind::instantiated : LaunchKind::hit));
  }
}

TEST_CASE("count.i32 reads back a WHILE's iterations and the SWITCH case taken", "[conditional][gpu][count]") {
  DeviceBuffer<std::int32_t> selector(1), iterations(1), taken(3);
  flowdsl::Graph g;
  // The WHILE goes on while its count is below 5: count.i32 in the body counts, a kernel decides.
  auto zero = g.memset("zero", iterations.get(), 0, 1, 4);
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1}).after(zero);
  auto tick = fk::count(loop.body(), "tick", iterations.get());
  loop.body().kernel("decide", keep_below_kernel).launch(1, 32).args(iterations.get(), 5, loop.condition()).after(tick);
  auto clear = g.memset("clear", taken.get(), 0, 3, 4).after(loop);
  auto pick = g.switch_cases("pick", 3);
  auto decide = fk::condition_case(g, "choose", selector.get(), 0, 2, pick.condition()).after(clear);
  pick.after(decide);
  for (int c = 0; c < 3; ++c) fk::count(pick.body(c), "taken", taken.get() + c);

  Runner r;
  for (const std::int32_t value : {2, 0, 5}) {
    INFO("selector " << value);
    selector.upload({value});
    iterations.poison();
    taken.poison();
    r.run(g);
    CHECK(iterations.download()[0] == 5);
    std::vector<std::int32_t> want(3, 0);
    if (value >= 0 && value < 3) want[value] = 1;
    CHECK(taken.download() == want);
  }
}

TEST_CASE("A WHILE nested in an IF runs only when the IF is taken", "[conditional][gpu][nesting]") {
  DeviceBuffer<float> flag(1);
  flowdsl::Graph g;
  auto gate = g.if_then("gate");
  auto open = fk::condition_greater(g, "open", flag.get(), 0.5f, gate.condition());
  gate.after(open);
  Counter c(gate.body(), 12);

  Runner r;
  for (const float value : {1.0f, 0.0f, 1.0f}) {
    INFO("flag " << value);
    flag.upload({value});
    c.counter.poison();
    r.run(g);
    if (value > 0.5f) {
      CHECK(c.value() == 12);
    } else {
      std::vector<int> got = c.counter.download();
      CHECK(static_cast<std::uint32_t>(got[0]) == 0xFFFFFFFFu);  // not even the memset in the IF's body ran
    }
  }
  // An update two levels down.
  c.decide.arg<1>(3);
  flag.upload({1.0f});
  const flowdsl::LaunchReport report = r.run(g);
  CHECK(report.kind == LaunchKind::updated);
  CHECK(c.value() == 3);
}

TEST_CASE("A kernel in a child graph may set the condition of an IF beside the child", "[conditional][gpu][nesting]") {
  Data d(9);
  flowdsl::Graph g;
  auto stage = g.child("stage");
  auto branch = g.if_else("branch").after(stage);
  auto total = fk::sum(stage.body(), "total", n, d.x.get(), d.partials.get(), d.total.get());
  auto decide =
      fk::condition_greater(stage.body(), "decide", d.total.get(), d.below(), branch.condition()).after(total.finish);
  fk::scale(branch.body(0), "twice", n, 2.0f, d.x.get(), d.y.get());
  fk::scale(branch.body(1), "negate", n, -1.0f, d.x.get(), d.y.get());

  Runner r;
  d.y.poison();
  r.run(g);
  CHECK(mismatches(d.y.download(), scaled(d.host, 2.0f)) == 0);
  decide.arg<1>(d.above());
  d.y.poison();
  CHECK(r.run(g).kind == LaunchKind::updated);
  CHECK(mismatches(d.y.download(), scaled(d.host, -1.0f)) == 0);
}

namespace {
/// An IF on the sum of x (y = 2 x, else y = -x), then a WHILE counting to `limit`. With
/// `loop_first`, the WHILE's condition is asked for before the IF's, so that the two graphs'
/// symbols are numbered differently while their topology is the same.
struct Pipeline {
  Pipeline(unsigned seed, bool above, int limit, bool loop_first) : d(seed), counter(1) {
    auto total = fk::sum(g, "total", n, d.x.get(), d.partials.get(), d.total.get());
    auto branch = g.if_else("branch");
    auto zero = g.memset("zero", counter.get(), 0, 1, 4);
    auto loop = g.while_loop("count", flowdsl::ConditionDefault{1});
    if (loop_first) (void)loop.condition();
    auto decide =
        fk::condition_greater(g, "decide", d.total.get(), above ? d.above() : d.below(), branch.condition()).after(total.finish);
    branch.after(decide);
    fk::scale(branch.body(0), "twice", n, 2.0f, d.x.get(), d.y.get());
    fk::scale(branch.body(1), "negate", n, -1.0f, d.x.get(), d.y.get());
    loop.after(zero, branch);
    auto inc = loop.body().kernel("increment", increment_kernel).launch(1, 32).args(counter.get());
    loop.body().kernel("decide", keep_below_kernel).launch(1, 32).args(counter.get(), limit, loop.condition()).after(inc);
    want_y = scaled(d.host, above ? -1.0f : 2.0f);
    want_count = limit;
  }
  void poison() {
    d.y.poison();
    counter.poison();
  }
  bool correct() const { return mismatches(d.y.download(), want_y) == 0 && counter.download()[0] == want_count; }
  /// Whether nothing wrote this pipeline's outputs since they were poisoned.
  bool still_poisoned() const { return untouched(d.y) && counter.download()[0] == -1; }

  Data d;
  DeviceBuffer<int> counter;
  flowdsl::Graph g;
  std::vector<float> want_y;
  int want_count = 0;
};
}  // namespace

TEST_CASE("A second graph of the same topology runs on the cached executable with its own conditions", "[conditional][gpu][cache]") {
  Pipeline a(11, false, 10, false), b(13, true, 25, true);
  REQUIRE(a.g.topology_hash() == b.g.topology_hash());
  REQUIRE(a.g.description().symbols != b.g.description().symbols);  // numbered in another order

  Runner r;
  a.poison();
  b.poison();
  CHECK(r.run(a.g).kind == LaunchKind::instantiated);
  CHECK(a.correct());
  CHECK(b.still_poisoned());

  a.poison();
  const flowdsl::LaunchReport report = r.run(b.g);
  CHECK(report.kind == LaunchKind::updated);  // the nodes whose values differ from a's, no new executable
  CHECK(b.correct());
  CHECK(a.still_poisoned());

  CHECK(r.run(a.g).kind == LaunchKind::updated);
  CHECK(a.correct());
  CHECK(r.runtime.statistics().misses == 1);
  CHECK(r.runtime.statistics().reinstantiations == 0);
}

TEST_CASE("Registered condition kernels steer a WHILE and a SWITCH by name", "[conditional][gpu][registry]") {
  flowdsl::KernelRegistry registry;
  fk::register_builtins(registry);
  DeviceBuffer<float> counter(1);
  DeviceBuffer<std::int32_t> count(1), probe(1);
  flowdsl::Graph g;
  auto zero = g.memset("zero", counter.get(), 0, 1, 4);
  auto loop = g.while_loop("count", flowdsl::ConditionDefault{1}).after(zero);
  auto inc = loop.body().kernel("increment", increment_f32_kernel).launch(1, 32).args(counter.get());
  auto decide = loop.body()
                    .kernel("decide", *registry.find("condition.less.f32"))
                    .launch(1, 32)
                    .set("value", static_cast<const float*>(counter.get()))
                    .set("threshold", 12.5f)
                    .set("cond", loop.condition())
                    .after(inc);
  auto bucket = g.switch_cases("bucket", 8);
  auto pick = g.kernel("pick", *registry.find("condition.bucket.i32"))
                  .launch(1, 32)
                  .set("count", static_cast<const std::int32_t*>(count.get()))
                  .set("cases", std::int32_t{8})
                  .set("cond", bucket.condition());
  bucket.after(pick);
  for (std::uint32_t b = 0; b < 8; ++b) bucket.body(b).memset("case" + std::to_string(b), probe.get(), 100 + b, 1, 4);

  Runner r;
  const std::int32_t counts[] = {1, 2, 3, 100, 1000};
  const std::int32_t buckets[] = {0, 1, 2, 7, 7};
  for (std::size_t i = 0; i < std::size(counts); ++i) {
    INFO("count " << counts[i]);
    count.upload({counts[i]});
    counter.poison();
    probe.poison();
    r.run(g);
    CHECK(counter.download()[0] == 13.0f);  // 0 -> 13: the first count not below 12.5
    CHECK(probe.download()[0] == 100 + buckets[i]);
  }
  decide.set("threshold", 3.0f);
  counter.poison();
  CHECK(r.run(g).kind == LaunchKind::updated);
  CHECK(counter.download()[0] == 3.0f);
}

TEST_CASE("CUDA's rules for conditional nodes are refused before anything reaches CUDA", "[conditional][gpu][validation]") {
  DeviceBuffer<int> counter(1);
  struct Case {
    const char* rule;
    void (*build)(flowdsl::Graph&, int*);
    const char* message;
  };
  const Case cases[] = {
      {"a host node in a body",
       [](flowdsl::Graph& g, int*) { g.if_then("gate", flowdsl::ConditionDefault{1}).body().host("log", nothing); },
       "node 'gate/log' (host): cannot run inside conditional node 'gate' (CUDA allows kernel, memcpy, "
       "memset, empty, child, library and conditional nodes there)"},
      {"a conditional node in a child graph",
       [](flowdsl::Graph& g, int*) {
         g.child("stage").body().if_then("inner", flowdsl::ConditionDefault{1}).body().empty("nop");
       },
       "node 'stage/inner' (if): a conditional node cannot sit inside child graph 'stage' (CUDA cannot nest a graph "
       "holding one as a child)"},
      {"a WHILE that nothing in its body sets",
       [](flowdsl::Graph& g, int* c) {
         auto loop = g.while_loop("count", flowdsl::ConditionDefault{1});
         loop.body().kernel("increment", increment_kernel).launch(1, 32).args(c);
       },
       "node 'count' (while): no kernel in its body sets its condition, so the loop would never end or never run"},
      {"a WHILE set only from outside its body",
       [](flowdsl::Graph& g, int* c) {
         auto loop = g.while_loop("count");
         g.kernel("enter", keep_below_kernel).launch(1, 32).args(c, 5, loop.condition()).before(loop);
         loop.body().kernel("increment", increment_kernel).launch(1, 32).args(c);
       },
       "node 'count' (while): no kernel in its body sets its condition"},
      {"a setter outside the body holding its node",
       [](flowdsl::Graph& g, int* c) {
         auto loop = g.while_loop("count", flowdsl::ConditionDefault{1});
         auto inner = loop.body().if_then("inner");
         inner.body().kernel("increment", increment_kernel).launch(1, 32).args(c);
         loop.body().kernel("again", keep_below_kernel).launch(1, 32).args(c, 5, loop.condition()).after(inner);
         g.kernel("decide", keep_below_kernel).launch(1, 32).args(c, 5, inner.condition()).before(loop);
       },
       "node 'decide' (kernel): argument 2 sets the condition of node 'count/inner', which must sit in this kernel's "
       "body or a body holding it (CUDA's rule)"},
      {"an IF that nothing sets",
       [](flowdsl::Graph& g, int* c) { g.if_then("gate").body().kernel("increment", increment_kernel).launch(1, 32).args(c); },
       "node 'gate' (if): nothing sets its condition: give it a default value or pass its condition() to a kernel"},
      {"a SWITCH without cases", [](flowdsl::Graph& g, int*) { g.switch_cases("none", 0); },
       "node 'none' (switch): a switch needs at least one case"},
  };
  Runner r;
  for (const Case& c : cases) {
    INFO(c.rule);
    flowdsl::Graph g;
    c.build(g, counter.get());
    CHECK_THROWS_AS(r.runtime.launch(g, r.stream), flowdsl::ValidationError);
    CHECK_THROWS_WITH(r.runtime.launch(g, r.stream), contains(c.message));
  }
  const flowdsl::RuntimeStatistics stats = r.runtime.statistics();
  CHECK(stats.launches == 0);
  CHECK(stats.misses == 0);
  CHECK(r.runtime.size() == 0);
}

TEST_CASE("Conditional nodes do not run node by node", "[conditional][gpu][eager]") {
  flowdsl::Graph g;
  Counter c(g, 4);
  const auto stream = flowdsl::make_stream();
  CHECK_THROWS_WITH(flowdsl::launch_eagerly(g, stream.get()),
                    contains("node 'count' is a conditional node: its condition is set on the device while a graph runs"));
  flowdsl::Runtime debug(flowdsl::RuntimeOptions{8, true});
  CHECK_THROWS_AS(debug.launch(g, stream), flowdsl::UsageError);

  // A kernel ahead of an IF takes its condition: refused before anything runs, by the same rule.
  DeviceBuffer<int> counter(1);
  counter.upload(std::vector<int>{7});
  flowdsl::Graph upstream;
  auto gate = upstream.if_then("gate");
  upstream.kernel("set", keep_below_kernel).launch(1, 32).args(static_cast<const int*>(counter.get()), 10, gate.condition()).before(gate);
  gate.body().kernel("bump", increment_kernel).launch(1, 32).args(counter.get());
  CHECK_THROWS_WITH(flowdsl::launch_eagerly(upstream, stream.get()),
                    contains("node 'gate' is a conditional node: its condition is set on the device while a graph runs"));
  CHECK_THROWS_WITH(debug.launch(upstream, stream), contains("node 'gate' is a conditional node"));
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(counter.download()[0] == 7);  // nothing ran
}
