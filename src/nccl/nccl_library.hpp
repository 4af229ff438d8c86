// SPDX-License-Identifier: Apache-2.0
// NCCL through dlopen: nccl.h gives the types, dlsym the functions, so that no program links
// NCCL and one that makes no Communicator never loads it.
#pragma once

#include <nccl.h>

#include <string>

namespace flowdsl::nccl::detail {

struct Api {
  std::string library;  ///< the path that loaded
  ncclResult_t (*get_version)(int*) = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_finalize)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_count)(const ncclComm_t, int*) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
  const char* (*last_error)(ncclComm_t) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                 cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
};

/// \brief NCCL, loaded at the first call (thread-safe); never unloaded.
/// \throws Error listing what was tried when no candidate loads or a function is missing.
const Api& api();

/// \brief Throws NcclError "flowdsl: <call> returned <NCCL's words>[: <last error>]" unless
/// `result` is ncclSuccess.
void check(ncclResult_t result, const char* call, ncclComm_t comm = nullptr);

}  // namespace flowdsl::nccl::detail
