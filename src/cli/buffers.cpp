// SPDX-License-Identifier: Apache-2.0
// Host-side initial contents of buffers, chunk by chunk, and the device memory check.
#include "buffers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <type_traits>

#include "flowdsl/safetensors.hpp"
#include "npy.hpp"

namespace flowdsl::cli {
namespace {

// One element of type `type` from a double: integers rounded down and clamped to their range,
// floats rounded to nearest.
void store(ScalarType type, double v, unsigned char* out) {
  visit_scalar(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value{};
    if constexpr (std::is_integral_v<T>) {
      using limits = std::numeric_limits<T>;
      value = static_cast<T>(std::fmin(std::fmax(std::floor(v), static_cast<double>(limits::min())),
                                       static_cast<double>(limits::max())));
    } else if constexpr (is_16bit_float<T>) {
      value = T::from_double(v);
    } else {
      value = static_cast<T>(v);
    }
    std::memcpy(out, &value, sizeof(T));
  });
}

// Elements per chunk: `chunk_bytes` rounded down to whole elements, at least one.
std::uint64_t chunk_elements(const BufferSpec& b, std::size_t chunk_bytes) {
  return std::max<std::uint64_t>(1, chunk_bytes / size_of(b.type));
}

// Calls `fill(data, first, count)` for each chunk, then hands the chunk to `sink`.
template <class Fill>
void chunked(const BufferSpec& b, std::size_t chunk_bytes, const ChunkSink& sink, Fill fill) {
  const std::size_t size = size_of(b.type);
  const std::uint64_t per_chunk = std::min(chunk_elements(b, chunk_bytes), b.count);
  std::vector<unsigned char> staging(per_chunk * size);
  for (std::uint64_t first = 0; first < b.count; first += per_chunk) {
    const std::uint64_t n = std::min(per_chunk, b.count - first);
    fill(staging.data(), n);
    sink(staging.data(), n * size, first * size);
  }
}

template <class Next>
void generate(const BufferSpec& b, std::size_t chunk_bytes, const ChunkSink& sink, Next next) {
  const std::size_t size = size_of(b.type);
  chunked(b, chunk_bytes, sink, [&](unsigned char* data, std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) store(b.type, next(), data + i * size);
  });
}

std::string npy_path(const BufferSpec& b, const std::string& base_dir) {
  const std::string& f = b.init.file;
  return f.empty() || f.front() == '/' || base_dir.empty() ? f : base_dir + "/" + f;
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  const double tenths = std::round(value * 10) / 10;
  std::snprintf(text, sizeof text, tenths == std::floor(tenths) ? "%.0f %s" : "%.1f %s", tenths, units[unit]);
  return text;
}

std::optional<std::string> memory_refusal(const GraphSpec& spec, std::uint64_t free_bytes, int device) {
  constexpr std::uint64_t most = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t need = 0;  // saturates instead of wrapping around
  for (const BufferSpec& b : spec.buffers) {
    const std::size_t size = size_of(b.type);
    const std::uint64_t bytes = b.count > most / size ? most : b.count * size;
    need = bytes > most - need ? most : need + bytes;
  }
  if (need <= free_bytes) return std::nullopt;
  return "the buffers need " + format_bytes(need) + " but device " + std::to_string(device) + " has " +
         format_bytes(free_bytes) + " free";
}

