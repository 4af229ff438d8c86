// SPDX-License-Identifier: Apache-2.0
// Counter-based random numbers shared by the device kernels and the host references: a value
// is a pure function of (seed, counter), so any grid and the host agree bit for bit on the
// integer part. splitmix64's finaliser over a seed-and-counter mix.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace flowdsl::kernels::detail {

/// splitmix64's finaliser but its last step (z ^ (z >> 31)), which hash_fields takes apart.
FLOWDSL_HD std::uint64_t mix64_unfinished(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  return (z ^ (z >> 27)) * 0x94d049bb133111ebull;
}

FLOWDSL_HD std::uint64_t mix64(std::uint64_t z) {
  z = mix64_unfinished(z);
  return z ^ (z >> 31);
}

/// The seed's half of hash(): a kernel that draws many counters mixes its seed once.
FLOWDSL_HD std::uint64_t mixed_seed(std::uint64_t seed) { return mix64(seed + 0x9e3779b97f4a7c15ull); }

/// hash(seed, counter) from mixed_seed(seed).
FLOWDSL_HD std::uint64_t hash_mixed(std::uint64_t mixed, std::uint64_t counter) {
  return mix64(mixed ^ (counter * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));  // spread_counter, below
}

/// The two 24-bit fields the random fills use of hash_mixed(mixed, counter), bits 16..39 (`low`)
/// and 40..63 (`top`, here as the 32-bit word whose top 24 bits they are), equal to those of
/// low_field and unit_float, taken from the finaliser's last value without its last 64-bit
/// step: 3 instructions fewer a pair on the GPU.
struct HashFields {
  std::uint32_t low;       ///< low_field(hash)
  std::uint32_t top_word;  ///< (hash >> 32): its top 24 bits are unit_float's
};

/// The counter as hash_mixed spreads it before mixing in the seed: linear in the counter, so
/// a kernel walking counters at a fixed step adds spread_step times that step instead.
constexpr std::uint64_t spread_step = 0x9e3779b97f4a7c15ull;
FLOWDSL_HD std::uint64_t spread_counter(std::uint64_t counter) { return counter * spread_step + 0x632be59bd9b4e019ull; }

/// hash_fields(mixed, counter) from spread_counter(counter).
FLOWDSL_HD HashFields hash_fields_spread(std::uint64_t mixed, std::uint64_t spread) {
  const std::uint64_t z = mix64_unfinished(mixed ^ spread);
  const auto top = static_cast<std::uint32_t>(z >> 32);
  // hash = z ^ (z >> 31): its bits 40..63 are z's (z >> 31 has none there); bits 16..39 are z's
  // xor z's bits 47..70, i.e. top >> 15.
  return {(static_cast<std::uint32_t>(z >> 16) ^ (top >> 15)) & 0xffffffu, top};
}

FLOWDSL_HD HashFields hash_fields(std::uint64_t mixed, std::uint64_t counter) {
  return hash_fields_spread(mixed, spread_counter(counter));
}

/// 64 random bits for (seed, counter).
FLOWDSL_HD std::uint64_t hash(std::uint64_t seed, std::uint64_t counter) { return hash_mixed(mixed_seed(seed), counter); }

/// The top 24 bits as a float in [0, 1) (exact: every value is a multiple of 2^-24).
FLOWDSL_HD float unit_float(std::uint64_t bits) {
  return static_cast<float>(static_cast<std::uint32_t>(bits >> 40)) * 5.9604644775390625e-8f;
}

/// Bits 16..39 as an integer in [0, 2^24).
FLOWDSL_HD std::uint32_t low_field(std::uint64_t bits) { return static_cast<std::uint32_t>(bits >> 16) & 0xffffffu; }

/// Bits 16..39 as a float in [0, 1) (exact), independent of unit_float's bits.
FLOWDSL_HD float low_unit_float(std::uint64_t bits) { return static_cast<float>(low_field(bits)) * 5.9604644775390625e-8f; }

/// Bits 16..39 as a float in (0, 1] (never 0, so that log() is finite).
FLOWDSL_HD float open_unit_float(std::uint64_t bits) { return static_cast<float>(low_field(bits) + 1u) * 5.9604644775390625e-8f; }

}  // namespace flowdsl::kernels::detail
