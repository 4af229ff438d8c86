// SPDX-License-Identifier: Apache-2.0
// Helpers for the kernel-library tests: element types and their tolerances, conversions on
// the host, poisoned device buffers of any element type, and a graph runner.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../gpu_support.cuh"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"
#include "reference.hpp"

namespace kernel_test {

using flowdsl_test::DeviceBuffer;

/// Sizes that are not multiples of any block size, from a single element to past a million.
inline const std::vector<std::int64_t> sizes = {1, 31, 1000, (1 << 20) + 3};

inline float to_float(float x) { return x; }
inline float to_float(__half x) { return __half2float(x); }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
T from_float(float x);
template <>
inline float from_float<float>(float x) { return x; }
template <>
inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/// Relative tolerance per element type: float keeps 24 bits, half 11 and bfloat16 8, so one
/// rounding of the result is ~6e-8, ~5e-4 and ~4e-3 relative.
template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}
template <class T>
const char* type_name() {
  return std::is_same_v<T, float> ? "float" : std::is_same_v<T, __half> ? "half" : "bfloat16";
}

template <class T>
std::vector<T> convert(const std::vector<float>& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = from_float<T>(x[i]);
  return out;
}
template <class T>
std::vector<float> widen(const std::vector<T>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_float(x[i]);
  return out;
}

/// Random values in [lo, hi) already rounded to T, as floats (what the kernel will see).
template <class T>
std::vector<float> random_values(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v = flowdsl_test::random_floats(n, seed);
  for (float& x : v) x = to_float(from_float<T>(lo + (hi - lo) * 0.5f * (x + 1.0f)));
  return v;
}

/// Fills the first values.size() elements of a device buffer of T (which may be larger).
template <class T>
void upload(DeviceBuffer<T>& buffer, const std::vector<float>& values) {
  REQUIRE(values.size() <= buffer.size());
  if (values.empty()) return;
  const std::vector<T> converted = convert<T>(values);
  CUDA_REQUIRE(cudaMemcpy(buffer.get(), converted.data(), converted.size() * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());  // pageable copies may return early; graphs run on non-blocking streams
}
template <class T>
std::vector<float> download(const DeviceBuffer<T>& buffer) {
  return widen(buffer.download());
}

/// Elements whose |got - want| exceeds rel * max(1, |want|); NaN always counts. The first
/// few are reported through INFO by the caller via `first_bad`.
template <class Want>
std::size_t mismatches(const std::vector<float>& got, const std::vector<Want>& want, double rel,
                       std::int64_t* first_bad = nullptr) {
  std::size_t bad = got.size() == want.size() ? 0 : got.size() + want.size();
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double w = static_cast<double>(want[i]);
    if (!(std::fabs(double(got[i]) - w) <= rel * std::max(1.0, std::fabs(w)))) {
      if (bad == 0 && first_bad) *first_bad = static_cast<std::int64_t>(i);
      ++bad;
    }
  }
  return bad;
}

/// Runs graphs through one Runtime on one stream and waits for them.
class Runner {
 public:
  Runner() : stream_(flowdsl::make_stream()) {}
  flowdsl::LaunchReport run(const flowdsl::Graph& g) {
    const flowdsl::LaunchReport report = runtime_.launch(g, stream_.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream_.get()));
    CUDA_REQUIRE(cudaGetLastError());
    return report;
  }
  flowdsl::Runtime& runtime() { return runtime_; }

 private:
  flowdsl::StreamHandle stream_;
  flowdsl::Runtime runtime_;
};

}  // namespace kernel_test

#define KERNEL_TYPES float, __half, __nv_bfloat16
