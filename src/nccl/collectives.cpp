// SPDX-License-Identifier: Apache-2.0
// NCCL collectives as registered library calls ("nccl.<collective>.<type>") and the functions that
// declare library nodes of them. Each call finds its communicator by id, checks what NCCL would
// otherwise fault on (ranks, roots, peers), and enqueues the collective on the stream flowdsl
// records: NCCL's kernels (or, for one rank, its copies) become the node's recorded graph.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <mutex>
#include <string>

#include <cstring>

#include "flowdsl/nccl.hpp"
#include "nccl_library.hpp"

namespace flowdsl::nccl {
namespace {

using kernels::i32;
using kernels::u64;

template <class T>
struct DataType;
#define FLOWDSL_NCCL_TYPE(T, nccl_type, text) \
  template <>                                 \
  struct DataType<T> {                        \
    static constexpr ncclDataType_t value = nccl_type; \
    static constexpr const char* name = text; \
  };
FLOWDSL_NCCL_TYPE(std::int8_t, ncclInt8, "i8")
FLOWDSL_NCCL_TYPE(std::uint8_t, ncclUint8, "u8")
FLOWDSL_NCCL_TYPE(std::int32_t, ncclInt32, "i32")
FLOWDSL_NCCL_TYPE(std::uint32_t, ncclUint32, "u32")
FLOWDSL_NCCL_TYPE(std::int64_t, ncclInt64, "i64")
FLOWDSL_NCCL_TYPE(std::uint64_t, ncclUint64, "u64")
FLOWDSL_NCCL_TYPE(__half, ncclFloat16, "f16")
FLOWDSL_NCCL_TYPE(__nv_bfloat16, ncclBfloat16, "bf16")
FLOWDSL_NCCL_TYPE(float, ncclFloat32, "f32")
FLOWDSL_NCCL_TYPE(double, ncclFloat64, "f64")
#undef FLOWDSL_NCCL_TYPE

#define FLOWDSL_NCCL_OPS "{sum, prod, max, min, avg}"

ncclComm_t find(i32 id, const char* collective, int& size) {
  const ncclComm_t comm = communicator(id);
  if (comm == nullptr) {
    throw UsageError("flowdsl: " + std::string(collective) + ": 'comm' is " + std::to_string(id) +
                     ", which names no NCCL communicator of this process (make a flowdsl::nccl::Communicator first; "
                     "ids count from 0 in the order they were made, and a destroyed one's id is never reused)");
  }
  detail::check(detail::api().comm_count(comm, &size), "ncclCommCount", comm);
  return comm;
}

void check_rank(const char* collective, const char* what, i32 value, int size, bool none_allowed) {
  if ((none_allowed && value == -1) || (value >= 0 && value < size)) return;
  throw UsageError("flowdsl: " + std::string(collective) + ": '" + what + "' is " + std::to_string(value) +
                   ", not a rank of the communicator's " + std::to_string(size) + (none_allowed ? " (or -1: none)" : ""));
}

void check_ranks(const char* collective, i32 ranks, int size) {
  if (ranks == size) return;
  throw UsageError("flowdsl: " + std::string(collective) + ": 'ranks' is " + std::to_string(ranks) +
                   " but the communicator has " + std::to_string(size) +
                   " ranks (graph files can write {\"expr\": \"world\"})");
}

void check_op(const char* collective, i32 op) {
  if (op >= ncclSum && op <= ncclAvg) return;
  throw UsageError("flowdsl: " + std::string(collective) + ": 'op' is " + std::to_string(op) + ", not one of " FLOWDSL_NCCL_OPS);
}

template <class T>
int all_reduce_call(cudaStream_t stream, i32 comm_id, u64 count, i32 op, const T* send, T* recv) {
  int size = 0;
  const ncclComm_t comm = find(comm_id, "nccl all_reduce", size);
  check_op("nccl all_reduce", op);
  detail::check(detail::api().all_reduce(send, recv, count, DataType<T>::value, static_cast<ncclRedOp_t>(op), comm, stream),
                "ncclAllReduce", comm);
  return 0;
}

template <class T>
int all_gather_call(cudaStream_t stream, i32 comm_id, u64 count, i32 ranks, const T* send, T* recv) {
  int size = 0;
  const ncclComm_t comm = find(comm_id, "nccl all_gather", size);
  check_ranks("nccl all_gather", ranks, size);
  detail::check(detail::api().all_gather(send, recv, count, DataType<T>::value, comm, stream), "ncclAllGather", comm);
  return 0;
}

template <class T>
int reduce_scatter_call(cudaStream_t stream, i32 comm_id, u64 count, i32 ranks, i32 op, const T* send, T* recv) {
  int size = 0;
  const ncclComm_t comm = find(comm_id, "nccl reduce_scatter", size);
  check_ranks("nccl reduce_scatter", ranks, size);
  check_op("nccl reduce_scatter", op);
  detail::check(
      detail::api().reduce_scatter(send, recv, count, DataType<T>::value, static_cast<ncclRedOp_t>(op), comm, stream),
      "ncclReduceScatter", comm);
  return 0;
}

template <class T>
int broadcast_call(cudaStream_t stream, i32 comm_id, u64 count, i32 root, const T* send, T* recv) {
  int size = 0;
  const ncclComm_t comm = find(comm_id, "nccl broadcast", size);
  check_rank("nccl broadcast", "root", root, size, false);
  detail::check(detail::api().broadcast(send, recv, count, DataType<T>::value, root, comm, stream), "ncclBroadcast", comm);
  return 0;
}

template <class T>
int send_recv_call(cudaStream_t stream, i32 comm_id, u64 count, i32 send_peer, i32 recv_peer, const T* send, T* recv) {
  int size = 0;
  const ncclComm_t comm = find(comm_id, "nccl send_recv", size);
  check_rank("nccl send_recv", "send_peer", send_peer, size, true);
  check_rank("nccl send_recv", "recv_peer", recv_peer, size, true);
  const detail::Api& nccl = detail::api();
  detail::check(nccl.group_start(), "ncclGroupStart", comm);
  ncclResult_t sent = ncclSuccess, received = ncclSuccess;
  if (send_peer >= 0) sent = nccl.send(send, count, DataType<T>::value, send_peer, comm, stream);
  if (recv_peer >= 0) received = nccl.recv(recv, count, DataType<T>::value, recv_peer, comm, stream);
  const ncclResult_t ended = nccl.group_end();  // always: a group left open would swallow later calls
  detail::check(sent, "ncclSend", comm);
  detail::check(received, "ncclRecv", comm);
  detail::check(ended, "ncclGroupEnd", comm);
  return 0;
}

// What a call refuses that the registry's checks do not see (KernelInfo::check): send and recv of
// `count` elements each either the same memory (in place) or apart, never partly shared, which
// NCCL leaves undefined. Parameters `send_at` and `recv_at` of the call's arguments.
template <class T, std::uint32_t count_at, std::uint32_t send_at, std::uint32_t recv_at, bool in_place>
ArgumentProblem check_apart(const void* const* args) {
  u64 count = 0;
  const T* send = nullptr;
  const T* recv = nullptr;
  std::memcpy(&count, args[count_at], sizeof count);
  std::memcpy(&send, args[send_at], sizeof send);
  std::memcpy(&recv, args[recv_at], sizeof recv);
  const auto s = reinterpret_cast<std::uintptr_t>(send), r = reinterpret_cast<std::uintptr_t>(recv);
  if (count == 0 || (in_place && s == r)) return {};
  const u64 bytes = count > UINT64_MAX / sizeof(T) ? UINT64_MAX : count * sizeof(T);
  const bool apart = s >= r ? s - r >= bytes : r - s >= bytes;
  if (apart) return {};
  return {recv_at, std::string("argument 'recv' overlaps 'send'") +
                       (in_place ? " without being the same memory (in place)" : "") +
                       ": NCCL's result is undefined where they share bytes"};
}

template <class T>
void register_type(KernelRegistry& registry) {
  const std::string t = DataType<T>::name;
  registry.add_call("nccl.all_reduce." + t, &all_reduce_call<T>,
                    {"comm", "count", "op: " FLOWDSL_NCCL_OPS, "send: count", "recv: count"},
                    "recv[i] = op over the ranks of send[i] (ncclAllReduce); send may equal recv",
                    &check_apart<T, 1, 3, 4, true>);
  registry.add_call("nccl.all_gather." + t, &all_gather_call<T>, {"comm", "count", "ranks", "send: count", "recv: count * ranks"},
                    "recv[r * count + i] = rank r's send[i] (ncclAllGather); ranks: the communicator's size");
  registry.add_call("nccl.reduce_scatter." + t, &reduce_scatter_call<T>,
                    {"comm", "count", "ranks", "op: " FLOWDSL_NCCL_OPS, "send: count * ranks", "recv: count"},
                    "recv[i] = op over the ranks of send[rank * count + i] (ncclReduceScatter)");
  registry.add_call("nccl.broadcast." + t, &broadcast_call<T>, {"comm", "count", "root", "send: count", "recv: count"},
                    "recv[i] = rank root's send[i] (ncclBroadcast)", &check_apart<T, 1, 3, 4, true>);
  registry.add_call("nccl.send_recv." + t, &send_recv_call<T>,
                    {"comm", "count", "send_peer", "recv_peer", "send: count", "recv: count"},
                    "sends send to rank send_peer and receives recv from rank recv_peer in one NCCL group; -1: none",
                    &check_apart<T, 1, 4, 5, false>);
}

const char* type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "i8";
    case ncclUint8: return "u8";
    case ncclInt32: return "i32";
    case ncclUint32: return "u32";
    case ncclInt64: return "i64";
    case ncclUint64: return "u64";
    case ncclFloat16: return "f16";
    case ncclBfloat16: return "bf16";
    case ncclFloat32: return "f32";
    case ncclFloat64: return "f64";
    default: return nullptr;
  }
}

