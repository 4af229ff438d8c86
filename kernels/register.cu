// SPDX-License-Identifier: Apache-2.0
// register_builtins(): every built-in kernel under its stable name. An explicit call rather
// than static registrars, which a static library would drop when nothing references them.
#include <atomic>
#include <mutex>

#include "descriptor.cuh"

namespace flowdsl::kernels {

namespace detail {

int multiprocessors() {
  static std::atomic<int> counts[16] = {};  // per device; 0: not asked yet
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 16) {
    (void)cudaGetLastError();
    return 132;
  }
  if (const int known = counts[device].load(std::memory_order_relaxed); known > 0) return known;
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    count = 132;
  }
  counts[device].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace detail

void register_builtins(KernelRegistry& registry) {
  detail::register_elementwise(registry);
  detail::register_reductions(registry);
  detail::register_batching(registry);
  detail::register_simulation(registry);
  detail::register_matmul(registry);
  detail::register_conditions(registry);
  detail::register_attention(registry);
  detail::register_sampling(registry);
  detail::register_linear(registry);
  detail::register_cublaslt(registry);
}

void ensure_builtins(KernelRegistry& registry) {
  // One registration at a time, so that two threads ensuring at once do not both register.
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  if (registry.find("scale.f32") == nullptr) register_builtins(registry);
}

}  // namespace flowdsl::kernels
