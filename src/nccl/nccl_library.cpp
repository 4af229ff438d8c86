// SPDX-License-Identifier: Apache-2.0
// NCCL through dlopen (see nccl_library.hpp).
#include "nccl_library.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "flowdsl/nccl.hpp"
#include "shared_library.hpp"

namespace flowdsl::nccl::detail {
namespace {

Api load() {
  std::vector<std::string> defaults{"libnccl.so.2"};
#ifdef FLOWDSL_NCCL_LIBRARY
  defaults.emplace_back(FLOWDSL_NCCL_LIBRARY);
#endif
  const flowdsl::detail::SharedLibrary library(flowdsl::detail::library_candidates("FLOWDSL_NCCL", std::move(defaults)));
  if (!library) {
    throw Error("flowdsl: NCCL cannot be loaded, so no communicator can be made here; tried:" + library.tried() +
                "\n  (set FLOWDSL_NCCL to the path of libnccl.so.2)");
  }
  Api api;
  api.library = library.path();
  std::string missing;
  library.resolve("ncclGetVersion", api.get_version, missing);
  library.resolve("ncclGetUniqueId", api.get_unique_id, missing);
  library.resolve("ncclCommInitRank", api.comm_init_rank, missing);
  library.resolve("ncclCommFinalize", api.comm_finalize, missing);
  library.resolve("ncclCommDestroy", api.comm_destroy, missing);
  library.resolve("ncclCommAbort", api.comm_abort, missing);
  library.resolve("ncclCommCount", api.comm_count, missing);
  library.resolve("ncclGetErrorString", api.error_string, missing);
  library.resolve("ncclGetLastError", api.last_error, missing);
  library.resolve("ncclAllReduce", api.all_reduce, missing);
  library.resolve("ncclAllGather", api.all_gather, missing);
  library.resolve("ncclReduceScatter", api.reduce_scatter, missing);
  library.resolve("ncclBroadcast", api.broadcast, missing);
  library.resolve("ncclSend", api.send, missing);
  library.resolve("ncclRecv", api.recv, missing);
  library.resolve("ncclGroupStart", api.group_start, missing);
  library.resolve("ncclGroupEnd", api.group_end, missing);
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
