// SPDX-License-Identifier: Apache-2.0
// Element types: the one dispatch over them, and the host 16-bit floats against CUDA's own
// conversions on random inputs of every magnitude.
#include <cmath>
#include <cstring>
#include <random>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "catch.hpp"
#include "flowdsl/scalar_type.hpp"

namespace {

template <class T>
std::uint16_t bits_of(T value) {
  std::uint16_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Doubles from 2^-30 to 2^140 in magnitude, both signs, and the edge cases.
std::vector<double> samples() {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> exponent(-30.0, 140.0), unit(0.5, 1.0);
  std::vector<double> out = {0.0, -0.0, 65504.0, 65519.99, 65520.0, 1e-8, 5.96e-8, 2.98e-8, 1.0 + 1.0 / 2048, 3.4e38};
  for (int i = 0; i < 20000; ++i) {
    const double v = std::ldexp(unit(rng), static_cast<int>(exponent(rng)));
    out.push_back(i % 2 ? -v : v);
  }
  return out;
}

}  // namespace

TEST_CASE("visit_scalar hands each element type its host type", "[scalar_type]") {
  CHECK(flowdsl::size_of(flowdsl::ScalarType::bf16) == 2);
  CHECK(flowdsl::size_of(flowdsl::ScalarType::u64) == 8);
  const bool is_half = flowdsl::visit_scalar(flowdsl::ScalarType::f16, [](auto tag) {
    return std::is_same_v<typename decltype(tag)::type, flowdsl::half>;
  });
  CHECK(is_half);
  flowdsl::ScalarType parsed{};
  REQUIRE(flowdsl::parse_scalar_type("i16", parsed));
  CHECK(parsed == flowdsl::ScalarType::i16);
  CHECK_FALSE(flowdsl::parse_scalar_type("f8", parsed));
}

TEST_CASE("Host half and bfloat16 round as CUDA's conversions do", "[scalar_type][half]") {
  for (const double d : samples()) {
    INFO("value " << d);
    const flowdsl::half h = flowdsl::half::from_double(d);
    REQUIRE(h.bits == bits_of(__double2half(d)));
    const flowdsl::bfloat16 b = flowdsl::bfloat16::from_double(d);
    REQUIRE(b.bits == bits_of(__double2bfloat16(d)));
    REQUIRE(h.to_double() == static_cast<double>(__half2float(__double2half(d))));
    REQUIRE(b.to_double() == static_cast<double>(__bfloat162float(__double2bfloat16(d))));
  }
  CHECK(std::isnan(flowdsl::half::from_double(std::nan("")).to_double()));
  CHECK(std::isinf(flowdsl::bfloat16::from_double(-1e39).to_double()));
}
