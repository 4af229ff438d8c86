// SPDX-License-Identifier: Apache-2.0
// The condition kernels: the value each sets, read back through the conditional node it steers
// (an IF with an ELSE, a SWITCH) whose body i writes i + 1 into a probe, against the host
// rules on random inputs; their registration by name.
#include <cmath>
#include <limits>
#include <random>
#include <tuple>

#include "kernel_test_support.cuh"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {

/// What the probe holds when no body ran (a memset writes it before the conditional node).
constexpr std::uint32_t none = 0xA5A5A5A5u;

/// reset (probe = none) -> [the setter, declared by the caller] -> the conditional node, whose
/// body i sets probe = i + 1.
struct Probe {
  Probe() : probe(1) { probe.poison(); }

  /// Declares the reset and `node`'s bodies; the caller's setter goes between them.
  void fill(flowdsl::ConditionalNode node, std::uint32_t bodies, flowdsl::NodeHandle setter) {
    auto reset = g.memset("reset", probe.get(), none, 1, 4);
    setter.after(reset);
    node.after(setter);
    for (std::uint32_t b = 0; b < bodies; ++b) node.body(b).memset("case" + std::to_string(b), probe.get(), b + 1, 1, 4);
  }
  /// Launches and returns the body that ran (probe - 1), or `none`.
  std::uint32_t run(Runner& runner) {
    runner.run(g);
    const std::uint32_t got = probe.download()[0];
    return got == none ? none : got - 1;
  }

  DeviceBuffer<std::uint32_t> probe;
  flowdsl::Graph g;
};

/// For an IF with an ELSE: body 0 runs for a non-zero value, body 1 for 0.
std::uint32_t if_else_body(bool value) { return value ? 0 : 1; }

}  // namespace

TEST_CASE("condition.greater and condition.less compare a device value with the threshold", "[kernels][condition]") {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (const bool greater : {true, false}) {
    INFO((greater ? "greater" : "less"));
    DeviceBuffer<float> value(1);
    Probe t;
    auto branch = t.g.if_else("branch");
    auto set = greater ? fk::condition_greater(t.g, "decide", value.get(), 0.0f, branch.condition())
                       : fk::condition_less(t.g, "decide", value.get(), 0.0f, branch.condition());
    t.fill(branch, 2, set);
    Runner runner;
    std::vector<std::pair<float, float>> cases = {{1.0f, 1.0f}, {-0.0f, 0.0f}, {std::nanf(""), 0.0f},
                                                  {std::numeric_limits<float>::infinity(), 1e30f}};
    for (int i = 0; i < 64; ++i) cases.emplace_back(dist(rng), dist(rng));
    for (const auto& [v, threshold] : cases) {
      INFO("value " << v << ", threshold " << threshold);
      value.upload({v});
      set.arg<1>(threshold);  // a parameter: updated in place
      const bool want = greater ? v > threshold : v < threshold;
      CHECK(t.run(runner) == if_else_body(want));
    }
    CHECK(runner.runtime().statistics().misses == 1);
  }
}

TEST_CASE("condition.case picks the case of a value in its range and no case outside it", "[kernels][condition]") {
  std::mt19937 rng(43);
  for (const std::int32_t cases : {1, 3, 5}) {
    INFO(cases << " cases");
    DeviceBuffer<std::int32_t> value(1);
    Probe t;
    auto select = t.g.switch_cases("select", static_cast<std::uint32_t>(cases));
    auto set = fk::condition_case(t.g, "decide", value.get(), 0, cases - 1, select.condition());
    t.fill(select, cases, set);
    Runner runner;
    for (int i = 0; i < 40; ++i) {
      const std::int32_t lower = std::uniform_int_distribution<std::int32_t>(-1000, 1000)(rng);
      const std::int32_t upper = lower + cases - 1;
      const std::int32_t v = std::uniform_int_distribution<std::int32_t>(lower - 3, upper + 3)(rng);
      INFO("value " << v << " in [" << lower << ", " << upper << "]");
      value.upload({v});
      set.arg<1>(lower).arg<2>(upper);
      const std::uint32_t want = ref::condition_case(v, lower, upper);
      CHECK(t.run(runner) == (want < static_cast<std::uint32_t>(cases) ? want : none));
    }
    // Ranges wider than the SWITCH: values past its last case run none, as the host says.
    const std::int32_t lowest = std::numeric_limits<std::int32_t>::min();
    for (const auto& [v, lower, upper] : {std::tuple{5, 0, 100}, std::tuple{-1, 0, -1}, std::tuple{lowest, lowest, -1}}) {
      INFO("value " << v << " in [" << lower << ", " << upper << "]");
      value.upload({v});
      set.arg<1>(lower).arg<2>(upper);
      const std::uint32_t want = ref::condition_case(v, lower, upper);
      CHECK(t.run(runner) == (want < static_cast<std::uint32_t>(cases) ? want : none));
    }
    CHECK(runner.runtime().statistics().misses == 1);
  }
}

