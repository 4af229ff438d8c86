// SPDX-License-Identifier: Apache-2.0
// The runtime's executables: a pool per cache key (a topology; for graphs holding memory nodes, a
// topology and the Graph that owns its executables), at most `capacity` executables in all, the
// least recently used dropped first; and how a launch picks an executable from its pool.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/runtime.hpp"
#include "lower/applied_parameters.hpp"
#include "lower/structure.hpp"

namespace flowdsl::detail {

/// The stream of a launch, as far as pools tell streams apart: its handle, and for
/// cudaStreamPerThread (one handle for a stream of each thread) the thread too.
struct StreamKey {
  cudaStream_t stream = nullptr;
  std::thread::id thread;

  static StreamKey of(cudaStream_t stream) {
    return {stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id()};
  }
  friend bool operator==(const StreamKey& a, const StreamKey& b) {
    return a.stream == b.stream && a.thread == b.thread;
  }
  friend bool operator!=(const StreamKey& a, const StreamKey& b) { return !(a == b); }
};

/// One cached executable: the Graph and parameter version it was last synchronised with, the
/// parameters it holds, and where it was last launched.
struct Member {
  // What a launch under the lock reads and writes first, together (it runs on caches a
  // synchronisation may have emptied); the parameters it holds after them. A repeated launch
  // (runtime.cpp, Runtime::Impl::Recent) reads none of it.
  std::unique_ptr<Executable> executable;
  std::uint64_t graph_uid = 0;  ///< 0: synchronised with no Graph (an update failed part-way)
  std::uint64_t version = 0;    ///< that Graph's parameter_version() then
  StreamKey stream;            ///< of its last launch
  std::uint64_t last_use = 0;  ///< the runtime's clock when it was last chosen
  bool marked = false;         ///< its last launch's end was marked (Executable::mark_end)
  /// A thread is enqueueing a launch of it, outside the runtime's lock. Set under the lock (also
  /// for a repeated launch holding its slot when the lock's path takes the slot back); cleared
  /// after `marked` is written (a reader that sees it clear sees `marked`): without the lock by
  /// a launch that listed nothing, under it by one whose slot was listed or taken back.
  std::atomic<bool> in_flight{false};
  lowering::AppliedParameters applied;

  /// Whether its last launch is known to have run to its end.
  bool ended() const { return marked && executable->ended(); }
};

/// How a launch got its executable.
enum class Pick : std::uint8_t {
  graph,   ///< the one last synchronised with its Graph, not busy on another stream
  stream,  ///< one last launched on its stream
  ended,   ///< one whose last launch, on another stream, has ended
  busy,    ///< the least recently used, which may still run on another stream: the pool is full
  none,    ///< every one may still run on another stream and the pool has room: make another
  wait,    ///< every one is being enqueued by another thread and the pool is full
};

struct Choice {
  std::shared_ptr<Member> member;  ///< null for none and wait
  Pick pick = Pick::none;
};

/// The executables of one cache key.
struct Pool {
  std::vector<std::shared_ptr<Member>> members;
  std::size_t node_count = 0;            ///< of the topology (another count: a hash collision)
  std::uint64_t owner = 0;               ///< graph memory: the Graph the executables belong to; else 0
  /// What was instantiated, kept to explain misses of other topologies: summarised only when a
  /// miss is explained (a summary formats every node's structure as text, which a miss that
  /// nobody asks about should not pay for). Shared with the Graph that missed: its parameters may
  /// have changed since, its structure has not (the Graph copies it before a structural change).
  std::shared_ptr<const Description> description;
  std::shared_ptr<const Plan> plan;
  StreamKey last_stream;                 ///< of its last launch
  /// Launched on more than one stream: from then on the end of every launch is marked, so that a
  /// launch on another stream can tell whether an executable may still run.
  bool several_streams = false;
  mutable std::optional<lowering::StructureSummary> summary;  ///< see structure()

  /// The structure of its topology (summarised on first use).
  const lowering::StructureSummary& structure() const {
    if (!summary) summary = lowering::summarize_structure(*description, *plan);
    return *summary;
  }

  /// The executable for a launch of Graph `graph_uid` on `stream`, in this order of preference:
  /// the Graph's own (last synchronised with it) on this stream; the Graph's own whose launch
  /// elsewhere has ended; one last launched on this stream (CUDA orders it behind that launch
  /// anyway); one whose launch elsewhere has ended; none, when fewer than `bound` exist; the
  /// least recently used; wait, when every one is being enqueued. Executables being enqueued are
  /// never chosen, and only executables whose last launch was marked are asked whether it ended.
  Choice choose(std::uint64_t graph_uid, const StreamKey& stream, std::size_t bound) const;
  /// The least recently used executable, enqueued or not.
  std::shared_ptr<Member> least_recent() const;
};

/// Pools by cache key, holding at most `capacity` executables in all.
class ExecutableCache {
 public:
  explicit ExecutableCache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  Pool* find(std::uint64_t key);
  const Pool* find(std::uint64_t key) const;
  /// The pool of `key`, made empty when absent.
  Pool& pool(std::uint64_t key) { return pools_[key]; }
  /// Adds `member` to `pool`, then, while more than `capacity` executables are cached, drops the
  /// least recently used one (never `member`); a pool left empty goes too. Returns the keys of the
  /// pools executables were dropped from. A dropped executable being enqueued lives on with its
  /// launch (its shared_ptr).
  std::vector<std::uint64_t> add(Pool& pool, std::shared_ptr<Member> member);
  void erase(std::uint64_t key);
  void clear();

  /// Calls `visit(pool)` for every pool.
  template <class Visit>
  void for_each(Visit visit) const {
    for (const auto& [key, pool] : pools_) visit(pool);
  }
  std::size_t size() const noexcept { return size_; }  ///< executables
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  std::unordered_map<std::uint64_t, Pool> pools_;
  std::size_t size_ = 0;
  std::size_t capacity_;
};

}  // namespace flowdsl::detail
