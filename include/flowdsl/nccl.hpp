// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file nccl.hpp
/// \brief NCCL collectives as graph nodes, and the communicator they run on: one process per GPU,
/// started by mpirun, Slurm, torchrun or a launcher of your own, on one host or many.
///
/// \code
///   flowdsl::nccl::Communicator comm;            // rank and size from the launcher's environment
///   flowdsl::Graph g;
///   auto mm = flowdsl::kernels::cublaslt_matmul(g, "partial", ...);
///   flowdsl::nccl::all_reduce(g, "sum", comm, partial, partial, count, ncclBfloat16, ncclSum).after(mm);
///   runtime.launch(g, stream);                   // every rank launches the same topology
/// \endcode
///
/// A collective is a library node (flowdsl/kinds/library.hpp) of a registered call
/// "nccl.<collective>.<type>" (register_calls): its arguments are parameters, updated in place,
/// and its pointers have extents, so counts are checked against the buffers they point into and
/// the accesses feed the hazard check. Graph files name the same calls (docs/multi-gpu.md).
///
/// NCCL is opened with dlopen when the first Communicator is made: a program that makes none
/// never loads it, and none links it. The library searched is libnccl.so.2 (the loader's paths,
/// then the CUDA Toolkit's); FLOWDSL_NCCL in the environment names another.
///
/// Rules NCCL sets for graphs: one GPU per process; every rank launches graphs with the same
/// collectives in the same order (a launch is a collective call); a parameter change to a
/// collective is made on every rank before the next launch. The communicator must outlive every
/// executable that holds its collectives (destroy Runtimes before it).

#include <nccl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "flowdsl/error.hpp"
#include "flowdsl/kernels.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl::nccl {

using kernels::Into;

/// \brief A call into NCCL that failed: its name, NCCL's result and NCCL's own words.
class NcclError : public Error {
 public:
  NcclError(const std::string& what, ncclResult_t result) : Error(what), result_(result) {}
  ncclResult_t result() const noexcept { return result_; }

 private:
  ncclResult_t result_;
};

/// \brief Where this process stands in its job and how the ranks find each other.
struct Bootstrap {
  int rank = 0;        ///< this process's rank, 0 .. world - 1
  int world = 1;       ///< number of processes
  int local_rank = 0;  ///< rank among the processes of this host: picks the GPU
  /// Where rank 0 leaves NCCL's unique id for the others: a file on storage every rank sees
  /// (one host: any local folder). Empty: use `address`. A process's second and later
  /// communicators use `<id_file>.1`, `.2`, ... (every rank makes them in the same order).
  std::string id_file;
  /// `host:port` on which rank 0 hands out the unique id over TCP. Empty: use `id_file`.
  std::string address;
  /// How long a rank waits for the id (and rank 0 for the others to take it).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// The variables the values came from, for messages ("OMPI_COMM_WORLD_RANK", ...).
  std::string source;
};

/// \brief A way to read environment variables (null: unset), so that tests can pass their own.
using Environment = std::function<const char*(const char*)>;

/// \brief Reads rank, size and local rank from the launcher's variables, the first set of these:
/// FLOWDSL_RANK / FLOWDSL_WORLD_SIZE / FLOWDSL_LOCAL_RANK; Open MPI's OMPI_COMM_WORLD_RANK /
/// _SIZE / _LOCAL_RANK; PMI_RANK / PMI_SIZE (MPICH, Intel MPI; MPI_LOCALRANKID); Slurm's
/// SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID; torchrun's RANK / WORLD_SIZE / LOCAL_RANK. None
/// set: one rank. The id's way: FLOWDSL_NCCL_ID_FILE (a path), else FLOWDSL_NCCL_ADDRESS
/// (`host:port`), else MASTER_ADDR and MASTER_PORT (torchrun's), else, for more than one rank, a
/// file in the temporary folder named after the job (Open MPI's, PMIx's or Slurm's job id), which
/// serves the processes of one host. FLOWDSL_NCCL_TIMEOUT_S sets the timeout.
/// \throws UsageError naming the variable that is not a number or out of range, or when more
/// than one rank has no way to share the id.
Bootstrap bootstrap_from(const Environment& environment);
/// \brief bootstrap_from(std::getenv).
Bootstrap bootstrap_from_environment();

/// \brief NCCL's unique id (ncclUniqueId's 128 bytes).
using UniqueId = std::array<char, NCCL_UNIQUE_ID_BYTES>;