namespace {

// The tensors a buffer takes its contents from, one after another, checked against the buffer:
// their element type and, together, its element count.
struct SafetensorsSource {
  SafetensorsFile file;
  std::vector<const SafetensorsTensor*> tensors;
};
SafetensorsSource safetensors_source(const BufferSpec& b, const std::string& base_dir) {
  SafetensorsFile file = SafetensorsFile::open(npy_path(b, base_dir));
  std::vector<const SafetensorsTensor*> tensors;
  std::uint64_t elements = 0;
  for (const std::string& name : b.init.tensors) {
    const SafetensorsTensor* t = file.find(name);
    const std::string where = "the tensor " + quoted_name(name) + " of " + quoted_name(file.path());
    if (t == nullptr) throw std::runtime_error(where + " is not in the file");
    if (t->type != b.type) {
      throw std::runtime_error(where + " holds " + std::string(to_string(t->type)) + " elements, the buffer " +
                               std::string(to_string(b.type)));
    }
    // Each count is below 2^63 (the reader checks), so the sum cannot wrap before it passes count.
    elements += t->elements();
    if (elements > b.count) break;
    tensors.push_back(t);
  }
  if (elements != b.count) {
    const std::string what = b.init.tensors.size() == 1 ? "the tensor " + quoted_name(b.init.tensors[0]) + " of " +
                                                              quoted_name(file.path()) + " holds "
                                                        : "the tensors hold ";
    throw std::runtime_error(what + (elements > b.count ? "more than " + std::to_string(b.count)
                                                        : std::to_string(elements)) +
                             " elements, the buffer " + std::to_string(b.count));
  }
  return {std::move(file), std::move(tensors)};
}

}  // namespace

void check_initial_contents(const BufferSpec& b, const std::string& base_dir) {
  if (b.init.kind == BufferInit::Kind::npy) NpyReader(npy_path(b, base_dir), b.type, b.count);
  if (b.init.kind == BufferInit::Kind::safetensors) (void)safetensors_source(b, base_dir);
}

void produce_initial_contents(const BufferSpec& b, const std::string& base_dir, std::size_t chunk_bytes,
                              const ChunkSink& sink) {
  switch (b.init.kind) {
    case BufferInit::Kind::zeros:
      return chunked(b, chunk_bytes, sink,
                     [&](unsigned char* data, std::uint64_t n) { std::memset(data, 0, n * size_of(b.type)); });
    case BufferInit::Kind::constant:
      return generate(b, chunk_bytes, sink, [&] { return b.init.value; });
    case BufferInit::Kind::uniform: {
      std::mt19937_64 rng(b.init.seed);
      std::uniform_real_distribution<double> dist(b.init.low, b.init.high);
      return generate(b, chunk_bytes, sink, [&] { return dist(rng); });
    }
    case BufferInit::Kind::normal: {
      std::mt19937_64 rng(b.init.seed);
      std::normal_distribution<double> dist(b.init.mean, b.init.stddev);
      return generate(b, chunk_bytes, sink, [&] { return dist(rng); });
    }
    case BufferInit::Kind::npy: {
      NpyReader reader(npy_path(b, base_dir), b.type, b.count);
      return chunked(b, chunk_bytes, sink,
                     [&](unsigned char* data, std::uint64_t n) { reader.read(data, n * size_of(b.type)); });
    }
    case BufferInit::Kind::safetensors: {
      const SafetensorsSource source = safetensors_source(b, base_dir);
      std::size_t index = 0;  // the tensor being read, and the bytes of it read so far
      std::uint64_t at = 0;
      return chunked(b, chunk_bytes, sink, [&](unsigned char* data, std::uint64_t n) {
        std::uint64_t bytes = n * size_of(b.type);
        while (bytes > 0) {
          const SafetensorsTensor& t = *source.tensors[index];
          const std::uint64_t take = std::min(bytes, t.bytes - at);
          source.file.read(t, at, take, data);
          data += take;
          bytes -= take;
          at += take;
          if (at == t.bytes && index + 1 < source.tensors.size()) ++index, at = 0;
        }
      });
    }
  }
}

std::vector<unsigned char> initial_contents(const BufferSpec& b, const std::string& base_dir) {
  std::vector<unsigned char> data(b.bytes());
  produce_initial_contents(b, base_dir, data.size(), [&](const unsigned char* chunk, std::size_t bytes, std::uint64_t offset) {
    std::memcpy(data.data() + offset, chunk, bytes);
  });
  return data;
}

}  // namespace flowdsl::cli
