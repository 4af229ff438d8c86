// Host-side initial contents of buffers.
#include "buffers.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "npy.hpp"

namespace flowdsl::cli {
namespace {

template <class T>
void store_integer(double v, unsigned char* out) {
  using limits = std::numeric_limits<T>;
  const double clamped = std::fmin(std::fmax(std::floor(v), static_cast<double>(limits::min())),
                                   static_cast<double>(limits::max()));
  const T value = static_cast<T>(clamped);
  std::memcpy(out, &value, sizeof(T));
}

template <class T>
void store_float(T value, unsigned char* out) {
  std::memcpy(out, &value, sizeof(T));
}

void store(ScalarType type, double v, unsigned char* out) {
  switch (type) {
    case ScalarType::i8: return store_integer<std::int8_t>(v, out);
    case ScalarType::i16: return store_integer<std::int16_t>(v, out);
    case ScalarType::i32: return store_integer<std::int32_t>(v, out);
    case ScalarType::i64: return store_integer<std::int64_t>(v, out);
    case ScalarType::u8: return store_integer<std::uint8_t>(v, out);
    case ScalarType::u16: return store_integer<std::uint16_t>(v, out);
    case ScalarType::u32: return store_integer<std::uint32_t>(v, out);
    case ScalarType::u64: return store_integer<std::uint64_t>(v, out);
    case ScalarType::f16: return store_float(__double2half(v), out);
    case ScalarType::bf16: return store_float(__double2bfloat16(v), out);
    case ScalarType::f32: return store_float(static_cast<float>(v), out);
    case ScalarType::f64: return store_float(v, out);
  }
}

template <class Next>
std::vector<unsigned char> generate(const BufferSpec& b, Next next) {
  const std::size_t size = size_of(b.type);
  std::vector<unsigned char> data(b.count * size);
  for (std::uint64_t i = 0; i < b.count; ++i) store(b.type, next(), data.data() + i * size);
  return data;
}

}  // namespace

std::vector<unsigned char> initial_contents(const BufferSpec& b, const std::string& base_dir) {
  switch (b.init.kind) {
    case BufferInit::Kind::zeros:
      return std::vector<unsigned char>(b.bytes(), 0);
    case BufferInit::Kind::constant:
      return generate(b, [&] { return b.init.value; });
    case BufferInit::Kind::uniform: {
      std::mt19937_64 rng(b.init.seed);
      std::uniform_real_distribution<double> dist(b.init.low, b.init.high);
      return generate(b, [&] { return dist(rng); });
    }
    case BufferInit::Kind::normal: {
      std::mt19937_64 rng(b.init.seed);
      std::normal_distribution<double> dist(b.init.mean, b.init.stddev);
      return generate(b, [&] { return dist(rng); });
    }
    case BufferInit::Kind::npy: {
      const std::string& f = b.init.file;
      return read_npy(f.empty() || f.front() == '/' || base_dir.empty() ? f : base_dir + "/" + f, b.type, b.count);
    }
  }
  return {};
}

}  // namespace flowdsl::cli
