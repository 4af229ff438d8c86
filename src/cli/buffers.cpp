// Host-side initial contents of buffers.
#include "buffers.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

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
