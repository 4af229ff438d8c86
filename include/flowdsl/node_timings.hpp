// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file node_timings.hpp
/// \brief Measured GPU times per node of a description: plain data, so that dumps (to_dot's
/// heat map) can show them without depending on what measured them (flowdsl::Profiler).

#include <vector>

#include "flowdsl/node_parts.hpp"

namespace flowdsl {

/// \brief What was measured of one node over the launches of a profile.
struct NodeTiming {
  /// The node did GPU work in the profile: a kernel, copy or fill that ran, or a node holding
  /// bodies some of whose nodes ran. Empty, host, event and memory nodes are never measured.
  bool measured = false;
  double median_us = 0;  ///< median over the launches in which it ran of its GPU time in that launch
  double p90_us = 0;     ///< 90th percentile (nearest rank) of the same
  /// Its part of all the GPU time of the profile's nodes (0 to 1): the shares of the nodes that
  /// do the work (kernels, copies, fills) add up to 1; a node holding bodies has the sum of its
  /// bodies' nodes' shares.
  double share = 0;
  /// On the critical path: the chain of dependent nodes with the largest sum of median times
  /// in its body, and, inside a node on it, in its body that takes longest.
  bool critical = false;
  /// The node before it on the critical path (no_node for the first node of a body's path).
  NodeId critical_after = no_node;
};

/// \brief Per node of a description, indexed by NodeId.
struct NodeTimings {
  std::vector<NodeTiming> nodes;
};

}  // namespace flowdsl
