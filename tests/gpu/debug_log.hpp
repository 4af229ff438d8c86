// SPDX-License-Identifier: Apache-2.0
// flowdsl's logger turned up to debug for the life of a scope, so that a GPU test's run shows
// the library's traces (e.g. what CUPTI reported about nodes the profiler could not map).
#pragma once

namespace flowdsl_test {

class DebugLog {
 public:
  DebugLog();   ///< flowdsl's logger at debug level (its own logger writes to stderr)
  ~DebugLog();  ///< the level it had before
  DebugLog(const DebugLog&) = delete;
  DebugLog& operator=(const DebugLog&) = delete;

 private:
  int previous_;
};

}  // namespace flowdsl_test
