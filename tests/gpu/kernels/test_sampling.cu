// SPDX-License-Identifier: Apache-2.0
// sample_top_p against its host reference, through a Graph and Runtime: greedy equals row_argmax;
// sampled tokens equal the reference's on nearly every row and always lie in its kept set (up to
// float rounding at the top-p threshold); the same seed and step give the same tokens on any
// grid, a step read on the device gives new ones in a replayed graph; frequencies match the
// probabilities; NaN, -inf and ties at the thresholds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernel_test_support.cuh"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {
using i32 = std::int32_t;

struct Settings {
  float temperature;
  i32 top_k;
  float top_p;
};

/// The vocabulary sizes of the tests: one token, and those of small and large language models.
const int vocabularies[] = {1, 1000, 32000, 128256};

/// Logits of `rows` rows, rounded to T: uniform in [-6, 6), with a few tokens a row raised by 8,
/// so that some rows are peaked as a trained model's are.
template <class T>
std::vector<float> make_logits(int rows, int cols, unsigned seed) {
  std::vector<float> x = random_values<T>(static_cast<std::size_t>(rows) * cols, seed, -6.0f, 6.0f);
  for (int r = 0; r < rows; r += 2) {
    for (int k = 0; k < 4; ++k) {
      float& v = x[static_cast<std::size_t>(r) * cols + (static_cast<std::size_t>(r) * 7919 + k * 104729) % cols];
      v = to_float(from_float<T>(v + 8.0f));
    }
  }
  return x;
}

/// Device copies of the logits and the step, and the output, poisoned.
template <class T>
struct Buffers {
  DeviceBuffer<T> logits;
  DeviceBuffer<i32> step{1}, out;
  Buffers(const std::vector<float>& x, int rows, i32 at) : logits(x.size()), out(static_cast<std::size_t>(rows)) {
    upload(logits, x);
    set_step(at);
    out.poison();
  }
  void set_step(i32 at) { step.upload({at}); }
};

template <class T>
auto declare(flowdsl::Graph& g, int rows, int cols, const Settings& s, std::uint64_t seed, Buffers<T>& b) {
  return fk::sample_top_p(g, "sample", rows, cols, s.temperature, s.top_k, s.top_p, seed,
                          static_cast<const i32*>(b.step.get()), static_cast<const T*>(b.logits.get()), b.out.get());
}

/// The kernel's tokens for rows of `x` at step `at`.
template <class T>
std::vector<i32> sample(int rows, int cols, const Settings& s, std::uint64_t seed, i32 at,
                        const std::vector<float>& x) {
  Buffers<T> b(x, rows, at);
  flowdsl::Graph g;
  declare(g, rows, cols, s, seed, b);
  Runner runner;
  runner.run(g);
  return b.out.download();
}

/// The tokens the reference's rules could keep in a row when the top-p mass is known to within
/// `slack` (float rounding in the kernel): top-k exactly (logits compare exactly), top-p as the
/// smallest set of largest probabilities holding top_p + slack of the mass, ties included.
std::vector<bool> loosely_kept(const float* row, int cols, const Settings& s, double slack) {
  std::vector<double> x(row, row + cols);
  for (double& v : x) v = std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
  std::vector<int> order(static_cast<std::size_t>(cols));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  const auto through_ties = [&](std::size_t n) {
    while (n < order.size() && x[order[n]] == x[order[n - 1]]) ++n;
    return n;
  };
  std::size_t kept = s.temperature > 0 ? order.size() : 1;
  if (s.temperature > 0 && s.top_k > 0 && s.top_k < cols) kept = through_ties(static_cast<std::size_t>(s.top_k));
  if (s.temperature > 0 && s.top_p < 1.0f) {
    double mass = 0, running = 0;
    for (std::size_t i = 0; i < kept; ++i) mass += std::exp((x[order[i]] - x[order[0]]) / s.temperature);
    std::size_t n = 0;
    while (n < kept && running < (s.top_p + slack) * mass)
      running += std::exp((x[order[n++]] - x[order[0]]) / s.temperature);
    kept = through_ties(std::max<std::size_t>(n, 1));
  }
  std::vector<bool> in(static_cast<std::size_t>(cols), false);
  for (std::size_t i = 0; i < kept; ++i) in[order[i]] = true;
  return in;
}

