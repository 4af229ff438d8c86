// SPDX-License-Identifier: Apache-2.0
// Element types: names, sizes, and the host conversions of the 16-bit floats.
#include "flowdsl/scalar_type.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "value_text.hpp"

namespace flowdsl {
namespace {

constexpr std::array<std::pair<ScalarType, std::string_view>, 12> scalar_names = {{
    {ScalarType::i8, "i8"}, {ScalarType::i16, "i16"}, {ScalarType::i32, "i32"}, {ScalarType::i64, "i64"},
    {ScalarType::u8, "u8"}, {ScalarType::u16, "u16"}, {ScalarType::u32, "u32"}, {ScalarType::u64, "u64"},
    {ScalarType::f16, "f16"}, {ScalarType::bf16, "bf16"}, {ScalarType::f32, "f32"}, {ScalarType::f64, "f64"},
}};

/// A binary floating-point format of 16 bits: `mantissa` stored fraction bits, the rest exponent.
template <int mantissa>
struct Format16 {
  static constexpr int exponent_bits = 15 - mantissa;
  static constexpr int bias = (1 << (exponent_bits - 1)) - 1;
  static constexpr std::uint32_t exponent_mask = (1u << exponent_bits) - 1;

  // One rounding from double, to nearest even (as CUDA's __double2half / __double2bfloat16).
  static std::uint16_t encode(double value) {
    const std::uint32_t sign = std::signbit(value) ? 0x8000u : 0u;
    if (std::isnan(value)) return static_cast<std::uint16_t>(sign | (exponent_mask << mantissa) | (1u << (mantissa - 1)));
    const double a = std::fabs(value);
    if (std::isinf(a)) return static_cast<std::uint16_t>(sign | (exponent_mask << mantissa));
    if (a == 0) return static_cast<std::uint16_t>(sign);
    int e = 0;
    (void)std::frexp(a, &e);
    const int unbiased = e - 1;  // a = 1.f * 2^unbiased
    const int min_normal = 1 - bias;
    std::uint64_t bits = 0;
    if (unbiased < min_normal) {  // subnormal (rounding may carry into the smallest normal)
      bits = static_cast<std::uint64_t>(std::nearbyint(std::ldexp(a, mantissa - min_normal)));
    } else {
      const auto q = static_cast<std::uint64_t>(std::nearbyint(std::ldexp(a, mantissa - unbiased)));
      bits = (static_cast<std::uint64_t>(unbiased + bias) << mantissa) + q - (std::uint64_t{1} << mantissa);
    }
    if (bits >= (std::uint64_t{exponent_mask} << mantissa)) bits = std::uint64_t{exponent_mask} << mantissa;  // overflow
    return static_cast<std::uint16_t>(sign | bits);
  }

  static double decode(std::uint16_t bits) {
    const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
    const std::uint32_t exponent = (bits >> mantissa) & exponent_mask;
    const std::uint32_t fraction = bits & ((1u << mantissa) - 1);
    if (exponent == exponent_mask) return fraction ? std::nan("") : sign * HUGE_VAL;
    if (exponent == 0) return sign * std::ldexp(static_cast<double>(fraction), 1 - bias - mantissa);
    return sign * std::ldexp(static_cast<double>(fraction | (1u << mantissa)), static_cast<int>(exponent) - bias - mantissa);
  }
};

using Binary16 = Format16<10>;
using BFloat16 = Format16<7>;

}  // namespace

half half::from_double(double value) noexcept { return half{Binary16::encode(value)}; }
double half::to_double() const noexcept { return Binary16::decode(bits); }
bfloat16 bfloat16::from_double(double value) noexcept { return bfloat16{BFloat16::encode(value)}; }
double bfloat16::to_double() const noexcept { return BFloat16::decode(bits); }

std::string_view to_string(ScalarType type) noexcept {
  for (const auto& [t, name] : scalar_names) {
    if (t == type) return name;
  }
  return "?";
}

bool parse_scalar_type(std::string_view text, ScalarType& out) noexcept {
  for (const auto& [t, name] : scalar_names) {
    if (name == text) {
      out = t;
      return true;
    }
  }
  return false;
}

std::size_t size_of(ScalarType type) noexcept {
  return visit_scalar(type, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

}  // namespace flowdsl

namespace flowdsl::detail {

std::string hex_bytes(const void* bytes, std::size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out = "0x";
  for (std::size_t i = size; i-- > 0;) {  // little-endian: most significant byte first
    const auto b = static_cast<const unsigned char*>(bytes)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string scalar_text(ScalarType type, const void* bytes) {
  return visit_scalar(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, bytes, sizeof value);
    char text[40];
    std::snprintf(text, sizeof text, "%.9g", to_double(value));
    return std::string(text);
  });
}

}  // namespace flowdsl::detail
