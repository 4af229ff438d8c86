// SPDX-License-Identifier: Apache-2.0
// The argmax key: a row's largest value and its index in one unsigned 64-bit integer, ordered so
// that the largest key holds the largest value at its first index. The largest of several keys
// (a max all-reduce over ranks, each holding some columns of the row) is the argmax of them all.
// Shared by the kernels and their host references.
#pragma once

#include <cstdint>
#include <cstring>

#include "../host_device.hpp"

namespace flowdsl::kernels::detail {

/// High 32 bits: the float's bits, turned so that they order as unsigned integers order
/// (negatives flipped whole, positives with the sign bit set); low 32 bits: the complement of
/// the index, so that of two equal values the first index wins. Indices from 0 to 2^31 - 2.
FLOWDSL_HD std::uint64_t argmax_key(float value, std::int64_t index) {
  if (value == 0.0f) value = 0.0f;  // -0 equals +0, as the argmax compares them
  std::uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(value);
#else
  std::memcpy(&bits, &value, sizeof bits);
#endif
  const std::uint32_t ordered = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return (std::uint64_t{ordered} << 32) | static_cast<std::uint32_t>(~static_cast<std::uint32_t>(index));
}

/// The index a key holds: -1 for the key 0 (an empty row).
FLOWDSL_HD std::int32_t argmax_key_index(std::uint64_t key) {
  return static_cast<std::int32_t>(~static_cast<std::uint32_t>(key));
}

}  // namespace flowdsl::kernels::detail
