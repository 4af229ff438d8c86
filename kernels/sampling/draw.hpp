// SPDX-License-Identifier: Apache-2.0
// The uniform number sample_top_p draws for a row, shared by the kernel and the host reference:
// Philox4x32-10 keyed by the seed, counted by (step, row), so that a step and a seed give the
// same tokens on any grid and on the host.
#pragma once

#include <cstdint>

#include "../philox.hpp"

namespace flowdsl::kernels::detail {

/// The draw of row `row` at step `step` under `seed`, an integer in [0, 2^24) (u = draw / 2^24
/// in [0, 1)): the top 24 bits of the first output word of Philox4x32-10 with key (seed's low
/// 32 bits, seed's high 32 bits) and counter (step, row, 0, 0), both as unsigned 32-bit words.
FLOWDSL_HD std::uint32_t sampling_draw(std::uint64_t seed, std::int32_t step, std::int32_t row) {
  const Philox4 counter{{static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(row), 0u, 0u}};
  return philox4x32_10(counter, philox_key(seed)).x[0] >> 8;
}

}  // namespace flowdsl::kernels::detail