/// \brief Hands rank 0's `id` to every rank as `bootstrap` says (file or TCP) and returns it;
/// rank 0 returns `id`, the others ignore theirs. Collective: every rank calls it. For world 1
/// returns `id` at once. No NCCL call: usable without a GPU.
/// \throws Error when the id cannot be written, read, sent or received within the timeout
/// (naming the file or address).
UniqueId share_unique_id(const Bootstrap& bootstrap, const UniqueId& id);

/// \brief One RAII owner of an `ncclComm_t` of this process's rank, on its GPU.
///
/// Each communicator gets a small id (`id()`), how the collectives' calls find it: their `comm`
/// argument. Graph files write it too ("comm": 0 is the first communicator the process made:
/// the one `flowdsl run` makes).
class Communicator {
 public:
  /// \brief Makes the communicator of `bootstrap` on `device` (-1: the local rank's GPU, local
  /// rank modulo the device count), which it makes current. Collective: every rank constructs
  /// its own at the same time.
  /// \throws UsageError for a rank outside the world; NcclError, CudaError or Error when NCCL
  /// cannot be loaded, the id cannot be shared, or initialisation fails.
  explicit Communicator(const Bootstrap& bootstrap = bootstrap_from_environment(), int device = -1);
  /// \brief A communicator of one rank on `device`, with no bootstrap: collectives become copies.
  static Communicator single(int device = 0);
  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t get() const noexcept { return comm_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  int device() const noexcept { return device_; }
  /// \brief The id the collectives' `comm` argument names this communicator by.
  std::int32_t id() const noexcept { return id_; }

  /// \brief Aborts the communicator (ncclCommAbort): what to do after a failure, when the other
  /// ranks may never answer. The object then owns nothing.
  void abort() noexcept;

 private:
  void reset() noexcept;

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  std::int32_t id_ = -1;
};

/// \brief The communicator whose id() is `id`, or null when none (never made, or destroyed).
ncclComm_t communicator(std::int32_t id) noexcept;

/// \brief The version of the NCCL library loaded (NCCL_VERSION_CODE's form), loading it.
/// \throws Error when it cannot be loaded.
int library_version();

// ------------------------------------------------------------------ collectives -------------
// Each declares a library node of the registered call for `type`; counts are in elements. The
// node's arguments are set by name afterwards (`node.set("recv", p)`, a parameter change).

/// \brief recv[i] = op over the ranks of send[i], i < count. send may equal recv (in place).
RegisteredLibraryNode all_reduce(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                 std::size_t count, ncclDataType_t type, ncclRedOp_t op);
/// \brief recv[r * count + i] = rank r's send[i]: recv holds count * comm.size() elements.
RegisteredLibraryNode all_gather(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                 std::size_t count, ncclDataType_t type);
/// \brief recv[i] = op over the ranks of send[rank * count + i]: send holds count * comm.size().
RegisteredLibraryNode reduce_scatter(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type, ncclRedOp_t op);
/// \brief recv[i] = rank root's send[i] on every rank (send is read on root only).
RegisteredLibraryNode broadcast(Into g, std::string name, const Communicator& comm, const void* send, void* recv,
                                std::size_t count, ncclDataType_t type, int root);
/// \brief Sends count elements of send to rank send_peer and receives count into recv from rank
/// recv_peer, as one NCCL group (so a ring of exchanges cannot deadlock); a peer of -1 skips
/// that half.
RegisteredLibraryNode send_recv(Into g, std::string name, const Communicator& comm, const void* send, int send_peer,
                                void* recv, int recv_peer, std::size_t count, ncclDataType_t type);

/// \brief The registered call's name for a collective and type: "nccl.all_reduce.f32".
/// \throws UsageError for a type flowdsl does not register (ncclFloat8e4m3, ...).
std::string call_name(std::string_view collective, ncclDataType_t type);

/// \brief Registers "nccl.all_reduce.<t>", "nccl.all_gather.<t>", "nccl.reduce_scatter.<t>",
/// "nccl.broadcast.<t>" and "nccl.send_recv.<t>" for t in i8, u8, i32, u32, i64, u64, f16, bf16,
/// f32, f64. Registering loads nothing: NCCL is loaded by the first Communicator.
void register_calls(KernelRegistry& registry);

}  // namespace flowdsl::nccl
