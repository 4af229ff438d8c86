// NumPy .npy files, format 1.0, little-endian, one-dimensional: what `flowdsl run` reads
// (buffer initialisation) and writes (output buffers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flowdsl/registry.hpp"

namespace flowdsl::cli {

/// \brief The .npy dtype of a scalar type ("<f4", ...). bf16 has none: it is written as "<u2"
/// holding the raw bits.
std::string npy_descr(ScalarType type);

/// \brief Writes `count` elements of `type` from `data` to `path`.
/// \throws std::runtime_error when the file cannot be written.
void write_npy(const std::string& path, ScalarType type, std::uint64_t count, const void* data);

/// \brief Reads `path`, which must hold exactly `count` elements of `type` (a 1-D array, or
/// any C-order shape of that many elements).
/// \throws std::runtime_error saying what differs, or that the file is not a .npy file.
std::vector<unsigned char> read_npy(const std::string& path, ScalarType type, std::uint64_t count);

}  // namespace flowdsl::cli
