// SPDX-License-Identifier: Apache-2.0
// .npy reader and writer (format 1.0 written; 1.0 to 3.0 read), bounded by the expected size.
#include "npy.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <type_traits>

namespace flowdsl::cli {
namespace {

constexpr char magic[] = "\x93NUMPY";
constexpr std::size_t max_header = 1 << 16;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

// The text of `key`'s value in a .npy header dict, e.g. "'<f4'" or "(16,)".
std::string dict_value(const std::string& header, const std::string& key) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return {};
  std::size_t begin = header.find(':', at);
  if (begin == std::string::npos) return {};
  ++begin;
  while (begin < header.size() && header[begin] == ' ') ++begin;
  const char close = header[begin] == '(' ? ')' : ',';
  const std::size_t end = header.find(close, begin + 1);
  if (end == std::string::npos) return {};
  return header.substr(begin, end - begin + (close == ')' ? 1 : 0));
}

}  // namespace

std::string npy_descr(ScalarType type) {
  return visit_scalar(type, [](auto tag) -> std::string {
    using T = typename decltype(tag)::type;
    // NumPy has no bfloat16: its bits travel as uint16.
    const char kind = std::is_same_v<T, bfloat16>                           ? 'u'
                      : std::is_floating_point_v<T> || std::is_same_v<T, half> ? 'f'
                      : std::is_signed_v<T>                                  ? 'i'
                                                                             : 'u';
    return std::string(sizeof(T) == 1 ? "|" : "<") + kind + std::to_string(sizeof(T));
  });
}

NpyWriter::NpyWriter(const std::string& path, ScalarType type, std::uint64_t count)
    : path_(path), out_(path, std::ios::binary) {
  std::string header = "{'descr': '" + npy_descr(type) + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(count) + ",), }";
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  if (!out_) fail(path, "cannot open for writing");
  const auto length = static_cast<std::uint16_t>(header.size());
  out_.write(magic, 6);
  out_.put(1).put(0);
  out_.put(static_cast<char>(length & 0xff)).put(static_cast<char>(length >> 8));
  out_ << header;
  if (!out_) fail(path, "write failed");
}

void NpyWriter::write(const void* data, std::size_t bytes) {
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out_) fail(path_, "write failed");
}

void write_npy(const std::string& path, ScalarType type, std::uint64_t count, const void* data) {
  NpyWriter(path, type, count).write(data, count * size_of(type));
}

namespace {

// `path`, when it names a regular file: a device (/dev/zero) or a pipe (/dev/stdin) has no end to
// check the data against, and opening a pipe waits for a writer.
const std::string& regular_file(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) fail(path, "cannot open the file");
  if (std::filesystem::is_directory(status)) fail(path, "a directory, not a regular file");
  if (!std::filesystem::is_regular_file(status)) fail(path, "not a regular file (a device, a pipe or a socket)");
  return path;
}

}  // namespace

NpyReader::NpyReader(const std::string& path, ScalarType type, std::uint64_t count)
    : path_(regular_file(path)), in_(path, std::ios::binary) {
  std::ifstream& in = in_;
  if (!in) fail(path, "cannot open the file");
  char prefix[8] = {};
  in.read(prefix, 8);
  if (!in || std::string(prefix, 6) != std::string(magic, 6)) fail(path, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(prefix[6]);
  std::size_t length = 0;
  unsigned char len_bytes[4] = {};
  const int len_size = major == 1 ? 2 : 4;
  if (major < 1 || major > 3) fail(path, "unsupported .npy version " + std::to_string(major));
  in.read(reinterpret_cast<char*>(len_bytes), len_size);
  for (int i = len_size - 1; i >= 0; --i) length = length * 256 + len_bytes[i];
  if (!in || length > max_header) fail(path, "header missing or longer than 64 KiB");
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  if (!in) fail(path, "truncated header");
  const std::string descr = dict_value(header, "descr");
  if (descr != "'" + npy_descr(type) + "'") {
    fail(path, "dtype " + descr + " does not match the buffer's " + std::string(to_string(type)) + " ('" + npy_descr(type) + "')");
  }
  if (dict_value(header, "fortran_order").rfind("False", 0) != 0) fail(path, "Fortran order is not supported");
  const std::string shape = dict_value(header, "shape");
  std::uint64_t elements = 1;
  std::size_t i = 1;
  bool any = false;
  while (i < shape.size()) {
    if (shape[i] >= '0' && shape[i] <= '9') {
      std::uint64_t dim = 0;
      while (i < shape.size() && shape[i] >= '0' && shape[i] <= '9') {
        if (dim > (std::uint64_t{1} << 50)) fail(path, "shape too large");
        dim = dim * 10 + static_cast<std::uint64_t>(shape[i++] - '0');
      }
      if (dim != 0 && elements > (std::uint64_t{1} << 50) / dim) fail(path, "shape too large");
      elements *= dim;
      any = true;
    } else {
      ++i;
    }
  }
  if (shape.empty() || !any) fail(path, "missing or empty shape");
  if (elements != count) {
    fail(path, "holds " + std::to_string(elements) + " elements, the buffer " + std::to_string(count));
  }
  // A file shorter than its header says fails now, before any data is read.
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const auto data_bytes = static_cast<std::uint64_t>(in.tellg() - data_start);
  in.seekg(data_start);
  if (!in || data_bytes < count * size_of(type)) {
    fail(path, "truncated data: " + std::to_string(data_bytes) + " bytes for " + std::to_string(count * size_of(type)));
  }
}

void NpyReader::read(void* out, std::size_t bytes) {
  in_.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes));
  if (!in_) fail(path_, "truncated data");
}

std::vector<unsigned char> read_npy(const std::string& path, ScalarType type, std::uint64_t count) {
  NpyReader reader(path, type, count);
  std::vector<unsigned char> data(count * size_of(type));
  reader.read(data.data(), data.size());
  return data;
}

}  // namespace flowdsl::cli
