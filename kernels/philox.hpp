// SPDX-License-Identifier: Apache-2.0
// Philox4x32-10, the counter-based generator of Random123 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011) that cuRAND, PyTorch and JAX also use: four 32-bit
// output words, a pure function of a 128-bit counter and a 64-bit key, shared by the device
// kernels and the host references so that both draw the same bits. Checked against Random123's
// known-answer vectors (tests/cpu/test_sampling_reference.cpp).
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace flowdsl::kernels::detail {

/// Four 32-bit words: a counter, or the output for one.
struct Philox4 {
  std::uint32_t x[4];
};
/// The two 32-bit words of a key.
struct Philox2 {
  std::uint32_t x[2];
};

/// Random123's constants: the round multipliers and the Weyl increments of the key schedule.
constexpr std::uint32_t philox_m0 = 0xD2511F53u, philox_m1 = 0xCD9E8D57u;
constexpr std::uint32_t philox_w0 = 0x9E3779B9u, philox_w1 = 0xBB67AE85u;

/// One round: two 32 x 32 -> 64-bit products, their halves permuted and mixed with the key.
FLOWDSL_HD Philox4 philox_round(Philox4 c, Philox2 k) {
  const std::uint64_t p0 = std::uint64_t{philox_m0} * c.x[0], p1 = std::uint64_t{philox_m1} * c.x[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  return {{hi1 ^ c.x[1] ^ k.x[0], lo1, hi0 ^ c.x[3] ^ k.x[1], lo0}};
}

/// Philox4x32-10 of `counter` under `key`: ten rounds, the key bumped by the Weyl increments
/// between rounds (Random123's philox4x32_10).
FLOWDSL_HD Philox4 philox4x32_10(Philox4 counter, Philox2 key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key = {{key.x[0] + philox_w0, key.x[1] + philox_w1}};
    counter = philox_round(counter, key);
  }
  return counter;
}

/// The key of a 64-bit seed: its low 32 bits, then its high 32 bits.
FLOWDSL_HD Philox2 philox_key(std::uint64_t seed) {
  return {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
}

}  // namespace flowdsl::kernels::detail
