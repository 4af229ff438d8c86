// SPDX-License-Identifier: Apache-2.0
// CUPTI through dlopen: its headers give the types, dlsym the functions, so that neither the
// library nor a program that never profiles depends on libcupti. Activity buffers are parsed
// as they come back and their records copied; CUPTI's callbacks report the node copies that
// instantiation makes.
#include "cupti_session.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <utility>

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include "flowdsl/profiler.hpp"
#include "log_internal.hpp"
#include "shared_library.hpp"

#ifndef FLOWDSL_CUPTI_LIBRARY
#error "FLOWDSL_CUPTI_LIBRARY (the CUDA Toolkit's libcupti.so.<major>) is defined by src/CMakeLists.txt"
#endif

namespace flowdsl::profiling {
namespace {

constexpr std::size_t buffer_bytes = std::size_t{8} << 20;  // per activity buffer handed to CUPTI
constexpr std::size_t buffer_alignment = 8;                 // what CUPTI requires of a buffer

// The CUPTI functions flowdsl calls, resolved by name from the library loaded.
struct Api {
  std::string library;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetGraphNodeId) graph_node_id = nullptr;
  decltype(&cuptiGetGraphId) graph_id = nullptr;
  decltype(&cuptiGetGraphExecId) graph_exec_id = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
  decltype(&cuptiActivityEnableCudaEventDeviceTimestamps) event_device_times = nullptr;  // optional
};

std::string result_text(const Api& api, CUptiResult result) {
  const char* text = nullptr;
  if (api.result_string != nullptr && api.result_string(result, &text) == CUPTI_SUCCESS && text != nullptr) {
    return text;
  }
  return "CUptiResult " + std::to_string(static_cast<int>(result));
}

std::string failure(const Api& api, const char* call, CUptiResult result) {
  return std::string(call) + " returned " + result_text(api, result);
}

void check_cupti(const Api& api, CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  std::string hint;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    hint = " (another tool holds CUPTI: Nsight Systems or Compute, cuda-gdb, compute-sanitizer or another profiler)";
  } else if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    hint = " (this user may not profile the GPU: see NVIDIA's page on ERR_NVGPUCTRPERM)";
  }
  throw ProfilerError("flowdsl: CUPTI (" + api.library + "): " + failure(api, call, result) + hint, call,
                      static_cast<int>(result));
}

// Opens the first candidate that loads; never closed: CUPTI stays attached to the driver once
// it has been used, so unloading it would leave the driver calling into nothing.
Api load() {
  const flowdsl::detail::SharedLibrary library(cupti_candidates());
  if (!library) {
    throw ProfilerError("flowdsl: CUPTI cannot be loaded, so graphs cannot be profiled here; tried:" + library.tried() +
                        "\n  (set FLOWDSL_CUPTI to the path of libcupti.so." + std::to_string(CUDART_VERSION / 1000) +
                        ")");
  }
  Api api;
  api.library = library.path();
  std::string missing;
  library.resolve("cuptiGetVersion", api.get_version, missing);
  library.resolve("cuptiGetResultString", api.result_string, missing);
  library.resolve("cuptiSubscribe", api.subscribe, missing);
  library.resolve("cuptiUnsubscribe", api.unsubscribe, missing);
  library.resolve("cuptiEnableCallback", api.enable_callback, missing);
  library.resolve("cuptiActivityRegisterCallbacks", api.register_callbacks, missing);
  library.resolve("cuptiActivityEnable", api.enable, missing);
  library.resolve("cuptiActivityDisable", api.disable, missing);
  library.resolve("cuptiActivityFlushAll", api.flush_all, missing);
  library.resolve("cuptiActivityGetNextRecord", api.next_record, missing);
  library.resolve("cuptiActivityGetNumDroppedRecords", api.dropped_records, missing);
  library.resolve("cuptiGetGraphNodeId", api.graph_node_id, missing);
  library.resolve("cuptiGetGraphId", api.graph_id, missing);
  library.resolve("cuptiGetGraphExecId", api.graph_exec_id, missing);
  library.resolve("cuptiGetTimestamp", api.get_timestamp, missing);
  library.resolve("cuptiGetCallbackName", api.callback_name, missing);
  std::string optional;  // without it, records are attributed by time less exactly
  library.resolve("cuptiActivityEnableCudaEventDeviceTimestamps", api.event_device_times, optional);
  if (!missing.empty()) {
    throw ProfilerError("flowdsl: CUPTI (" + api.library + ") lacks " + missing +
                        ": it is not a CUPTI flowdsl can use");
  }
  std::uint32_t version = 0;
  check_cupti(api, api.get_version(&version), "cuptiGetVersion");
  // Activity records are read with the layouts of the headers flowdsl was built with; an older
  // CUPTI may write older layouts.
  if (version < CUPTI_API_VERSION) {
    throw ProfilerError("flowdsl: CUPTI (" + api.library + ") has API version " + std::to_string(version) +
                        ", older than the headers flowdsl was built with (" + std::to_string(CUPTI_API_VERSION) +
                        "); point FLOWDSL_CUPTI at the CUPTI of that CUDA Toolkit");
  }
  return api;
}

