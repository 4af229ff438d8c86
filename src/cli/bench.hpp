// SPDX-License-Identifier: Apache-2.0
// `flowdsl bench FILE`: latency percentiles, throughput, GPU busy fraction, host time per launch
// and device memory of a graph file's graph, launched again and again.
#pragma once

#include <string>

#include "flowdsl/json.hpp"

namespace flowdsl::cli {

/// \brief What `flowdsl bench` runs.
struct BenchOptions {
  int iterations = 1000;  ///< launches of the latency run, and of the back-to-back run
  int warmup = 10;        ///< launches before measuring (the first instantiates the executable)
  std::string json_out;   ///< where to write the report as JSON; empty: nowhere
  bool fuse = false;      ///< fuse runs of element-wise kernels (Graph::fuse) whatever the file says
};

/// \brief Loads `file` onto the current device (LoadedFile), launches its graph `warmup` times,
/// then `iterations` times one at a time (each launch synchronised: latency, event-timed span
/// and host time of the launch call), then `iterations` times back to back with one
/// synchronisation at the end (throughput, GPU busy fraction). Prints the figures to stdout,
/// progress to stderr every 2 s once a run has taken 2 s, and writes `json_out` when given.
/// \throws EnvironmentError, InputError, JsonError, ValidationError, CudaError
void bench(const std::string& file, const HostFunctions& hosts, const BenchOptions& options);

}  // namespace flowdsl::cli
