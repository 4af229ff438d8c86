// SPDX-License-Identifier: Apache-2.0
// What the samples and the kernel bench time with: the host clock and medians. The baseline
// they compare graph replay with, every node launched on its own on a stream, is
// flowdsl::launch_eagerly (flowdsl/eager.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include <cuda_runtime.h>

#include "common.cuh"
#include "flowdsl/eager.hpp"
#include "flowdsl/flowdsl.hpp"

namespace sample {

/// Seconds of host wall-clock time `f` takes.
template <class F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace sample
