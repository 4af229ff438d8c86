// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file safetensors.hpp
/// \brief Reading `.safetensors` weight files (Hugging Face's format) that may be hostile:
/// the header is checked against the file's real length before anything is allocated or read.
///
/// \code
///   flowdsl::SafetensorsFile file = flowdsl::SafetensorsFile::open("model.safetensors");
///   const flowdsl::SafetensorsTensor* embed = file.find("model.embed_tokens.weight");
///   std::vector<std::byte> host(embed->bytes);
///   file.read(*embed, host.data());
/// \endcode
///
/// A file is an 8-byte little-endian header length N, N bytes of JSON (an object mapping each
/// tensor's name to {"dtype", "shape", "data_offsets"}, and an optional "__metadata__" object
/// of strings), then the data section, which the offsets are relative to.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flowdsl/error.hpp"
#include "flowdsl/scalar_type.hpp"

namespace flowdsl {

/// \brief One tensor of a safetensors file, as its header declares it.
struct SafetensorsTensor {
  std::string name;
  /// Element type. BOOL is read as u8 (one byte per element, 0 or 1).
  ScalarType type = ScalarType::u8;
  std::vector<std::uint64_t> shape;  ///< row-major; empty for a scalar
  std::uint64_t offset = 0;          ///< absolute position of the first byte in the file
  std::uint64_t bytes = 0;           ///< elements() * size_of(type)

  /// \brief The product of the dimensions (1 for a scalar). Below 2^63 for every tensor that
  /// SafetensorsFile::open returns.
  std::uint64_t elements() const noexcept {
    std::uint64_t n = 1;
    for (const std::uint64_t d : shape) n *= d;
    return n;
  }
};

/// \brief Bounds on what SafetensorsFile::open accepts, so that a hostile header cannot
/// exhaust memory or time.
struct SafetensorsLimits {
  std::uint64_t max_header_bytes = std::uint64_t{100} << 20;  ///< the JSON header's length
  std::size_t max_tensors = std::size_t{1} << 20;
  std::size_t max_dims = 8;  ///< dimensions of one tensor's shape
};

/// \brief An open safetensors file whose header has been checked: every tensor has a known
/// element type, at most max_dims dimensions, fewer than 2^63 elements, exactly the bytes its
/// shape needs, and a range inside the data section that overlaps no other tensor's. (Gaps
/// between ranges are allowed; members of an entry other than dtype, shape and data_offsets
/// are ignored, as Hugging Face's reader ignores them.)
///
/// Move-only: it owns the open file, so that every read sees the file that was checked. A
/// moved-from object may only be destroyed or assigned to. read() may be called from several
/// threads at once.
class SafetensorsFile {
 public:
  /// \brief Opens `path` and reads and checks its header (not its data).
  /// \throws JsonError with source `path`, listing every problem of the header, each at a JSON
  ///         pointer into it ("/model.norm.weight/data_offsets"; "" for the whole file): a file
  ///         that cannot be opened, is not a regular file, or is shorter than 8 bytes; a header
  ///         length beyond the file or max_header_bytes (refused before any allocation);
  ///         malformed JSON; a header that is not an object; an entry that is not an object or
  ///         lacks dtype, shape or data_offsets, or repeats one; an unknown dtype; a shape that
  ///         is not an array of non-negative integers, has more than max_dims dimensions or
  ///         2^63 elements or more; data_offsets that are not two integers [begin, end] with
  ///         begin <= end, or whose length differs from the shape's bytes, or reach beyond the
  ///         data section; two tensors whose bytes overlap; a name declared twice;
  ///         "__metadata__" that is not an object of strings; more than max_tensors tensors.
  static SafetensorsFile open(const std::string& path, const SafetensorsLimits& limits = {});

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  /// \brief Every tensor of the file, sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const noexcept;

  /// \brief The tensor named `name`, or null (a binary search).
  const SafetensorsTensor* find(std::string_view name) const noexcept;

  /// \brief The header's "__metadata__" (empty when it has none).
  const std::map<std::string, std::string, std::less<>>& metadata() const noexcept;

  /// \brief Copies the bytes of `tensor` (tensor.bytes of them) to `host_destination`.
  /// \param tensor a tensor of this file
  /// \throws UsageError when `tensor` lies outside this file (a tensor of another file).
  /// \throws JsonError at the tensor's pointer when the bytes cannot be read: an I/O error, or
  ///         a file that has shrunk since it was opened.
  void read(const SafetensorsTensor& tensor, void* host_destination) const;
  /// \brief Copies `bytes` bytes of `tensor` from byte `offset` of it: a large tensor in chunks.
  /// \throws UsageError when the range is not inside the tensor, or as read().
  void read(const SafetensorsTensor& tensor, std::uint64_t offset, std::uint64_t bytes, void* host_destination) const;

  /// \brief The path the file was opened with.
  const std::string& path() const noexcept;

  /// \brief The file's length when it was opened, in bytes.
  std::uint64_t file_bytes() const noexcept;

 private:
  struct State;
  explicit SafetensorsFile(std::unique_ptr<State> state) noexcept;

  std::unique_ptr<State> state_;
};

}  // namespace flowdsl
