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

namespace {

/// What out holds where a decode loop wrote nothing (it writes tokens, and -1 for a sequence
/// without tokens remaining).
constexpr std::int32_t unwritten = -7;

/// A stand-in for a decode step: each row's next token from its token and position, over 50
/// tokens, written over its input as the argmax writes it.
__global__ void fake_step_kernel(std::int32_t rows, std::int32_t* tokens, const std::int32_t* positions) {
  for (std::int32_t b = blockIdx.x * blockDim.x + threadIdx.x; b < rows; b += gridDim.x * blockDim.x) {
    tokens[b] = (tokens[b] * 31 + 7 + positions[b]) % 50;
  }
}

/// The sequences of a decode loop, on the device and as the host model runs them.
struct DecodeLoop {
  DecodeLoop(std::int32_t rows_, std::int32_t steps_, std::int32_t end_token_)
      : rows(rows_), steps(steps_), end_token(end_token_), tokens(std::size_t(rows_)), positions(std::size_t(rows_)),
        remaining(std::size_t(rows_)), out(std::size_t(rows_) * std::size_t(steps_)), step(1), iterations(1) {
    auto zero = g.memset("zero", iterations.get(), 0, 1, 4);
    auto loop = g.while_loop("decode", flowdsl::ConditionDefault{0});
    auto begin = fk::decode_loop_begin(g, "begin", rows, steps, remaining.get(), step.get(), loop.condition()).after(zero);
    loop.after(begin);
    auto fake = loop.body().kernel("step", fake_step_kernel).launch(2, 128).args(rows, tokens.get(),
                                                                                 static_cast<const std::int32_t*>(positions.get()));
    auto counted = fk::count(loop.body(), "count", iterations.get()).after(fake);
    fk::decode_loop_step(loop.body(), "advance", rows, steps, end_token, tokens.get(), positions.get(), remaining.get(),
                         out.get(), step.get(), loop.condition())
        .after(counted);
  }

  /// One launch on the host: what out, tokens, positions, remaining and step hold after it (out
  /// keeps what it held where the loop wrote nothing), and the iterations it ran.
  struct State {
    std::vector<std::int32_t> tokens, positions, remaining, out;
    std::int32_t step = 0, iterations = 0;
  };
  State model(State s) const {
    s.step = 0;
    s.iterations = 0;
    const auto going = [&] {
      for (std::int32_t r : s.remaining) {
        if (r > 0) return true;
      }
      return false;
    };
    bool loop = steps > 0 && going();
    while (loop) {
      ++s.iterations;
      for (std::int32_t b = 0; b < rows; ++b) {
        std::int32_t& t = s.tokens[std::size_t(b)];
        t = (t * 31 + 7 + s.positions[std::size_t(b)]) % 50;
      }
      for (std::int32_t b = 0; b < rows; ++b) {
        std::int32_t token = -1;
        std::int32_t& left = s.remaining[std::size_t(b)];
        if (left > 0) {
          token = s.tokens[std::size_t(b)];
          ++s.positions[std::size_t(b)];
          left = token == end_token ? 0 : left - 1;
        }
        s.out[std::size_t(b) * std::size_t(steps) + std::size_t(s.step)] = token;
      }
      ++s.step;
      loop = going() && s.step < steps;
    }
    return s;
  }

  State download() const {
    return {tokens.download(), positions.download(), remaining.download(), out.download(), step.download()[0],
            iterations.download()[0]};
  }

  std::int32_t rows, steps, end_token;
  DeviceBuffer<std::int32_t> tokens, positions, remaining, out, step, iterations;
  flowdsl::Graph g;
};

/// Runs `launches` launches of `t` from `start`, each checked against the model.
void check_launches(DecodeLoop& t, DecodeLoop::State start, int launches) {
  Runner runner;
  t.tokens.upload(start.tokens);
  t.positions.upload(start.positions);
  t.remaining.upload(start.remaining);
  DecodeLoop::State want = start;
  for (int launch = 0; launch < launches; ++launch) {
    INFO("launch " << launch);
    t.out.upload(std::vector<std::int32_t>(t.out.size(), unwritten));
    want.out.assign(t.out.size(), unwritten);
    want = t.model(want);
    runner.run(t.g);
    const DecodeLoop::State got = t.download();
    CHECK(got.iterations == want.iterations);
    CHECK(got.step == want.step);
    CHECK(got.out == want.out);
    CHECK(got.tokens == want.tokens);
    CHECK(got.positions == want.positions);
    CHECK(got.remaining == want.remaining);
  }
}

DecodeLoop::State start_of(std::int32_t rows, std::mt19937& rng, std::int32_t max_remaining) {
  DecodeLoop::State s;
  for (std::int32_t b = 0; b < rows; ++b) {
    s.tokens.push_back(std::uniform_int_distribution<std::int32_t>(0, 49)(rng));
    s.positions.push_back(std::uniform_int_distribution<std::int32_t>(0, 500)(rng));
    s.remaining.push_back(std::uniform_int_distribution<std::int32_t>(0, max_remaining)(rng));
  }
  return s;
}

}  // namespace