TEST_CASE("condition.bucket picks the power-of-two bucket of a count, clamped to the cases", "[kernels][condition]") {
  std::mt19937 rng(47);
  constexpr std::uint32_t switch_cases = 8;
  DeviceBuffer<std::int32_t> count(1);
  Probe t;
  auto select = t.g.switch_cases("bucket", switch_cases);
  auto set = fk::condition_bucket(t.g, "decide", count.get(), switch_cases, select.condition());
  t.fill(select, switch_cases, set);
  Runner runner;
  std::vector<std::pair<std::int32_t, std::int32_t>> cases;  // (count, cases argument)
  for (const std::int32_t c : {-7, 0, 1, 2, 3, 4, 5, 64, 65, 128, 129, std::numeric_limits<std::int32_t>::max()}) {
    cases.emplace_back(c, 8);
  }
  for (int i = 0; i < 40; ++i) cases.emplace_back(std::uniform_int_distribution<std::int32_t>(-3, 300)(rng), 8);
  for (const std::int32_t limit : {4, 1, 0, -2}) cases.emplace_back(100, limit);  // fewer cases than the SWITCH has
  for (const auto& [c, limit] : cases) {
    INFO("count " << c << ", cases " << limit);
    count.upload({c});
    set.arg<1>(limit);
    CHECK(t.run(runner) == ref::condition_bucket(c, limit));
  }
  CHECK(runner.runtime().statistics().misses == 1);
}

TEST_CASE("The condition kernels are registered by name with a condition parameter", "[kernels][condition][registry]") {
  flowdsl::KernelRegistry registry;
  fk::register_builtins(registry);
  const flowdsl::ParamType condition = flowdsl::param_type_of<flowdsl::Condition>();
  for (const char* name : {"condition.greater.f32", "condition.less.f32"}) {
    INFO(name);
    const flowdsl::KernelInfo* info = registry.find(name);
    REQUIRE(info != nullptr);
    REQUIRE(info->params.size() == 3);
    CHECK(info->params[0].type == flowdsl::param_type_of<const float*>());
    CHECK(info->params[0].extent == "1");
    CHECK(info->params[1].type == flowdsl::param_type_of<float>());
    CHECK(info->params[2].type == condition);
    CHECK(info->checked());
  }
  const flowdsl::KernelInfo* cases = registry.find("condition.case.i32");
  REQUIRE(cases != nullptr);
  CHECK(cases->index_of("upper") == 2);
  CHECK(cases->params[3].type == condition);
  const flowdsl::KernelInfo* bucket = registry.find("condition.bucket.i32");
  REQUIRE(bucket != nullptr);
  CHECK(bucket->params[0].type == flowdsl::param_type_of<const std::int32_t*>());
  CHECK(bucket->params[2].type == condition);

  // The launchers run one warp, whatever the arguments.
  flowdsl::Graph g;
  DeviceBuffer<float> value(1);
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1});
  auto k = fk::condition_less(loop.body(), "decide", value.get(), 1.0f, loop.condition());
  const auto& op = std::get<flowdsl::KernelOp>(g.description().nodes[k.id()].op);
  CHECK(op.launch.grid.volume() == 1);
  CHECK(op.launch.block.volume() == 32);
  CHECK(op.kernel_name == "condition.less");
}