/// Frequencies of tokens drawn from 20 000 rows of the same 8 logits (rows differ in their Philox
/// counter) within 5 standard deviations of `want` (unnormalised; 0: never drawn).
template <class T>
void check_frequencies(const std::vector<double>& p, const Settings& s, std::vector<double> want) {
  const int rows = 20000, cols = static_cast<int>(p.size());
  std::vector<float> x;
  for (int r = 0; r < rows; ++r) {
    for (const double v : p) x.push_back(static_cast<float>(std::log(v)));
  }
  const std::vector<i32> tokens = sample<T>(rows, cols, s, 1234, 0, x);
  std::vector<int> n(p.size(), 0);
  for (const i32 t : tokens) {
    REQUIRE(t >= 0);
    REQUIRE(t < cols);
    ++n[static_cast<std::size_t>(t)];
  }
  const double total = std::accumulate(want.begin(), want.end(), 0.0);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double q = want[i] / total, sigma = std::sqrt(q * (1 - q) / rows);
    INFO("type " << type_name<T>() << ", token " << i << ": drawn " << n[i] << " times in " << rows << ", probability "
                 << q);
    if (q == 0) {
      CHECK(n[i] == 0);
    } else {
      CHECK(std::fabs(double(n[i]) / rows - q) <= 5 * sigma);
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("Greedy sampling (temperature 0) is row_argmax", "[kernels][sampling]", float, __nv_bfloat16) {
  using T = TestType;
  for (const int rows : {1, 3, 64}) {
    for (const int cols : vocabularies) {
      INFO("type " << type_name<T>() << ", " << rows << " x " << cols);
      const std::vector<float> x = make_logits<T>(rows, cols, static_cast<unsigned>(rows * 131 + cols));
      CHECK(sample<T>(rows, cols, {0.0f, 0, 1.0f}, 1, 0, x) == ref::row_argmax(rows, cols, x));
      CHECK(sample<T>(rows, cols, {-1.0f, 50, 0.5f}, 1, 0, x) == ref::row_argmax(rows, cols, x));
    }
  }
}

TEMPLATE_TEST_CASE("Sampled tokens are the reference's and lie in its kept set", "[kernels][sampling]", float,
                   __nv_bfloat16) {
  using T = TestType;
  const Settings settings[] = {{1.0f, 0, 1.0f},    {0.7f, 50, 1.0f}, {1.0f, 0, 0.9f}, {0.6f, 40, 0.95f},
                               {1.5f, 1000, 0.5f}, {1.0f, 1, 1.0f},  {2.0f, 0, 1e-4f}};
  int rows_checked = 0, agreeing = 0;
  for (const int rows : {1, 3, 64}) {
    for (const int cols : vocabularies) {
      const std::vector<float> x = make_logits<T>(rows, cols, static_cast<unsigned>(rows * 17 + cols));
      for (const Settings& s : settings) {
        INFO("type " << type_name<T>() << ", " << rows << " x " << cols << ", temperature " << s.temperature
                     << ", top_k " << s.top_k << ", top_p " << s.top_p);
        const i32 step = rows + cols;
        const std::vector<i32> got = sample<T>(rows, cols, s, 77, step, x);
        const std::vector<i32> want = ref::sample_top_p(rows, cols, s.temperature, s.top_k, s.top_p, 77, step, x);
        for (int r = 0; r < rows; ++r) {
          INFO("row " << r << ": kernel " << got[r] << ", reference " << want[r]);
          REQUIRE(got[r] >= 0);
          REQUIRE(got[r] < cols);
          const float* row = x.data() + static_cast<std::size_t>(r) * cols;
          CHECK(loosely_kept(row, cols, s, 1e-4)[static_cast<std::size_t>(got[r])]);
          ++rows_checked;
          agreeing += got[r] == want[r];
        }
      }
    }
  }
  INFO(agreeing << " of " << rows_checked << " rows agree with the reference");
  CHECK(agreeing >= 0.99 * rows_checked);
}

TEMPLATE_TEST_CASE("top_k = 1 and a tiny top_p draw the largest logit", "[kernels][sampling]", float, __nv_bfloat16) {
  using T = TestType;
  const int rows = 64, cols = 32000;
  const std::vector<float> x = make_logits<T>(rows, cols, 5);
  const std::vector<i32> greedy = ref::row_argmax(rows, cols, x);
  for (const Settings& s : {Settings{1.0f, 1, 1.0f}, Settings{3.0f, 0, 1e-6f}, Settings{1.0f, 0, 0.0f}}) {
    INFO("type " << type_name<T>() << ", top_k " << s.top_k << ", top_p " << s.top_p);
    const std::vector<i32> got = sample<T>(rows, cols, s, 3, 9, x);
    for (int r = 0; r < rows; ++r) {
      // A tie at the max (common in bfloat16) is kept whole: any of its elements may be drawn.
      const std::size_t row = static_cast<std::size_t>(r) * cols;
      REQUIRE(got[r] >= 0);
      CHECK(x[row + got[r]] == x[row + greedy[r]]);
      if (std::is_same_v<T, float>) CHECK(got[r] == greedy[r]);
    }
  }
}

TEST_CASE("The same seed and step give the same tokens on any grid; another step, other tokens",
          "[kernels][sampling]") {
  using T = __nv_bfloat16;
  const int rows = 64, cols = 32000;
  const Settings s{1.0f, 0, 0.95f};
  const std::vector<float> x = make_logits<T>(rows, cols, 11);
  const std::vector<i32> first = sample<T>(rows, cols, s, 5, 100, x);
  CHECK(sample<T>(rows, cols, s, 5, 100, x) == first);
  {
    Buffers<T> b(x, rows, 100);
    flowdsl::Graph g;
    declare(g, rows, cols, s, 5, b).grid(3);  // 3 blocks striding over the rows
    Runner runner;
    runner.run(g);
    CHECK(b.out.download() == first);
  }
  const std::vector<i32> next = sample<T>(rows, cols, s, 5, 101, x);
  int same = 0;
  for (int r = 0; r < rows; ++r) same += next[r] == first[r];
  CHECK(same < rows / 4);
}

TEST_CASE("A replayed graph draws at the step it reads on the device; a null step is step 0", "[kernels][sampling]") {
  using T = float;
  const int rows = 64, cols = 1000;
  const Settings s{0.8f, 100, 0.9f};
  const std::vector<float> x = make_logits<T>(rows, cols, 13);
  Buffers<T> b(x, rows, 0);
  flowdsl::Graph g;
  declare(g, rows, cols, s, 99, b);
  Runner runner;
  for (const i32 at : {0, 1, 2, 1000000}) {
    b.set_step(at);
    b.out.poison();
    runner.run(g);  // the same executable each time: no parameter changed
    INFO("step " << at);
    CHECK(b.out.download() == ref::sample_top_p(rows, cols, s.temperature, s.top_k, s.top_p, 99, at, x));
  }
  CHECK(runner.runtime().statistics().misses == 1);
  CHECK(runner.runtime().statistics().node_updates == 0);

  flowdsl::Graph null_step;
  fk::sample_top_p(null_step, "sample", rows, cols, s.temperature, s.top_k, s.top_p, 99, nullptr,
                   static_cast<const T*>(b.logits.get()), b.out.get());
  b.out.poison();
  runner.run(null_step);
  CHECK(b.out.download() == ref::sample_top_p(rows, cols, s.temperature, s.top_k, s.top_p, 99, 0, x));
}

TEMPLATE_TEST_CASE("Tokens come with their probabilities, within top_k and top_p", "[kernels][sampling]", float,
                   __nv_bfloat16) {
  using T = TestType;
  // Probabilities with a tie at 0.1 (logits exactly equal in any type), where the thresholds fall.
  const std::vector<double> p = {0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02};
  // The softmax of the logits as T rounds them.
  std::vector<double> rounded;
  for (const double v : p)
    rounded.push_back(std::exp(double(to_float(from_float<T>(static_cast<float>(std::log(v)))))));
  const auto only = [&](int n) {
    std::vector<double> w(rounded.begin(), rounded.begin() + n);
    w.resize(rounded.size(), 0.0);
    return w;
  };
  check_frequencies<T>(p, {1.0f, 0, 1.0f}, rounded);
  check_frequencies<T>(p, {1.0f, 4, 1.0f}, only(5));  // the 4th largest is tied: 5 kept
  check_frequencies<T>(p, {1.0f, 0, 0.6f}, only(3));  // 0.65 >= 0.6
  check_frequencies<T>(p, {1.0f, 0, 0.7f}, only(5));  // 0.75 >= 0.7, and the tie
  check_frequencies<T>(p, {1.0f, 5, 0.5f}, only(2));  // 0.5 of the top-5 mass 0.85
  std::vector<double> sharpened;
  for (const double v : rounded) sharpened.push_back(v * v);
  check_frequencies<T>(p, {0.5f, 0, 1.0f}, sharpened);  // temperature 1/2 squares the probabilities
}

TEST_CASE("NaN logits are never drawn and a row of -inf and NaN gets -1", "[kernels][sampling]") {
  using T = float;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int rows = 4, cols = 1000;
  std::vector<float> x = make_logits<T>(rows, cols, 17);
  for (int c = 0; c < cols; ++c) {
    if (c % 3 != 0) x[c] = nan;                                         // row 0: a third of the row is a number
    x[static_cast<std::size_t>(cols) + c] = c % 2 ? -inf : nan;         // row 1: nothing to draw
    if (c != 500) x[2 * static_cast<std::size_t>(cols) + c] = -inf;     // row 2: one token left
    if (c % 100 == 7) x[3 * static_cast<std::size_t>(cols) + c] = inf;  // row 3: +inf takes all the mass
  }
  for (const Settings& s : {Settings{1.0f, 0, 1.0f}, Settings{0.0f, 0, 1.0f}, Settings{1.0f, 20, 0.5f}}) {
    for (const i32 step : {0, 1, 2, 3}) {
      INFO("temperature " << s.temperature << ", top_k " << s.top_k << ", step " << step);
      const std::vector<i32> got = sample<T>(rows, cols, s, 8, step, x);
      CHECK(got == ref::sample_top_p(rows, cols, s.temperature, s.top_k, s.top_p, 8, step, x));
      CHECK(got[0] % 3 == 0);
      CHECK(got[1] == -1);
      CHECK(got[2] == 500);
      CHECK(got[3] % 100 == 7);
    }
  }
}

TEST_CASE("sample_top_p is registered by name with its extents", "[kernels][sampling][registry]") {
  flowdsl::KernelRegistry registry;
  fk::register_builtins(registry);
  for (const char* name : {"sample_top_p.f32", "sample_top_p.f16", "sample_top_p.bf16"}) {
    const flowdsl::KernelInfo* info = registry.find(name);
    REQUIRE(info != nullptr);
    CHECK(info->checked());  // every pointer declares its extent
  }
}
