// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kinds/event.hpp
/// \brief Event nodes: a graph records a CUDA event, or waits for one, so that it orders itself
/// with work outside it (another stream, another graph) without a host synchronisation.
///
/// \code
///   flowdsl::EventHandle ready = flowdsl::make_event(cudaEventDisableTiming);
///   producer.record_event("ready", ready.get()).after(write);   // graph A, on stream 1
///   auto wait = consumer.wait_event("wait", ready.get());       // graph B, on stream 2
///   consumer.kernel("read", ...).after(wait);                   // runs once A's work before "ready" is done
/// \endcode

#include <cstdint>
#include <string>
#include <string_view>

#include "flowdsl/node_handle.hpp"

/// CUDA's event type: cudaEvent_t is `CUevent_st*` (driver_types.h), declared here so that the
/// builder needs no CUDA header.
struct CUevent_st;

namespace flowdsl {

/// \brief A CUDA event (`cudaEvent_t`), borrowed: it must outlive the launches that use it.
using CudaEvent = ::CUevent_st*;

/// \brief Records `event` once the node's predecessors complete (cudaEventRecord in stream
/// order). Parameters: event.
struct EventRecordOp {
  static constexpr std::string_view kind = "event_record";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool allowed_in_conditional_body = false;  ///< CUDA allows no event nodes there
  template <class Builder>
  class Factory;

  CudaEvent event = nullptr;
};

/// \brief Makes the node's successors wait until the work `event` last recorded completes
/// (cudaStreamWaitEvent). Parameters: event.
struct EventWaitOp {
  static constexpr std::string_view kind = "event_wait";
  static constexpr std::uint32_t body_count = 0;
  static constexpr bool allowed_in_conditional_body = false;
  template <class Builder>
  class Factory;

  CudaEvent event = nullptr;
};

/// \brief Handle to an event record (`Op` = EventRecordOp) or wait (EventWaitOp) node.
template <class Op>
class EventNode : public NodeHandleBase<EventNode<Op>> {
 public:
  using NodeHandleBase<EventNode<Op>>::NodeHandleBase;
  /// \brief Another event. Parameters: the next launch updates the node in place.
  EventNode& set(CudaEvent event) {
    detail::parameters<Op>(*this->state_, this->id_).event = event;
    return *this;
  }
};

using EventRecordNode = EventNode<EventRecordOp>;
using EventWaitNode = EventNode<EventWaitOp>;

/// \brief `record_event(...)` on graphs and bodies.
template <class Builder>
class EventRecordOp::Factory {
 public:
  /// \brief Declares a node recording `event` (a cudaEvent_t) after its predecessors.
  EventRecordNode record_event(std::string name, CudaEvent event) {
    return static_cast<Builder&>(*this).template add<EventRecordNode>(std::move(name), EventRecordOp{event});
  }
};

/// \brief `wait_event(...)` on graphs and bodies.
template <class Builder>
class EventWaitOp::Factory {
 public:
  /// \brief Declares a node that waits for `event` (a cudaEvent_t): its successors run once the
  /// work the event last recorded, when this node runs, is done.
  EventWaitNode wait_event(std::string name, CudaEvent event) {
    return static_cast<Builder&>(*this).template add<EventWaitNode>(std::move(name), EventWaitOp{event});
  }
};

}  // namespace flowdsl
