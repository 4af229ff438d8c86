// SPDX-License-Identifier: Apache-2.0
// Shared by the samples: device check, checked CUDA calls, owners of device and pinned memory,
// uploads, random input.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

/// Exits with a message naming the failed call.
#define SAMPLE_CHECK(call)                                                                       \
  do {                                                                                           \
    const cudaError_t status_ = (call);                                                          \
    if (status_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorName(status_));                 \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace sample {

/// Exit code ctest maps to SKIP.
constexpr int skipped = 77;

/// True when a CUDA device is present; otherwise says so.
inline bool have_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return false;
  }
  return true;
}

namespace detail {

/// Memory from cudaMalloc, freed with cudaFree.
struct DeviceMemory {
  static cudaError_t allocate(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
  static cudaError_t deallocate(void* p) { return cudaFree(p); }
};

/// Page-locked host memory from cudaMallocHost, freed with cudaFreeHost.
struct PinnedMemory {
  static cudaError_t allocate(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
  static cudaError_t deallocate(void* p) { return cudaFreeHost(p); }
};

/// \brief Owns `size()` elements of `T` from `Memory`, freed exactly once.
///
/// Deleted copy; a move hands the memory over and leaves an empty array behind; the destructor
/// is noexcept and ignores the free call's status, like flowdsl::UniqueHandle.
template <class T, class Memory>
class Array {
 public:
  Array() noexcept = default;
  /// \brief Allocates `count` uninitialised elements and `slack_bytes` more after them.
  explicit Array(std::size_t count, std::size_t slack_bytes = 0) : size_(count) {
    void* p = nullptr;
    SAMPLE_CHECK(Memory::allocate(&p, bytes() + slack_bytes));
    data_ = static_cast<T*>(p);
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  Array(Array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Array& operator=(Array&& other) noexcept {
    Array taken(std::move(other));  // frees what this held when it goes; safe on self-move
    std::swap(data_, taken.data_);
    std::swap(size_, taken.size_);
    return *this;
  }
  ~Array() {
    if (data_ != nullptr) (void)Memory::deallocate(data_);
  }

  T* get() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  /// Bytes of the elements, without the slack.
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

/// Device memory (cudaMalloc) with one owner.
template <class T>
using DeviceArray = detail::Array<T, detail::DeviceMemory>;
/// Pinned host memory (cudaMallocHost) with one owner.
template <class T>
using PinnedArray = detail::Array<T, detail::PinnedMemory>;

/// Copies `host` to the start of `device` and waits until the data has landed: a copy from
/// pageable memory may return before then, and flowdsl's streams (non-blocking) do not wait
/// for the legacy stream the copy runs on.
template <class T>
void upload(const DeviceArray<T>& device, const std::vector<T>& host) {
  if (host.size() > device.size()) {
    std::fprintf(stderr, "upload: %zu elements do not fit in %zu\n", host.size(), device.size());
    std::exit(1);
  }
  SAMPLE_CHECK(cudaMemcpy(device.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  SAMPLE_CHECK(cudaDeviceSynchronize());
}

/// A device copy of `host`, uploaded (see upload), with 16 bytes of slack after it (kernels may
/// read whole 16-byte chunks at the end).
template <class T>
DeviceArray<T> device_copy(const std::vector<T>& host) {
  DeviceArray<T> device(host.size(), 16);
  upload(device, host);
  return device;
}

inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace sample
