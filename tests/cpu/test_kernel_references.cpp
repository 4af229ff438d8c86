// SPDX-License-Identifier: Apache-2.0
// The host references of the kernel library where they carry logic of their own: padding and
// masks, CartPole's rules and resets, softmax on large inputs, the stencil, random numbers, the
// values the condition kernels set, argmax keys across a row's parts.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>

#include "catch.hpp"
#include "counter_hash.hpp"
#include "reduction/argmax_key.hpp"
#include "reference.hpp"

namespace ref = flowdsl::kernels::reference;
namespace fk = flowdsl::kernels;
#if defined(FLOWDSL_CATCH2_V3)
using Catch::Approx;
#endif

TEST_CASE("Pad copies each row, cuts long rows and masks the padding", "[reference][batching]") {
  const ref::Floats values = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<std::int32_t> offsets = {0, 2, 2, 7};  // lengths 2, 0, 5
  const ref::Padded p = ref::pad(3, 4, -1.0f, values, offsets);
  CHECK(p.values == ref::Floats{1, 2, -1, -1, -1, -1, -1, -1, 3, 4, 5, 6});
  CHECK(p.mask == std::vector<std::uint8_t>{1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
}

TEST_CASE("Crop inverts pad and fills the cut part of long rows", "[reference][batching]") {
  const ref::Floats values = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<std::int32_t> offsets = {0, 2, 2, 7};
  const ref::Padded p = ref::pad(3, 4, -1.0f, values, offsets);
  CHECK(ref::crop(3, 4, 0.0f, p.values, offsets) == ref::Floats{1, 2, 3, 4, 5, 6, 0});
  CHECK(ref::crop(3, 8, 0.0f, ref::pad(3, 8, 9.0f, values, offsets).values, offsets) == values);
}

TEST_CASE("Gather takes the selected rows and zeros for indices out of range", "[reference][batching]") {
  const ref::Floats in = {1, 2, 3, 4, 5, 6};  // 3 rows of 2
  CHECK(ref::gather_rows(2, {2, 0, -1, 3, 2}, 3, in) == ref::Floats{5, 6, 1, 2, 0, 0, 0, 0, 5, 6});
}

TEST_CASE("Softmax is finite and sums to one on large inputs", "[reference][softmax]") {
  const ref::Floats x = {1e30f, 1e30f, -1e30f, 3e38f, 3e38f, 0.0f, -88.0f, 0.0f, 88.0f};
  const std::vector<double> y = ref::softmax(3, 3, x);
  for (double v : y) CHECK(std::isfinite(v));
  CHECK(y[0] == Approx(0.5));
  CHECK(y[2] == 0.0);
  CHECK(y[3] == Approx(0.5));
  CHECK(y[5] == 0.0);
  CHECK(y[6] + y[7] + y[8] == Approx(1.0));
  CHECK(y[8] == Approx(1.0));
}

TEST_CASE("Layer normalisation gives zero mean and unit variance before gamma and beta", "[reference][layer_norm]") {
  const ref::Floats x = {1, 2, 3, 4, 10, 10, 10, 10};
  const std::vector<double> y = ref::layer_norm(2, 4, 1e-5f, x, {1, 1, 1, 1}, {0, 0, 0, 0});
  double mean = 0, var = 0;
  for (int c = 0; c < 4; ++c) mean += y[c] / 4;
  for (int c = 0; c < 4; ++c) var += (y[c] - mean) * (y[c] - mean) / 4;
  CHECK(mean == Approx(0.0).margin(1e-12));
  CHECK(var == Approx(1.0).epsilon(1e-4));
  for (int c = 4; c < 8; ++c) CHECK(y[c] == 0.0);  // a constant row normalises to zero
  const std::vector<double> shifted = ref::layer_norm(1, 4, 1e-5f, x, {2, 2, 2, 2}, {1, 1, 1, 1});
  CHECK(shifted[0] == Approx(2 * y[0] + 1));
}

TEST_CASE("Row reductions: argmax takes the first of equal maxima", "[reference][reduce]") {
  const ref::Floats x = {1, 3, 3, -1, -5, -2, -2, -9};
  CHECK(ref::row_argmax(2, 4, x) == std::vector<std::int32_t>{1, 1});
  CHECK(ref::row_max(2, 4, x) == ref::Floats{3, -2});
  CHECK(ref::row_sum(2, 4, x) == std::vector<double>{6, -18});
  CHECK(ref::row_argmax(1, 0, {}) == std::vector<std::int32_t>{-1});
}

TEST_CASE("Argmax keys of a row's parts meet in their max as the row's argmax", "[reference][reduce]") {
  const float inf = std::numeric_limits<float>::infinity();
  // Rows of 12: ties within and across parts, negatives only, -0 before +0, infinities.
  const std::vector<ref::Floats> rows = {
      {1, 3, 3, -1, -5, -2, 3, -9, 0, 2, 3, 1},      {-7, -3, -3, -8, -5, -2.5f, -2, -9, -4, -2, -11, -3},
      {-0.0f, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
      {5, 1, 2, 3, 4, inf, 0, inf, -inf, 1, 2, 3},   {1e-30f, -1e-30f, 2e-30f, 1e30f, -1e30f, 1e30f, 0, 0, 0, 0, 0, 0}};
  std::mt19937 rng(5);
  std::vector<ref::Floats> all(rows);
  for (int i = 0; i < 200; ++i) {  // small integers: many ties
    ref::Floats r(12);
    for (float& v : r) v = float(std::uniform_int_distribution<int>(-3, 3)(rng));
    all.push_back(r);
  }
  for (const ref::Floats& x : all) {
    const std::int32_t want = ref::row_argmax(1, 12, x)[0];
    for (const int parts : {1, 2, 3, 4, 6, 12}) {
      const int cols = 12 / parts;
      std::uint64_t best = 0;
      for (int p = 0; p < parts; ++p) {
        const ref::Floats part(x.begin() + p * cols, x.begin() + (p + 1) * cols);
        best = std::max(best, ref::row_argmax_key(1, cols, p * cols, part)[0]);
      }
      INFO(parts << " parts");
      CHECK(fk::detail::argmax_key_index(best) == want);
    }
  }
  CHECK(ref::row_argmax_key(1, 0, 5, {}) == std::vector<std::uint64_t>{0});
  CHECK(fk::detail::argmax_key_index(0) == -1);
}

TEST_CASE("Gathering from a share of a table takes the rows it holds and zeros the rest", "[reference][batching]") {
  const ref::Floats share = {10, 11, 20, 21, 30, 31};  // rows 4, 5, 6 of a larger table, 2 columns
  CHECK(ref::gather_rows_from(2, {5, 3, 6, 4, 7, -1}, 4, 3, share) == ref::Floats{20, 21, 0, 0, 30, 31, 10, 11, 0, 0, 0, 0});
  // Two shares' gathers add up to the whole table's.
  const ref::Floats whole = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<std::int32_t> index = {3, 0, 2, 1, 9};
  ref::Floats sum = ref::gather_rows_from(2, index, 0, 2, {1, 2, 3, 4});
  const ref::Floats high = ref::gather_rows_from(2, index, 2, 2, {5, 6, 7, 8});
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += high[i];
  CHECK(sum == ref::gather_rows(2, index, 4, whole));
}

TEST_CASE("CartPole follows gym's equations of motion", "[reference][cartpole]") {
  // From rest with the pole upright, a push right accelerates the cart right and the pole left
  // (gym: xacc = 9.7561, thetaacc = -14.6341), and the first Euler step moves only velocities.
  ref::CartPole s;
  CHECK_FALSE(ref::cartpole_dynamics(s, 1));
  CHECK(s.x == 0.0f);
  CHECK(s.theta == 0.0f);
  CHECK(s.x_dot == Approx(0.02 * 9.75609756).epsilon(1e-6));
  CHECK(s.theta_dot == Approx(0.02 * -14.63414634).epsilon(1e-6));
  ref::CartPole t;
  ref::cartpole_dynamics(t, 0);
  CHECK(t.x_dot == Approx(-s.x_dot));
}

TEST_CASE("CartPole terminates past 2.4 or 12 degrees and not before", "[reference][cartpole]") {
  ref::CartPole inside{2.39f, 0.0f, 0.0f, 0.0f};
  CHECK_FALSE(ref::cartpole_dynamics(inside, 1));
  ref::CartPole outside{2.39f, 1.0f, 0.0f, 0.0f};  // x moves by 0.02 to 2.41
  CHECK(ref::cartpole_dynamics(outside, 1));
  ref::CartPole tilted{0.0f, 0.0f, 0.2094f, 0.1f};  // theta moves past 0.20944
  CHECK(ref::cartpole_dynamics(tilted, 1));
  ref::CartPole left{0.0f, 0.0f, -0.2f, 0.0f};
  CHECK_FALSE(ref::cartpole_dynamics(left, 0));
}

TEST_CASE("CartPole resets a finished environment from a reproducible state in [-0.05, 0.05)", "[reference][cartpole]") {
  ref::CartPoleEnv e;
  e.state = ref::CartPole{2.39f, 1.0f, 0.0f, 0.0f};
  ref::cartpole_step(e, 7, 3, 0, 1);
  CHECK(e.done == 1);
  CHECK(e.episodes == 1);
  CHECK(e.episode_steps == 0);
  CHECK(e.reward_sum == 1.0f);
  const ref::CartPole start = ref::cartpole_initial(7, 3, 1);
  CHECK(e.state.x == start.x);
  CHECK(e.state.theta_dot == start.theta_dot);
  for (std::uint64_t env = 0; env < 1000; ++env) {
    const ref::CartPole s = ref::cartpole_initial(7, env, 0);
    for (float v : {s.x, s.x_dot, s.theta, s.theta_dot}) {
      CHECK(v >= -0.05f);
      CHECK(v < 0.05f);
    }
  }
  CHECK(ref::cartpole_initial(7, 3, 1).x != ref::cartpole_initial(7, 3, 2).x);
  CHECK(ref::cartpole_initial(7, 3, 1).x != ref::cartpole_initial(8, 3, 1).x);
}

TEST_CASE("CartPole truncates an episode after max_steps", "[reference][cartpole]") {
  ref::CartPoleEnv e;
  e.state = ref::cartpole_initial(1, 0, 0);
  e.episode_steps = 499;
  ref::cartpole_step(e, 1, 0, 500, 1);
  CHECK(e.done == 1);
  CHECK(e.episode_steps == 0);
  ref::CartPoleEnv f;
  f.episode_steps = 499;
  ref::cartpole_step(f, 1, 0, 0, 1);  // 0: no limit
  CHECK(f.done == 0);
}

TEST_CASE("A heat step leaves the boundary, diffuses a spike and reports its change", "[reference][heat2d]") {
  ref::Floats u(5 * 4, 1.0f);
  u[2 * 5 + 2] = 5.0f;
  double residual = 0;
  const ref::Floats next = ref::heat2d_step(5, 4, 0.25f, u, &residual);
  CHECK(next[2 * 5 + 2] == Approx(5.0f + 0.25f * (4.0f - 20.0f)));
  CHECK(next[1 * 5 + 2] == Approx(1.0f + 0.25f * 4.0f));
  CHECK(next[0] == 1.0f);
  // Changes: the spike -4, and its 3 interior neighbours +1 (the fourth is on the boundary).
  CHECK(residual == Approx(std::sqrt(16.0 + 3.0)));
}

TEST_CASE("Counter-based random numbers depend only on seed and index", "[reference][random]") {
  CHECK(ref::uniform(1, 5, 0.0f, 1.0f) == ref::uniform(1, 5, 0.0f, 1.0f));
  CHECK(ref::uniform(1, 5, 0.0f, 1.0f) != ref::uniform(2, 5, 0.0f, 1.0f));
  double mean = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const float u = ref::uniform(3, i, 0.0f, 1.0f);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    mean += u / 100000;
  }
  CHECK(mean == Approx(0.5).margin(0.01));
  for (std::uint64_t i = 0; i < 1000; ++i) REQUIRE(std::isfinite(ref::normal(3, i, 0.0f, 1.0f)));
}

TEST_CASE("Random numbers come in pairs from one hash: two uniforms, or both Box-Muller outputs", "[reference][random]") {
  // Elements 2k and 2k + 1 share hash(seed, k): the cosine and sine outputs of one Box-Muller
  // transform, uncorrelated standard normals.
  double mean = 0, var = 0, correlation = 0;
  const int pairs = 50000;
  for (std::uint64_t k = 0; k < pairs; ++k) {
    const double z0 = ref::normal(5, 2 * k, 0.0f, 1.0f), z1 = ref::normal(5, 2 * k + 1, 0.0f, 1.0f);
    REQUIRE(std::isfinite(z0));
    REQUIRE(std::isfinite(z1));
    mean += (z0 + z1) / (2 * pairs);
    var += (z0 * z0 + z1 * z1) / (2 * pairs);
    correlation += z0 * z1 / pairs;
    CHECK(ref::normal(5, 2 * k, 3.0f, 2.0f) == Approx(3.0 + 2.0 * z0));
  }
  CHECK(mean == Approx(0.0).margin(0.01));
  CHECK(var == Approx(1.0).margin(0.02));
  CHECK(correlation == Approx(0.0).margin(0.02));
  // The two uniforms of a pair come from different bits of the hash.
  int equal = 0;
  for (std::uint64_t k = 0; k < 1000; ++k) equal += ref::uniform(5, 2 * k, 0.0f, 1.0f) == ref::uniform(5, 2 * k + 1, 0.0f, 1.0f);
  CHECK(equal < 2);
}

TEST_CASE("Matmul reference adds the bias and applies the activation", "[reference][matmul]") {
  const ref::Floats a = {1, 2, 3, 4, 5, 6};  // 2 x 3
  const ref::Floats b = {1, 0, 0, 1, 1, -1};  // 3 x 2
  CHECK(ref::matmul(2, 2, 3, a, b, {}, 0) == std::vector<double>{4, -1, 10, -1});
  CHECK(ref::matmul(2, 2, 3, a, b, {1, 1}, 1) == std::vector<double>{5, 0, 11, 0});
}

TEST_CASE("A case is the offset in its range, and one past the last case outside it", "[reference][condition]") {
  CHECK(ref::condition_case(-2, -2, 1) == 0);
  CHECK(ref::condition_case(1, -2, 1) == 3);
  CHECK(ref::condition_case(2, -2, 1) == 4);   // a SWITCH of 4 cases runs none
  CHECK(ref::condition_case(-3, -2, 1) == 4);
  CHECK(ref::condition_case(7, 7, 7) == 0);
  CHECK(ref::condition_case(8, 7, 7) == 1);
  CHECK(ref::condition_case(0, 1, 0) == 0xFFFFFFFFu);  // empty range: no case at all
  const std::int32_t lowest = std::numeric_limits<std::int32_t>::min(), highest = std::numeric_limits<std::int32_t>::max();
  CHECK(ref::condition_case(highest, lowest, highest) == 0xFFFFFFFFu);  // 2^32 values: every one in range
  CHECK(ref::condition_case(lowest, lowest + 1, highest) == 0xFFFFFFFFu);  // 2^32 - 1 cases do not fit
  CHECK(ref::condition_case(lowest, lowest + 2, highest) == 0xFFFFFFFEu);
}

TEST_CASE("A bucket is the smallest power of two holding the count, clamped to the cases", "[reference][condition]") {
  const std::int32_t counts[] = {-5, 0, 1, 2, 3, 4, 5, 8, 9, 64, 65, 128, 129, 1000};
  const std::uint32_t buckets[] = {0, 0, 0, 1, 2, 2, 3, 3, 4, 6, 7, 7, 7, 7};  // 8 cases: 1, 2, 4, ..., 128
  for (std::size_t i = 0; i < std::size(counts); ++i) {
    INFO("count " << counts[i]);
    CHECK(ref::condition_bucket(counts[i], 8) == buckets[i]);
  }
  CHECK(ref::condition_bucket(1000, 16) == 10);
  CHECK(ref::condition_bucket(std::numeric_limits<std::int32_t>::max(), 40) == 31);
  CHECK(ref::condition_bucket(100, 1) == 0);
  CHECK(ref::condition_bucket(100, 0) == 0);
}

TEST_CASE("The random fills' two 24-bit fields, taken before the hash's last step, are the hash's", "[reference][random]") {
  namespace d = flowdsl::kernels::detail;
  std::uint64_t state = 0x243f6a8885a308d3ull;  // counters and seeds spread over 64 bits, and the edges
  std::vector<std::uint64_t> values = {0, 1, 2, 0xffffffffull, 0x100000000ull, ~0ull, ~0ull - 1, 1ull << 63};
  for (int i = 0; i < 2000; ++i) values.push_back(state = d::mix64(state + static_cast<std::uint64_t>(i)));
  for (std::size_t s = 0; s < values.size(); s += 7) {
    const std::uint64_t mixed = d::mixed_seed(values[s]);
    for (const std::uint64_t counter : values) {
      const std::uint64_t bits = d::hash_mixed(mixed, counter);
      const d::HashFields f = d::hash_fields(mixed, counter);
      REQUIRE(f.low == d::low_field(bits));
      REQUIRE(f.top_word >> 8 == static_cast<std::uint32_t>(bits >> 40));
      REQUIRE(static_cast<float>(f.top_word >> 8) * 5.9604644775390625e-8f == d::unit_float(bits));
    }
  }
}
