// SPDX-License-Identifier: Apache-2.0
// NumPy .npy files, format 1.0, little-endian, one-dimensional: what `flowdsl run` reads
// (buffer initialisation) and writes (output buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "flowdsl/registry.hpp"

namespace flowdsl::cli {

/// \brief The .npy dtype of a scalar type ("<f4", ...). bf16 has none: it is written as "<u2"
/// holding the raw bits.
std::string npy_descr(ScalarType type);

/// \brief A .npy file being written: the header when it is made, then the data in pieces.
class NpyWriter {
 public:
  /// \throws std::runtime_error when the file cannot be written.
  NpyWriter(const std::string& path, ScalarType type, std::uint64_t count);
  /// \brief Appends `bytes` bytes of data. \throws std::runtime_error when the write fails.
  void write(const void* data, std::size_t bytes);

 private:
  std::string path_;
  std::ofstream out_;
};

/// \brief Writes `count` elements of `type` from `data` to `path`.
/// \throws std::runtime_error when the file cannot be written.
void write_npy(const std::string& path, ScalarType type, std::uint64_t count, const void* data);

/// \brief A .npy file opened for reading: the header is read and checked against the expected
/// element type and count when it is made, before any data; the data is then read in pieces.
class NpyReader {
 public:
  /// \brief Opens `path` and checks that it holds exactly `count` elements of `type` (a 1-D
  /// array, or any C-order shape of that many elements) and at least that many data bytes.
  /// \throws std::runtime_error saying what differs, or that the file is not a .npy file.
  NpyReader(const std::string& path, ScalarType type, std::uint64_t count);
  /// \brief Reads the next `bytes` bytes of data into `out`.
  /// \throws std::runtime_error when the file ends first.
  void read(void* out, std::size_t bytes);

 private:
  std::string path_;
  std::ifstream in_;
};

/// \brief Reads `path`, which must hold exactly `count` elements of `type` (a 1-D array, or
/// any C-order shape of that many elements).
/// \throws std::runtime_error saying what differs, or that the file is not a .npy file.
std::vector<unsigned char> read_npy(const std::string& path, ScalarType type, std::uint64_t count);

}  // namespace flowdsl::cli
