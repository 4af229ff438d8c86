// SPDX-License-Identifier: Apache-2.0
// Sampling on the host: Philox4x32-10 against Random123's known answers, the draw's counter
// layout, and reference::sample_top_p's rules (greedy, top-k and top-p with their ties, NaN and
// -inf) and frequencies, which the gpu test then holds the kernel to.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.hpp"
#include "philox.hpp"
#include "reference.hpp"
#include "sampling/draw.hpp"

namespace ref = flowdsl::kernels::reference;
namespace detail = flowdsl::kernels::detail;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

/// The tokens of one row drawn at steps 0 .. draws - 1, counted by index.
std::vector<int> counts(const ref::Floats& logits, float temperature, int top_k, float top_p, int draws) {
  const int cols = static_cast<int>(logits.size());
  std::vector<int> n(logits.size(), 0);
  for (int step = 0; step < draws; ++step) {
    const std::int32_t token = ref::sample_top_p(1, cols, temperature, top_k, top_p, 42, step, logits)[0];
    REQUIRE(token >= 0);
    REQUIRE(token < cols);
    ++n[static_cast<std::size_t>(token)];
  }
  return n;
}

/// Checks that the tokens' frequencies over `draws` steps are within 5 standard deviations of
/// `want` (unnormalised; a token of weight 0 is never drawn).
void check_frequencies(const ref::Floats& logits, float temperature, int top_k, float top_p, std::vector<double> want,
                       int draws = 20000) {
  double total = 0;
  for (const double w : want) total += w;
  const std::vector<int> n = counts(logits, temperature, top_k, top_p, draws);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double p = want[i] / total, sigma = std::sqrt(p * (1 - p) / draws);
    INFO("token " << i << ": drawn " << n[i] << " times in " << draws << ", probability " << p);
    if (p == 0) {
      CHECK(n[i] == 0);
    } else {
      CHECK(std::fabs(double(n[i]) / draws - p) <= 5 * sigma);
    }
  }
}

/// Logits whose softmax is `probabilities`.
ref::Floats log_of(const std::vector<double>& probabilities) {
  ref::Floats x;
  for (const double p : probabilities) x.push_back(static_cast<float>(std::log(p)));
  return x;
}

}  // namespace

TEST_CASE("Philox4x32-10 gives Random123's known answers", "[reference][sampling][philox]") {
  // Random123's kat_vectors for philox4x32_10: counter, key, output.
  struct Known {
    detail::Philox4 counter;
    detail::Philox2 key;
    detail::Philox4 output;
  };
  const Known known[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {{0xffffffff, 0xffffffff}},
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {{0xa4093822, 0x299f31d0}},
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Known& k : known) {
    const detail::Philox4 got = detail::philox4x32_10(k.counter, k.key);
    for (int w = 0; w < 4; ++w) {
      INFO("counter word 0 " << k.counter.x[0] << ", output word " << w);
      CHECK(got.x[w] == k.output.x[w]);
    }
  }
}

TEST_CASE("A row's draw is Philox's first word's top 24 bits at counter (step, row, 0, 0)",
          "[reference][sampling][philox]") {
  const std::uint64_t seed = 0x0123456789abcdefull;
  CHECK(detail::philox_key(seed).x[0] == 0x89abcdefu);  // the low half first
  CHECK(detail::philox_key(seed).x[1] == 0x01234567u);
  for (const auto& [step, row] : {std::pair{0, 0}, std::pair{7, 3}, std::pair{-1, 100000}}) {
    const detail::Philox4 counter{{static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(row), 0, 0}};
    CHECK(detail::sampling_draw(seed, step, row) == detail::philox4x32_10(counter, detail::philox_key(seed)).x[0] >> 8);
  }
  CHECK(detail::sampling_draw(seed, 1, 0) != detail::sampling_draw(seed, 0, 1));
}

TEST_CASE("Greedy sampling takes the first index of the max; NaN is never taken; a row of -inf gets -1",
          "[reference][sampling]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ref::Floats x = {1,    3,   3,    -1,  //
                         nan,  2,   nan,  2,   //
                         -inf, nan, -inf, -inf};
  for (const float temperature : {0.0f, -1.0f, nan}) {
    CHECK(ref::sample_top_p(3, 4, temperature, 0, 1.0f, 7, 0, x) == std::vector<std::int32_t>{1, 1, -1});
  }
  CHECK(ref::sample_top_p(3, 4, 0.0f, 0, 1.0f, 7, 0, x)[0] == ref::row_argmax(1, 4, x)[0]);
  for (int step = 0; step < 200; ++step) {
    const std::vector<std::int32_t> drawn = ref::sample_top_p(3, 4, 1.0f, 0, 1.0f, 7, step, x);
    CHECK((drawn[1] == 1 || drawn[1] == 3));  // NaN counts as -inf
    CHECK(drawn[2] == -1);
  }
}

