// SPDX-License-Identifier: Apache-2.0
// Argument values as text, shared by the DOT writer, the profiler's tables and debug mode's
// messages (internal to the library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "flowdsl/scalar_type.hpp"

namespace flowdsl::detail {

/// The `size` little-endian bytes at `bytes` as one hexadecimal number, most significant byte
/// first, every byte written: "0x000000000001a2c0".
std::string hex_bytes(const void* bytes, std::size_t size);

/// `value` in hexadecimal, "0x1a2c0": addresses and byte offsets in messages and dumps.
std::string hex(std::uint64_t value);

/// The scalar of type `type` at `bytes` as "%.9g" prints its value as a double.
std::string scalar_text(ScalarType type, const void* bytes);

}  // namespace flowdsl::detail
