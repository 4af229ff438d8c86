// NCCL through dlopen (see nccl_library.hpp).
#include "nccl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "flowdsl/nccl.hpp"

namespace flowdsl::nccl::detail {
namespace {

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* chosen = std::getenv("FLOWDSL_NCCL"); chosen != nullptr && *chosen != '\0') {
    out.emplace_back(chosen);
    return out;  // named: nothing else is tried, so that a wrong path is not hidden
  }
  out.emplace_back("libnccl.so.2");
#ifdef FLOWDSL_NCCL_LIBRARY
  out.emplace_back(FLOWDSL_NCCL_LIBRARY);
#endif
  return out;
}

template <class F>
void resolve(void* handle, const char* name, F& out, std::string& missing) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  if (out == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

Api load() {
  std::string tried;
  void* handle = nullptr;
  Api api;
  for (const std::string& candidate : candidates()) {
    dlerror();
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      api.library = candidate;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + (why != nullptr ? std::string(why) : candidate + ": cannot be opened");
  }
  if (handle == nullptr) {
    throw Error("flowdsl: NCCL cannot be loaded, so no communicator can be made here; tried:" + tried +
                "\n  (set FLOWDSL_NCCL to the path of libnccl.so.2)");
  }
  std::string missing;
  resolve(handle, "ncclGetVersion", api.get_version, missing);
  resolve(handle, "ncclGetUniqueId", api.get_unique_id, missing);
  resolve(handle, "ncclCommInitRank", api.comm_init_rank, missing);
  resolve(handle, "ncclCommFinalize", api.comm_finalize, missing);
  resolve(handle, "ncclCommDestroy", api.comm_destroy, missing);
  resolve(handle, "ncclCommAbort", api.comm_abort, missing);
  resolve(handle, "ncclCommCount", api.comm_count, missing);
  resolve(handle, "ncclGetErrorString", api.error_string, missing);
  resolve(handle, "ncclGetLastError", api.last_error, missing);
  resolve(handle, "ncclAllReduce", api.all_reduce, missing);
  resolve(handle, "ncclAllGather", api.all_gather, missing);
  resolve(handle, "ncclReduceScatter", api.reduce_scatter, missing);
  resolve(handle, "ncclBroadcast", api.broadcast, missing);
  resolve(handle, "ncclSend", api.send, missing);
  resolve(handle, "ncclRecv", api.recv, missing);
  resolve(handle, "ncclGroupStart", api.group_start, missing);
  resolve(handle, "ncclGroupEnd", api.group_end, missing);
  if (!missing.empty()) {
    // The handle stays open: the process may have loaded this NCCL for another reason.
    throw Error("flowdsl: " + api.library + " lacks " + missing + " (flowdsl needs NCCL 2.14 or later, which has ncclCommFinalize)");
  }
  return api;
}

}  // namespace

const Api& api() {
  // A failed load is retried by the next call (the error may have been a wrong FLOWDSL_NCCL).
  static std::mutex mutex;
  static Api loaded;
  static bool done = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done) {
    loaded = load();
    done = true;
  }
  return loaded;
}

void check(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const Api& nccl = api();
  std::string what = std::string("flowdsl: ") + call + " returned " + nccl.error_string(result);
  const char* last = nccl.last_error(comm);
  if (last != nullptr && *last != '\0') what += ": " + std::string(last);
  throw NcclError(what, result);
}

}  // namespace flowdsl::nccl::detail