TEST_CASE("top_k = 1 and a tiny top_p keep only the largest logit", "[reference][sampling]") {
  const ref::Floats x = {0.5f, -2, 4, 3.9f, 1, 4, 0};  // the max twice
  for (int step = 0; step < 200; ++step) {
    for (const auto& [top_k, top_p] :
         {std::pair{1, 1.0f}, std::pair{0, 1e-6f}, std::pair{0, 0.0f}, std::pair{3, -1.0f}}) {
      const std::int32_t token = ref::sample_top_p(1, 7, 2.0f, top_k, top_p, 9, step, x)[0];
      CHECK((token == 2 || token == 5));
    }
  }
  const ref::Floats distinct = {0.5f, -2, 4, 3.9f, 1, 0};
  CHECK(ref::sample_top_p(1, 6, 1.0f, 1, 1.0f, 9, 3, distinct) == ref::row_argmax(1, 6, distinct));
}

TEST_CASE("Sampling draws each token with its probability", "[reference][sampling]") {
  // Probabilities with a tie at 0.1, so that the thresholds below fall on it.
  const std::vector<double> p = {0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02};
  const ref::Floats x = log_of(p);
  check_frequencies(x, 1.0f, 0, 1.0f, p);
  std::vector<double> sharpened;
  for (const double v : p) sharpened.push_back(v * v);
  check_frequencies(x, 0.5f, 0, 1.0f, sharpened);  // temperature 1/2 squares the probabilities
  check_frequencies(x, 1.0f, 8, 1.0f, p);          // top_k = cols: no limit
}

TEST_CASE("top_k keeps every logit equal to the k-th largest", "[reference][sampling]") {
  const std::vector<double> p = {0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02};
  const ref::Floats x = log_of(p);
  check_frequencies(x, 1.0f, 4, 1.0f, {0.3, 0.2, 0.15, 0.1, 0.1, 0, 0, 0});  // the 4th largest is tied: 5 kept
  check_frequencies(x, 1.0f, 3, 1.0f, {0.3, 0.2, 0.15, 0, 0, 0, 0, 0});
}

TEST_CASE("top_p keeps the smallest set of largest probabilities holding top_p, ties included",
          "[reference][sampling]") {
  const std::vector<double> p = {0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02};
  const ref::Floats x = log_of(p);
  check_frequencies(x, 1.0f, 0, 0.6f, {0.3, 0.2, 0.15, 0, 0, 0, 0, 0});      // 0.65 >= 0.6
  check_frequencies(x, 1.0f, 0, 0.7f, {0.3, 0.2, 0.15, 0.1, 0.1, 0, 0, 0});  // 0.75 >= 0.7, and the tie
  check_frequencies(x, 1.0f, 0, 0.29f, {0.3, 0, 0, 0, 0, 0, 0, 0});
  // top_p of the top_k mass: 0.5 of 0.85 is reached at 0.3 + 0.2.
  check_frequencies(x, 1.0f, 5, 0.5f, {0.3, 0.2, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("The same seed and step draw the same tokens; another step or seed, others", "[reference][sampling]") {
  const int rows = 64, cols = 1000;
  ref::Floats x(static_cast<std::size_t>(rows) * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(double(i) * 12.9898) * 4.0);
  const std::vector<std::int32_t> a = ref::sample_top_p(rows, cols, 1.0f, 50, 0.9f, 5, 3, x);
  CHECK(ref::sample_top_p(rows, cols, 1.0f, 50, 0.9f, 5, 3, x) == a);
  int same_step = 0, same_seed = 0;
  const std::vector<std::int32_t> b = ref::sample_top_p(rows, cols, 1.0f, 50, 0.9f, 5, 4, x);
  const std::vector<std::int32_t> c = ref::sample_top_p(rows, cols, 1.0f, 50, 0.9f, 6, 3, x);
  for (int r = 0; r < rows; ++r) {
    same_step += a[r] == b[r];
    same_seed += a[r] == c[r];
  }
  CHECK(same_step < rows / 4);
  CHECK(same_seed < rows / 4);
}
