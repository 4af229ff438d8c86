// SPDX-License-Identifier: Apache-2.0
// Percentiles of the times `flowdsl bench` measures.
#include "bench_stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace flowdsl::cli {

double percentile(const std::vector<double>& sorted, double p) {
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<std::size_t>(std::ceil(p * n / 100.0));  // 1-based; exact for whole p and n
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

Summary summarise(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("a summary of no values");
  std::sort(values.begin(), values.end());
  Summary s;
  s.count = values.size();
  s.p50 = percentile(values, 50);
  s.p90 = percentile(values, 90);
  s.p99 = percentile(values, 99);
  s.min = values.front();
  s.max = values.back();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return s;
}

void to_json(nlohmann::json& j, const Summary& s) {
  j = {{"count", s.count}, {"p50", s.p50}, {"p90", s.p90},  {"p99", s.p99},
       {"min", s.min},     {"max", s.max}, {"mean", s.mean}};
}

}  // namespace flowdsl::cli
