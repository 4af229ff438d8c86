// SPDX-License-Identifier: Apache-2.0
// The statistics `flowdsl bench` reports: percentiles of a sample of times.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

namespace flowdsl::cli {

/// \brief A sample of times summarised: nearest-rank percentiles (the p-th is the smallest value
/// with at least p% of the sample at or below it, so it is always a measured value), the
/// extremes and the mean.
struct Summary {
  std::size_t count = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
};

/// \brief The nearest-rank `p`-th percentile (0 < p <= 100) of `sorted` (ascending, not empty).
double percentile(const std::vector<double>& sorted, double p);

/// \brief Summarises `values`.
/// \throws std::invalid_argument for an empty sample
Summary summarise(std::vector<double> values);

/// \brief {"count", "p50", "p90", "p99", "min", "max", "mean"}.
void to_json(nlohmann::json& j, const Summary& s);

}  // namespace flowdsl::cli
