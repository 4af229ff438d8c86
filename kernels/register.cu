// SPDX-License-Identifier: Apache-2.0
// register_builtins(): every built-in kernel under its stable name. An explicit call rather
// than static registrars, which a static library would drop when nothing references them.
#include <mutex>

#include "descriptor.cuh"

namespace flowdsl::kernels {

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
