// SPDX-License-Identifier: Apache-2.0
// Communicator: one RAII owner of an ncclComm_t, and the process's table of communicators by id
// (how a collective's `comm` argument, a plain integer a graph file can write, finds one).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "log_internal.hpp"
#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/nccl.hpp"
#include "nccl_library.hpp"

namespace flowdsl::nccl {
namespace {

spdlog::logger& detail_log() { return flowdsl::detail::log(); }

struct Table {
  std::mutex mutex;
  std::vector<ncclComm_t> comms;  // by id; null once destroyed (ids are never reused)
};
Table& table() {
  static Table t;
  return t;
}

std::int32_t enter(ncclComm_t comm) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.comms.push_back(comm);
  return static_cast<std::int32_t>(t.comms.size() - 1);
}

void leave(std::int32_t id) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (id >= 0 && static_cast<std::size_t>(id) < t.comms.size()) t.comms[static_cast<std::size_t>(id)] = nullptr;
}

void check_cuda(cudaError_t code, const char* call) {
  if (code != cudaSuccess) throw CudaError(code, call, "", "making an NCCL communicator");
}

int pick_device(const Bootstrap& b, int device) {
  if (device >= 0) return device;
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count <= 0) throw Error("flowdsl: no CUDA device for an NCCL communicator");
  return b.local_rank % count;
}

// Removes rank 0's id file once every rank has read it (ncclCommInitRank returns on rank 0 only
// after all ranks joined) or the attempt failed.
struct IdFileRemoval {
  const Bootstrap& b;
  ~IdFileRemoval() {
    if (b.rank == 0 && b.world > 1 && !b.id_file.empty()) ::unlink(b.id_file.c_str());
  }
};

}  // namespace

Communicator::Communicator(const Bootstrap& bootstrap, int device) {
  if (bootstrap.world < 1 || bootstrap.rank < 0 || bootstrap.rank >= bootstrap.world) {
    throw UsageError("flowdsl: rank " + std::to_string(bootstrap.rank) + " is outside a world of " +
                     std::to_string(bootstrap.world));
  }
  const detail::Api& nccl = detail::api();
  device_ = pick_device(bootstrap, device);
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  UniqueId mine{};
  if (bootstrap.rank == 0) {
    ncclUniqueId id;
    detail::check(nccl.get_unique_id(&id), "ncclGetUniqueId");
    std::memcpy(mine.data(), id.internal, mine.size());
  }
  // Every rank makes its communicators in the same order, so the n-th of each uses the n-th id
  // file: a rank that starts its next communicator early never reads the previous id.
  Bootstrap b = bootstrap;
  if (b.world > 1 && !b.id_file.empty()) {
    static std::atomic<unsigned> made{0};
    const unsigned n = made++;
    if (n > 0) b.id_file += "." + std::to_string(n);
  }
  IdFileRemoval removal{b};
  const UniqueId shared = share_unique_id(b, mine);
  ncclUniqueId id;
  std::memcpy(id.internal, shared.data(), shared.size());
  ncclComm_t comm = nullptr;
  detail::check(nccl.comm_init_rank(&comm, bootstrap.world, id, bootstrap.rank), "ncclCommInitRank");
  comm_ = comm;
  rank_ = bootstrap.rank;
  size_ = bootstrap.world;
  id_ = enter(comm_);
  detail_log().info("NCCL communicator {}: rank {} of {} on device {} ({})", id_, rank_, size_, device_,
                      nccl.library);
}

Communicator Communicator::single(int device) {
  Bootstrap one;
  return Communicator(one, device);
}

Communicator::~Communicator() { reset(); }

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(other.comm_), rank_(other.rank_), size_(other.size_), device_(other.device_), id_(other.id_) {
  other.comm_ = nullptr;
  other.id_ = -1;
}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = other.comm_;
    rank_ = other.rank_;
    size_ = other.size_;
    device_ = other.device_;
    id_ = other.id_;
    other.comm_ = nullptr;
    other.id_ = -1;
  }
  return *this;
}

void Communicator::reset() noexcept {
  if (comm_ == nullptr) return;
  leave(id_);
  const detail::Api& nccl = detail::api();  // loaded: a communicator exists
  // Finalize flushes what NCCL still has in flight; a failure there leaves destroy to free it.
  const ncclResult_t finalized = nccl.comm_finalize(comm_);
  const ncclResult_t destroyed = nccl.comm_destroy(comm_);
  if (finalized != ncclSuccess || destroyed != ncclSuccess) {
    detail_log().warn("NCCL communicator {}: ncclCommFinalize returned {}, ncclCommDestroy {}", id_,
                        nccl.error_string(finalized), nccl.error_string(destroyed));
  }
  comm_ = nullptr;
  id_ = -1;
}

void Communicator::abort() noexcept {
  if (comm_ == nullptr) return;
  leave(id_);
  (void)detail::api().comm_abort(comm_);
  comm_ = nullptr;
  id_ = -1;
}

ncclComm_t communicator(std::int32_t id) noexcept {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (id < 0 || static_cast<std::size_t>(id) >= t.comms.size()) return nullptr;
  return t.comms[static_cast<std::size_t>(id)];
}

int library_version() {
  int version = 0;
  detail::check(detail::api().get_version(&version), "ncclGetVersion");
  return version;
}

}  // namespace flowdsl::nccl
