// SPDX-License-Identifier: Apache-2.0
// The statistics of `flowdsl bench`: nearest-rank percentiles, always a measured value.
#include <stdexcept>
#include <vector>

#include "bench_stats.hpp"
#include "catch.hpp"

TEST_CASE("Percentiles are nearest-rank: the smallest value with p% of the sample at or below it", "[bench]") {
  const std::vector<double> hundred = [] {
    std::vector<double> v;
    for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted: summarise sorts
    return v;
  }();
  const flowdsl::cli::Summary s = flowdsl::cli::summarise(hundred);
  CHECK(s.count == 100);
  CHECK(s.p50 == 50);
  CHECK(s.p90 == 90);
  CHECK(s.p99 == 99);
  CHECK(s.min == 1);
  CHECK(s.max == 100);
  CHECK(s.mean == 50.5);

  // Ten values: the 90th is the 9th, the 99th the 10th; one value is every percentile.
  const flowdsl::cli::Summary ten = flowdsl::cli::summarise({3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  CHECK(ten.p50 == 3);
  CHECK(ten.p90 == 6);
  CHECK(ten.p99 == 9);
  const flowdsl::cli::Summary one = flowdsl::cli::summarise({7.5});
  CHECK(one.p50 == 7.5);
  CHECK(one.p99 == 7.5);
  CHECK(flowdsl::cli::percentile({1, 2, 3}, 100) == 3);
  CHECK(flowdsl::cli::percentile({1, 2, 3}, 0.1) == 1);
}

TEST_CASE("A summary of no values is refused", "[bench]") {
  CHECK_THROWS_AS(flowdsl::cli::summarise({}), std::invalid_argument);
}
