// SPDX-License-Identifier: Apache-2.0
// Helpers for gpu tests: checked CUDA calls, owning buffers, random data, comparisons.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "catch.hpp"

/// Fails the test with the CUDA error's name when a call does not succeed.
#define CUDA_REQUIRE(call)                                                              \
  do {                                                                                  \
    const cudaError_t status_ = (call);                                                 \
    INFO(#call << " -> " << cudaGetErrorName(status_));                                 \
    REQUIRE(status_ == cudaSuccess);                                                    \
  } while (0)

namespace flowdsl_test {

/// Device memory for `n` elements of T, freed on destruction.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) { CUDA_REQUIRE(cudaMalloc(&ptr_, n * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  /// Fills with NaN (all bits set) so an element the GPU never wrote fails the comparison.
  /// Waits for the fill: cudaMemset is asynchronous, and graphs run on non-blocking streams,
  /// which do not wait for the legacy default stream (memcheck's timing exposed the race).
  void poison() {
    CUDA_REQUIRE(cudaMemset(ptr_, 0xff, bytes()));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  /// Copies in and waits: from pageable memory cudaMemcpy may return before the data lands.
  void upload(const std::vector<T>& host) {
    CUDA_REQUIRE(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    CUDA_REQUIRE(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  std::size_t n_;
};

/// Pinned host memory for `n` elements of T.
template <class T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t n) : n_(n) { CUDA_REQUIRE(cudaMallocHost(&ptr_, n * sizeof(T))); }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* get() const { return ptr_; }
  T& operator[](std::size_t i) const { return ptr_[i]; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  void poison() { std::memset(ptr_, 0xff, bytes()); }
  void assign(const std::vector<T>& host) { std::memcpy(ptr_, host.data(), bytes()); }
  std::vector<T> to_vector() const { return std::vector<T>(ptr_, ptr_ + n_); }

 private:
  T* ptr_ = nullptr;
  std::size_t n_;
};

/// Uniform random floats in [-1, 1), never all zero.
inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// Number of elements that differ from the reference by more than `rel` relative error
/// (NaN always differs).
inline std::size_t mismatches(const std::vector<float>& got, const std::vector<float>& want, float rel = 1e-5f) {
  std::size_t bad = got.size() == want.size() ? 0 : got.size() + want.size();
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const float tol = rel * std::max(1.0f, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol)) ++bad;
  }
  return bad;
}

}  // namespace flowdsl_test