// The entry, registering the calls in the global registry at the first use.
const KernelInfo& entry(std::string_view collective, ncclDataType_t type) {
  const std::string name = call_name(collective, type);
  KernelRegistry& global = KernelRegistry::global();
  static std::once_flag once;
  std::call_once(once, [&] {
    if (global.find(name) == nullptr) register_calls(global);
  });
  const KernelInfo* info = global.find(name);
  if (info == nullptr) throw UsageError("flowdsl: '" + name + "' is not registered");
  return *info;
}

template <class T>
void set(RegisteredLibraryNode& node, const char* param, T value) {
  node.set_bytes(param, &value, sizeof value);
}

i32 rank_argument(int value) { return static_cast<i32>(value); }

// A node of `collective` for `type` with what every collective takes: comm, count, send, recv.
RegisteredLibraryNode declare(Into g, std::string name, std::string_view collective, ncclDataType_t type,
                              const Communicator& comm, const void* send, void* recv, std::size_t count) {
  RegisteredLibraryNode node = g.builder().library(std::move(name), entry(collective, type));
  set(node, "comm", comm.id());
  set(node, "count", static_cast<u64>(count));
  set(node, "send", send);
  set(node, "recv", recv);
  return node;
}

}  // namespace

std::string call_name(std::string_view collective, ncclDataType_t type) {
  const char* t = type_name(type);
  if (t == nullptr) {
    throw UsageError("flowdsl: NCCL data type " + std::to_string(static_cast<int>(type)) +
                     " has no registered collective (i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64)");
  }
  return "nccl." + std::string(collective) + "." + t;
}