TEST_CASE("A decode loop stops each sequence at its end token or its length limit, continued across launches",
          "[kernels][condition][decode_loop]") {
  std::mt19937 rng(47);
  for (const std::int32_t rows : {1, 8, 300}) {  // 300: more sequences than the block's threads
    INFO(rows << " sequences");
    DecodeLoop t(rows, 16, 3);
    check_launches(t, start_of(rows, rng, 40), 4);
  }
}

TEST_CASE("A decode loop whose sequences all end at once, or none end, runs as many steps as they need",
          "[kernels][condition][decode_loop]") {
  std::mt19937 rng(53);
  SECTION("every sequence reaches its limit at the same step") {
    DecodeLoop t(8, 16, -1);
    DecodeLoop::State s = start_of(8, rng, 0);
    s.remaining.assign(8, 5);
    check_launches(t, s, 1);
    CHECK(t.iterations.download()[0] == 5);
    CHECK(t.step.download()[0] == 5);
  }
  SECTION("no sequence ends: the loop runs `steps` steps a launch") {
    DecodeLoop t(8, 16, -1);
    DecodeLoop::State s = start_of(8, rng, 0);
    s.remaining.assign(8, 1000);
    check_launches(t, s, 2);
    CHECK(t.iterations.download()[0] == 16);
  }
  SECTION("no sequence has a token left: the body never runs") {
    DecodeLoop t(8, 16, 3);
    DecodeLoop::State s = start_of(8, rng, 0);
    s.remaining.assign(8, 0);
    check_launches(t, s, 1);
    CHECK(t.iterations.download()[0] == 0);
  }
  SECTION("every sequence makes the end token on its first step") {
    DecodeLoop t(4, 16, 7);
    DecodeLoop::State s;
    s.positions = {0, 0, 0, 0};
    s.tokens = {0, 0, 0, 0};  // (0 * 31 + 7 + 0) % 50 = 7: the end token
    s.remaining = {9, 9, 9, 9};
    check_launches(t, s, 1);
    CHECK(t.iterations.download()[0] == 1);
    CHECK(t.remaining.download() == std::vector<std::int32_t>{0, 0, 0, 0});
  }
}

TEST_CASE("decode_loop.step changes nothing for a step outside its range and ends the loop",
          "[kernels][condition][decode_loop]") {
  // A step counter set from outside (a graph file's buffer): nothing taken, nothing written.
  DeviceBuffer<std::int32_t> tokens(4), positions(4), remaining(4), out(4 * 2), step(1), iterations(1);
  for (const std::int32_t s : {-1, 2, 2147483647}) {
    INFO("step " << s);
    tokens.upload({1, 2, 3, 4});
    positions.upload({0, 0, 0, 0});
    remaining.upload({5, 5, 5, 5});
    step.upload({s});
    iterations.upload({0});
    out.upload(std::vector<std::int32_t>(out.size(), unwritten));
    flowdsl::Graph g;
    auto loop = g.while_loop("decode", flowdsl::ConditionDefault{1});
    auto counted = fk::count(loop.body(), "count", iterations.get());
    fk::decode_loop_step(loop.body(), "advance", 4, 2, -1, tokens.get(), positions.get(), remaining.get(), out.get(),
                         step.get(), loop.condition())
        .after(counted);
    Runner runner;
    runner.run(g);
    CHECK(iterations.download()[0] == 1);
    CHECK(out.download() == std::vector<std::int32_t>(8, unwritten));
    CHECK(step.download()[0] == s);
    CHECK(positions.download() == std::vector<std::int32_t>{0, 0, 0, 0});
    CHECK(remaining.download() == std::vector<std::int32_t>{5, 5, 5, 5});
  }
}
