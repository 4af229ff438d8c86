// SPDX-License-Identifier: Apache-2.0
// CUPTI, loaded when a Profiler is made: the library opened by path (never linked), one
// subscriber, activity records copied out of CUPTI's buffers into plain records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "profile_records.hpp"

namespace flowdsl::profiling {

/// \brief Where CUPTI is looked for, in order: $FLOWDSL_CUPTI alone when it is set; otherwise
/// the library of the CUDA Toolkit flowdsl was built with, then libcupti.so.<major> on the
/// loader's path.
std::vector<std::string> cupti_candidates();

/// \brief One profiling session: CUPTI loaded, subscribed to, recording kernels, copies, fills
/// and the CUDA calls of the host, and telling which native nodes instantiation copies. One at a
/// time per process (CUPTI allows one subscriber).
class CuptiSession {
 public:
  /// \throws ProfilerError when CUPTI cannot be loaded, is older than the headers flowdsl was
  ///         built with, or refuses a call (another tool, e.g. Nsight, holds it)
  /// \throws UsageError when another session is alive
  CuptiSession();
  /// Disables the records, hands CUPTI's buffers back and unsubscribes. CUPTI stays loaded.
  ~CuptiSession();
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  /// CUPTI's clock (ns), the clock of its records.
  std::uint64_t timestamp() const;
  /// CUPTI's id of a native node.
  std::uint64_t node_id(cudaGraphNode_t node) const;
  /// CUPTI's id of a native graph.
  std::uint32_t graph_id(cudaGraph_t graph) const;
  /// Makes CUPTI deliver every buffer, complete or not (call it once the device is idle), and
  /// returns the records delivered since the last take.
  /// \throws ProfilerError when CUPTI failed, also inside its callbacks since the last take
  Records take();
  /// The file CUPTI was loaded from.
  const std::string& library() const;

 private:
  void release() noexcept;
  void enable_event_times();

  bool subscribed_ = false;
  void* subscriber_ = nullptr;  // CUpti_SubscriberHandle
  std::vector<int> enabled_;    // CUpti_ActivityKind enabled by this session
  bool event_times_ = false;    // CUDA events' device times enabled by this session
};

}  // namespace flowdsl::profiling
