// SPDX-License-Identifier: Apache-2.0
// Medians and 90th percentiles of the profiler's figures.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace flowdsl::profiling {

/// The median (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 != 0 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

/// The 90th percentile by nearest rank: the smallest value with at least 90% of the values at or
/// below it; 0 for none.
inline double p90(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(values.size())));
  return values[std::max<std::size_t>(rank, 1) - 1];
}

}  // namespace flowdsl::profiling