void register_calls(KernelRegistry& registry) {
  register_type<std::int8_t>(registry);
  register_type<std::uint8_t>(registry);
  register_type<std::int32_t>(registry);
  register_type<std::uint32_t>(registry);
  register_type<std::int64_t>(registry);
  register_type<std::uint64_t>(registry);
  register_type<__half>(registry);
  register_type<__nv_bfloat16>(registry);
  register_type<float>(registry);
  register_type<double>(registry);
}

RegisteredLibraryNode all_reduce(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                 std::size_t count, ncclDataType_t type, ncclRedOp_t op) {
  RegisteredLibraryNode node = declare(g, std::move(name), "all_reduce", type, comm, send, recv, count);
  set(node, "op", static_cast<i32>(op));
  return node;
}

RegisteredLibraryNode all_gather(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                 std::size_t count, ncclDataType_t type) {
  RegisteredLibraryNode node = declare(g, std::move(name), "all_gather", type, comm, send, recv, count);
  set(node, "ranks", rank_argument(comm.size()));
  return node;
}

RegisteredLibraryNode reduce_scatter(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type, ncclRedOp_t op) {
  RegisteredLibraryNode node = declare(g, std::move(name), "reduce_scatter", type, comm, send, recv, count);
  set(node, "ranks", rank_argument(comm.size()));
  set(node, "op", static_cast<i32>(op));
  return node;
}

RegisteredLibraryNode broadcast(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                std::size_t count, ncclDataType_t type, int root) {
  RegisteredLibraryNode node = declare(g, std::move(name), "broadcast", type, comm, send, recv, count);
  set(node, "root", rank_argument(root));
  return node;
}

RegisteredLibraryNode send_recv(Into g, std::string name, const Communicator& comm, const void* send, int send_peer,
                                void* recv, int recv_peer, std::size_t count, ncclDataType_t type) {
  RegisteredLibraryNode node = declare(g, std::move(name), "send_recv", type, comm, send, recv, count);
  set(node, "send_peer", rank_argument(send_peer));
  set(node, "recv_peer", rank_argument(recv_peer));
  return node;
}

}  // namespace flowdsl::nccl