// Loaded on first use; a failed load is tried again next time (a static whose initialiser
// throws is initialised again).
const Api& api() {
  static const Api loaded = load();
  return loaded;
}

// The live session's records, filled by CUPTI's buffer and resource callbacks (buffers may come
// back on a thread of CUPTI's).
struct Pending {
  std::mutex mutex;
  bool active = false;
  Records records;
  std::string error;  // the first failure inside a callback, reported by the next take()
};

Pending& pending() {
  static Pending p;
  return p;
}

std::atomic<bool> session_alive{false};
// The buffer callbacks are registered once per process (they are the same functions for every
// session); read and written by the one live session only.
bool callbacks_registered = false;

void note_error(Pending& p, std::string what) {
  if (p.error.empty()) p.error = std::move(what);
}

void copy_record(const Api& cupti, const CUpti_Activity* record, Records& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      out.gpu.push_back(
          {Activity::kernel, k->graphNodeId, k->correlationId, k->start, k->end, k->streamId, 0, k->graphId,
           k->name != nullptr ? std::string(k->name) : std::string()});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      out.gpu.push_back(
          {Activity::memcpy, m->graphNodeId, m->correlationId, m->start, m->end, m->streamId, m->bytes, m->graphId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      out.gpu.push_back(
          {Activity::memset, m->graphNodeId, m->correlationId, m->start, m->end, m->streamId, m->bytes, m->graphId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
      const auto* e = reinterpret_cast<const CUpti_ActivityCudaEvent2*>(record);
      out.events.push_back({e->correlationId, e->streamId, e->deviceTimestamp});
      break;
    }
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const CUpti_CallbackDomain domain =
          record->kind == CUPTI_ACTIVITY_KIND_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
      const char* name = nullptr;
      std::string text = cupti.callback_name(domain, a->cbid, &name) == CUPTI_SUCCESS && name != nullptr
                             ? std::string(name)
                             : "CUDA call " + std::to_string(a->cbid);
      out.api.push_back({std::move(text), a->correlationId, a->start, a->end});
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // Declining (null) makes CUPTI drop records, which it counts: reported as dropped.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(buffer_alignment, buffer_bytes));
  *size = *buffer != nullptr ? buffer_bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_bytes) {
  const Api& cupti = api();  // loaded: only a live session hands CUPTI these callbacks
  Records records;
  std::string error;
  CUpti_Activity* record = nullptr;
  while (valid_bytes > 0) {  // an empty buffer comes back on a flush with nothing recorded
    const CUptiResult result = cupti.next_record(buffer, valid_bytes, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (result != CUPTI_SUCCESS) {
      error = failure(cupti, "cuptiActivityGetNextRecord", result);
      break;
    }
    copy_record(cupti, record, records);
  }
  size_t dropped = 0;
  const CUptiResult result = cupti.dropped_records(context, stream_id, &dropped);
  if (result != CUPTI_SUCCESS && error.empty()) error = failure(cupti, "cuptiActivityGetNumDroppedRecords", result);
  records.dropped = dropped;
  std::free(buffer);

  Pending& p = pending();
  std::lock_guard lock(p.mutex);
  if (!p.active) return;  // the session is ending: its records are not wanted
  p.records.append(std::move(records));
  if (!error.empty()) note_error(p, std::move(error));
}

// The resource callbacks the session enables: instantiation copies every native node (and the
// graphs of child and conditional nodes), and CUPTI may name a copy in its records; each copy
// is remembered with its original. Nodes created inside graphs and executables created are
// remembered for the log's description of records that map to no node.
constexpr CUpti_CallbackIdResource resource_callbacks[] = {
    CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_CBID_RESOURCE_GRAPH_CLONED, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED};

// CUPTI's ids of what a resource callback names, read inside the callback (its data lives only
// that long). 0 for a null handle or a failed call; the first failure is kept.
class Ids {
 public:
  explicit Ids(const Api& cupti) : cupti_(cupti) {}

  std::uint64_t node(CUgraphNode n) {
    std::uint64_t id = 0;
    return n != nullptr && ok(cupti_.graph_node_id(n, &id), "cuptiGetGraphNodeId") ? id : 0;
  }
  std::uint32_t graph(CUgraph g) {
    std::uint32_t id = 0;
    return g != nullptr && ok(cupti_.graph_id(g, &id), "cuptiGetGraphId") ? id : 0;
  }
  std::uint32_t exec(CUgraphExec e) {
    std::uint32_t id = 0;
    return e != nullptr && ok(cupti_.graph_exec_id(e, &id), "cuptiGetGraphExecId") ? id : 0;
  }
  /// The first failure, as text; empty when every call succeeded.
  std::string failure() const { return failed_ != nullptr ? flowdsl::profiling::failure(cupti_, failed_, result_) : ""; }

 private:
  bool ok(CUptiResult result, const char* call) {
    if (result == CUPTI_SUCCESS) return true;
    if (failed_ == nullptr) {
      failed_ = call;
      result_ = result;
    }
    return false;
  }

  const Api& cupti_;
  const char* failed_ = nullptr;
  CUptiResult result_ = CUPTI_SUCCESS;
};

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || data == nullptr) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (graph == nullptr) return;
  Ids ids(api());
  Records noted;
  // Only a node copy whose ids cannot be read is an error (its records would stay unmapped);
  // the rest helps with nested bodies and, failing, is left out and logged.
  bool required = false;
  switch (id) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: {
      required = true;
      noted.clones.emplace_back(ids.node(graph->node), ids.node(graph->originalNode));
      // The graphs of the copy and of its original: a copied node's graph is a copied graph.
      Ids graphs(api());
      const std::uint32_t copy = graphs.graph(graph->graph), original = graphs.graph(graph->originalGraph);
      if (copy != 0 && original != 0) noted.graph_clones.emplace_back(copy, original);
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED: {
      const std::uint32_t copy = ids.graph(graph->graph), original = ids.graph(graph->originalGraph);
      if (copy != 0 && original != 0) noted.graph_clones.emplace_back(copy, original);
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED: {
      const std::uint64_t node = ids.node(graph->node);
      if (node != 0) noted.created.emplace_back(node, ids.graph(graph->graph));
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: {
      const std::uint32_t exec = ids.exec(graph->graphExec);
      if (exec != 0) noted.executables.emplace_back(exec, ids.graph(graph->graph));
      break;
    }
    default:
      return;
  }
  const std::string failed = ids.failure();
  if (!failed.empty() && !required) {
    FLOWDSL_DEBUG("profiler: {} in the resource callback {}: left out", failed, static_cast<int>(id));
  }
  Pending& p = pending();
  std::lock_guard lock(p.mutex);
  if (!p.active) return;
  if (!failed.empty() && required) {
    note_error(p, failed + " (of a node instantiation copied)");
    return;
  }
  p.records.append(std::move(noted));
}

}  // namespace

std::vector<std::string> cupti_candidates() {
  return flowdsl::detail::library_candidates("FLOWDSL_CUPTI",
                                             {FLOWDSL_CUPTI_LIBRARY, "libcupti.so." + std::to_string(CUDART_VERSION / 1000)});
}

CuptiSession::CuptiSession() {
  bool expected = false;
  if (!session_alive.compare_exchange_strong(expected, true)) {
    throw UsageError("flowdsl: another Profiler is alive; CUPTI allows one at a time per process");
  }
  try {
    const Api& cupti = api();
    {
      Pending& p = pending();
      std::lock_guard lock(p.mutex);
      p.records = Records{};
      p.error.clear();
      p.active = true;
    }
    CUpti_SubscriberHandle subscriber = nullptr;
    check_cupti(cupti, cupti.subscribe(&subscriber, on_callback, nullptr), "cuptiSubscribe");
    subscriber_ = subscriber;
    subscribed_ = true;
    for (CUpti_CallbackIdResource callback : resource_callbacks) {
      check_cupti(cupti, cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, callback),
                  "cuptiEnableCallback (graph resources)");
    }
    if (!callbacks_registered) {
      check_cupti(cupti, cupti.register_callbacks(buffer_requested, buffer_completed),
                  "cuptiActivityRegisterCallbacks");
      callbacks_registered = true;
    }
    for (CUpti_ActivityKind kind :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
          CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
      check_cupti(cupti, cupti.enable(kind), "cuptiActivityEnable");
      enabled_.push_back(static_cast<int>(kind));
    }
    enable_event_times();
  } catch (...) {
    release();
    throw;
  }
}

CuptiSession::~CuptiSession() { release(); }

// The device times of the events around each profiled launch bound its work on the device, for
// records that no graph-launch call claims. Without them (an older CUPTI, or one refusing),
// such records are attributed by the start of each launch's work instead.
void CuptiSession::enable_event_times() {
  const Api& cupti = api();
  if (cupti.event_device_times == nullptr) {
    FLOWDSL_DEBUG("profiler: CUPTI ({}) has no cuptiActivityEnableCudaEventDeviceTimestamps", cupti.library);
    return;
  }
  const CUptiResult kind = cupti.enable(CUPTI_ACTIVITY_KIND_CUDA_EVENT);
  if (kind != CUPTI_SUCCESS) {
    FLOWDSL_DEBUG("profiler: CUDA event records not available: {}", failure(cupti, "cuptiActivityEnable", kind));
    return;
  }
  enabled_.push_back(static_cast<int>(CUPTI_ACTIVITY_KIND_CUDA_EVENT));
  const CUptiResult times = cupti.event_device_times(1);
  if (times != CUPTI_SUCCESS) {
    FLOWDSL_DEBUG("profiler: CUDA events' device times not available: {}",
                  failure(cupti, "cuptiActivityEnableCudaEventDeviceTimestamps", times));
    return;
  }
  event_times_ = true;
}

void CuptiSession::release() noexcept {
  const auto warn = [](const char* what) { detail::log().warn("profiler: {} while ending the CUPTI session", what); };
  if (subscribed_) {  // CUPTI loaded (enabling comes after subscribing)
    const Api& cupti = api();
    for (int kind : enabled_) {
      if (cupti.disable(static_cast<CUpti_ActivityKind>(kind)) != CUPTI_SUCCESS) warn("cuptiActivityDisable failed");
    }
    enabled_.clear();
    if (event_times_ && cupti.event_device_times(0) != CUPTI_SUCCESS) {
      warn("cuptiActivityEnableCudaEventDeviceTimestamps(0) failed");
    }
    event_times_ = false;
    // Hands every buffer back, so that CUPTI keeps none of ours.
    if (callbacks_registered && cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) {
      warn("cuptiActivityFlushAll failed");
    }
    if (subscribed_ && cupti.unsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_)) != CUPTI_SUCCESS) {
      warn("cuptiUnsubscribe failed");
    }
    subscribed_ = false;
  }
  {
    Pending& p = pending();
    std::lock_guard lock(p.mutex);
    p.active = false;
    p.records = Records{};
  }
  session_alive.store(false);
}

std::uint64_t CuptiSession::timestamp() const {
  std::uint64_t t = 0;
  check_cupti(api(), api().get_timestamp(&t), "cuptiGetTimestamp");
  return t;
}

std::uint64_t CuptiSession::node_id(cudaGraphNode_t node) const {
  std::uint64_t id = 0;
  check_cupti(api(), api().graph_node_id(node, &id), "cuptiGetGraphNodeId");
  return id;
}

std::uint32_t CuptiSession::graph_id(cudaGraph_t graph) const {
  std::uint32_t id = 0;
  check_cupti(api(), api().graph_id(graph, &id), "cuptiGetGraphId");
  return id;
}

Records CuptiSession::take() {
  const Api& cupti = api();
  check_cupti(cupti, cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Pending& p = pending();
  std::lock_guard lock(p.mutex);
  if (!p.error.empty()) {
    std::string error = std::move(p.error);
    p.error.clear();
    throw ProfilerError("flowdsl: CUPTI (" + cupti.library + "): " + error);
  }
  return std::exchange(p.records, Records{});
}

const std::string& CuptiSession::library() const { return api().library; }

}  // namespace flowdsl::profiling
