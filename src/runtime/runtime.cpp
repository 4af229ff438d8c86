// SPDX-License-Identifier: Apache-2.0
// Runtime: the executable cache (hit, update, value diff, miss, re-instantiation, eviction, pools
// of executables for launches on several streams) over a backend.
#include "flowdsl/runtime.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "builder/graph_state.hpp"
#include "flowdsl/cuda_handles.hpp"
#include "debug_launch.hpp"
#include "executable_cache.hpp"
#include "log_internal.hpp"
#include "recent_slot.hpp"
#include "lower/applied_parameters.hpp"
#include "lower/hasher.hpp"
#include "lower/structure.hpp"

namespace flowdsl {
namespace {

constexpr std::size_t explained_differences = 3;

/// The nodes of `graph` a launch on `member` updates: those changed since the version it was
/// last synchronised with when that was this Graph; otherwise those whose parameters differ from
/// the ones it holds. Returns whether they were found by comparing values.
bool nodes_to_update(const detail::Member& member, const Graph& graph, const Plan& plan, std::vector<NodeId>& out) {
  if (member.graph_uid == graph.uid()) {
    graph.changes_since(member.version, out);
    return false;
  }
  member.applied.differing(graph.description(), plan, out);
  return true;
}

// Whether the executables of `graph` are its own: it holds memory nodes, or asked for them.
bool own_executables(const Plan& plan, const Graph& graph) {
  return plan.graph_memory || graph.description().own_executable;
}

// The cache key of a plan: its topology hash, and for graphs whose executables are their own,
// the Graph too.
std::uint64_t key_of(const Plan& plan, const Graph& graph) {
  if (!own_executables(plan, graph)) return plan.topology_hash;
  lowering::Hasher h;
  h.add(plan.topology_hash);
  h.add(graph.uid());
  return h.finish();
}

bool debug_from_environment() {
  const char* value = std::getenv("FLOWDSL_DEBUG");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

std::string plural(std::size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

DebugError::DebugError(std::string message, std::string node, std::string kernel, cudaError_t code)
    : Error(message), node_(std::move(node)), kernel_(std::move(kernel)), code_(code) {}

std::string LaunchExplanation::text() const {
  auto list = [](const std::vector<std::string>& items, const char* quote) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : ", ") + (quote + item + quote);
    return text;
  };
  const std::string queued =
      busy ? "; it runs after a launch on another stream (each of the " + plural(executables, "executable") +
                 " of this topology is busy and the pool is full)"
           : "";
  switch (kind) {
    case LaunchKind::hit:
      return (compared_values ? "hit: cached, and another graph left parameters equal to this one's (compared by value)"
                              : "hit: cached, no parameter changed") +
             queued;
    case LaunchKind::debug: return "debug: runs node by node with a check after each; the cache is not used";
    case LaunchKind::updated:
    case LaunchKind::reinstantiated:
      return "update: cached, " + plural(updated_nodes.size(), "node") + " to update in place (" +
             list(updated_nodes, "'") + ")" +
             (compared_values ? ", where another graph left other values (compared by value)" : "") + queued;
    case LaunchKind::instantiated: break;
  }
  if (busy) {
    return "miss: the " + plural(executables, "cached executable") +
           " of this topology may still run on other streams; another one is made";
  }
  if (differences.empty()) {
    return own_executables ? "miss: no executable of this graph is cached (its executables are its own)"
                           : "miss: no executable is cached";
  }
  std::string text = "miss: the closest cached executable has " + plural(closest_equal_nodes, "equal node") + "; " +
                     list(differences, "");
  if (difference_count > differences.size()) {
    text += " (and " + std::to_string(difference_count - differences.size()) + " more)";
  }
  return text;
}

struct Runtime::Impl {
  Impl(RuntimeOptions options, std::unique_ptr<Backend> b)
      : debug(options.debug || debug_from_environment()),
        backend(std::move(b)),
        cache(options.capacity),
        pool_bound(options.executables_per_topology == 0 ? 1 : options.executables_per_topology),
        registry(options.registry ? options.registry : &KernelRegistry::global()) {
    if (!backend) throw UsageError("flowdsl: Runtime needs a backend");
  }

  /// A launch to enqueue outside the lock: its executable, in flight until finish(), and whether
  /// to mark the launch's end.
  struct Launch {
    std::shared_ptr<detail::Member> member;
    LaunchReport report;
    bool mark = false;
    std::size_t slot = recent_slots;  ///< the slot of recent it holds and lists on finish(), if any
  };

  Launch prepare(const Graph& graph, cudaStream_t stream, std::unique_lock<std::mutex>& lock);
  void finish(const Launch& go, bool launched, bool marked);
  std::shared_ptr<detail::Member> instantiate(const Graph& graph, const Plan& plan, std::uint64_t key,
                                              const detail::StreamKey& where, cudaStream_t stream);
  LaunchReport synchronise(detail::Member& member, const Graph& graph, const Plan& plan, cudaStream_t stream);
  void check_parameters(const Graph& graph, const Plan& plan, bool compared);
  std::size_t bound(const Plan& plan) const { return plan.graph_memory ? 1 : pool_bound; }
  const detail::Pool* cached(const Plan& plan, const Graph& graph) const;
  void explain_miss(const Plan& plan, const Graph& graph, const lowering::StructureSummary& wanted,
                    LaunchExplanation& out) const;

  // Repeated launches. A Graph launched again on the same stream with nothing changed, whose pool
  // holds one executable, gets what the pool's choice would give (that executable, synchronised
  // with it) from a slot of `recent`, without the lock: the launch claims the slot with one
  // compare-and-swap and hands it back after enqueueing. The slot's other fields are written
  // under the lock while no launch holds it, and read by the launch that does.
  //
  // The slot's state word (detail::SlotState, recent_slot.hpp: its transitions and invariants)
  // lists the address of the executable's Member with two flags: `mark_bit` (each launch's end is
  // marked) and `direct_bit` (`target` is the native executable to launch with cudaGraphLaunch,
  // Executable::direct_launch; else the Executable). A Member whose slot is free is not in
  // flight; the lock's path takes the slots of a pool back (`withdraw`) before choosing from it,
  // and one held then is marked in flight until its holder hands it in.
  static constexpr std::uintptr_t mark_bit = detail::SlotState::mark_bit, direct_bit = detail::SlotState::direct_bit;
  struct alignas(64) Recent {
    detail::SlotState state;
    std::uint64_t graph_uid = 0;
    std::uint64_t version = 0;  ///< the Graph's parameter version its executable holds
    /// The Graph's plan (recent_owners holds it: its address stays unique while listed).
    const Plan* plan = nullptr;
    cudaStream_t stream = nullptr;  ///< of the last launch (never cudaStreamPerThread)
    void* target = nullptr;         ///< a cudaGraphExec_t with direct_bit, else the Executable
    /// Written by the launch holding the slot, read under the lock: the clock at its last launch
    /// (folded into the Member's last_use by settle) and the launches it made.
    std::atomic<std::uint64_t> tick{0};
    std::atomic<std::uint64_t> launches{0};
  };
  static_assert(sizeof(Recent) == 64, "a slot of recent is one cache line");
  static constexpr std::size_t recent_slots = 8;  // by Graph uid
  /// What the lock's side keeps of a slot: the Member (alive while listed, even if evicted), the
  /// plan, the pool's cache key.
  struct RecentOwner {
    std::shared_ptr<detail::Member> member;
    std::shared_ptr<const Plan> plan;
    std::uint64_t key = 0;
    std::uintptr_t flags = 0;  ///< mark_bit, direct_bit: listed with the Member's address
  };

  /// Under the lock: lists `member`, just prepared for this launch of `graph`, in the Graph's
  /// slot as held by this launch (published by finish); false when the slot is held by another.
  bool remember(const Graph& graph, std::uint64_t key, const std::shared_ptr<detail::Member>& member,
                cudaStream_t stream, bool mark);
  /// Under the lock: takes slot `i` back; a launch holding it hands it in (hand_in).
  void withdraw(std::size_t i);
  /// Under the lock: takes back the slots of the pool of `key`.
  void withdraw_pool(std::uint64_t key) {
    for (std::size_t i = 0; i < recent_slots; ++i) {
      if (recent_owners[i].member && recent_owners[i].key == key) withdraw(i);
    }
  }
  /// Under the lock: takes back every slot (an executable enters or leaves the cache).
  void forget_recent() {
    for (std::size_t i = 0; i < recent_slots; ++i) withdraw(i);
  }
  /// Under the lock: the listed Members' last_use as their slots' launches left it.
  void settle() {
    for (std::size_t i = 0; i < recent_slots; ++i) {
      detail::Member* m = recent_owners[i].member.get();
      if (m != nullptr) m->last_use = std::max(m->last_use, recent[i].tick.load(std::memory_order_relaxed));
    }
  }
  /// Takes the lock to finish the withdrawal of slot `i`, held by the calling launch until now.
  void hand_in(std::size_t i);
  /// Hands slot `i` back as `listed` after a launch that held it.
  void hand_back(std::size_t i, std::uintptr_t listed) {
    if (!recent[i].state.give_back(listed)) hand_in(i);
  }
  /// One tick of the recency clock. Launches that hold slots tick it without the lock: two
  /// such launches at once may read the same tick (recency is then a tie between them).
  std::uint64_t tick() {
    const std::uint64_t t = clock.load(std::memory_order_relaxed) + 1;
    clock.store(t, std::memory_order_relaxed);
    return t;
  }

  // What a repeated launch touches comes first (it runs on caches a synchronisation may have
  // emptied): the slots, each a line of its own, then the clock.
  std::array<Recent, recent_slots> recent;
  alignas(64) std::atomic<std::uint64_t> clock{0};  // recency: ticks once per executable chosen
  mutable std::mutex mutex;
  const bool debug;
  std::atomic<std::size_t> waiting{0};  // launches waiting for one (read by finish() without the lock)
  RuntimeStatistics stats;  // without repeated launches, which their slots count (see statistics())
  std::unique_ptr<Backend> backend;
  detail::ExecutableCache cache;
  // Declared after the backend: the executables listed here go before it, as the cache's do.
  std::array<RecentOwner, recent_slots> recent_owners;
  const std::size_t pool_bound;
  std::vector<NodeId> changed;  // scratch, reused across launches: the nodes to update
  std::vector<NodeId> checked;  // scratch: the nodes checked before values found by comparison apply
  const KernelRegistry* registry;
  std::condition_variable released;   // an executable in flight was released
};

const detail::Pool* Runtime::Impl::cached(const Plan& plan, const Graph& graph) const {
  const detail::Pool* pool = cache.find(key_of(plan, graph));
  return pool != nullptr && pool->node_count == plan.position.size() ? pool : nullptr;
}

void Runtime::Impl::explain_miss(const Plan& plan, const Graph& graph, const lowering::StructureSummary& wanted,
                                 LaunchExplanation& out) const {
  out.own_executables = own_executables(plan, graph);
  cache.for_each([&](const detail::Pool& pool) {
    if (out.own_executables && pool.owner != graph.uid()) return;  // never shared: no candidate
    lowering::StructureComparison c = lowering::compare_structure(pool.structure(), wanted, explained_differences);
    const bool closer = out.differences.empty() || c.equal_nodes > out.closest_equal_nodes ||
                        (c.equal_nodes == out.closest_equal_nodes && c.difference_count < out.difference_count);
    if (!closer) return;
    out.closest_equal_nodes = c.equal_nodes;
    out.difference_count = c.difference_count;
    out.differences = std::move(c.differences);
  });
}

std::shared_ptr<detail::Member> Runtime::Impl::instantiate(const Graph& graph, const Plan& plan, std::uint64_t key,
                                                           const detail::StreamKey& where, cudaStream_t stream) {
  const Description& d = graph.description();
  // The plan checked every parameter when it was made (Plan::checked_version), and may predate
  // later changes (it is kept while only parameters change): only those are checked again.
  checked.clear();
  graph.changes_since(plan.checked_version, checked);
  if (!checked.empty()) {
    if (auto problems = validate_parameters(d, checked); !problems.empty()) throw ValidationError(std::move(problems));
  }
  detail::Pool* pool = cache.find(key);
  if (pool == nullptr) {
    if (detail::log().should_log(spdlog::level::debug)) {
      LaunchExplanation why;
      explain_miss(plan, graph, lowering::summarize_structure(d, plan), why);
      FLOWDSL_DEBUG("instantiate topology {:016x}: {} nodes; {}", plan.topology_hash, plan.position.size(), why.text());
    }
  } else {
    FLOWDSL_DEBUG("instantiate topology {:016x} again: its {} executables may still run on other streams",
                  plan.topology_hash, pool->members.size());
  }
  auto member = std::make_shared<detail::Member>();
  member->executable = backend->instantiate(d, plan, stream);
  member->graph_uid = graph.uid();
  member->version = graph.parameter_version();
  member->applied.assign(d, plan);
  member->last_use = tick();
  if (pool == nullptr) {
    pool = &cache.pool(key);
    pool->node_count = plan.position.size();
    pool->owner = own_executables(plan, graph) ? graph.uid() : 0;
    // Shared with the Graph rather than copied: it copies its description before a structural
    // change, and a plan is never changed.
    pool->description = detail::shared_description(graph.state());
    const std::shared_ptr<const Plan>& slot = detail::plan_slot(graph.state());
    pool->plan = slot.get() == &plan ? slot : std::make_shared<const Plan>(plan);
    pool->last_stream = where;
  } else {
    ++stats.busy_misses;
  }
  forget_recent();
  for (const std::uint64_t evicted : cache.add(*pool, member)) {
    ++stats.evictions;
    FLOWDSL_DEBUG("evict executable {:016x}", evicted);
  }
  ++stats.misses;
  if (own_executables(plan, graph)) ++stats.private_executables;
  return member;
}

// Checks the parameters `changed` is about to apply. Values found by comparison are also checked
// where they changed since the plan checked every parameter: one equal to what the executable
// holds may still be invalid in this Graph (e.g. past the end of a buffer it names).
void Runtime::Impl::check_parameters(const Graph& graph, const Plan& plan, bool compared) {
  const std::vector<NodeId>* nodes = &changed;
  if (compared) {
    checked.clear();
    graph.changes_since(plan.checked_version, checked);
    if (!checked.empty()) {
      checked.insert(checked.end(), changed.begin(), changed.end());
      std::sort(checked.begin(), checked.end());
      checked.erase(std::unique(checked.begin(), checked.end()), checked.end());
      nodes = &checked;
    }
  }
  if (nodes->empty()) return;
  if (auto problems = validate_parameters(graph.description(), *nodes); !problems.empty()) {
    throw ValidationError(std::move(problems));
  }
}

LaunchReport Runtime::Impl::synchronise(detail::Member& member, const Graph& graph, const Plan& plan,
                                        cudaStream_t stream) {
  const Description& d = graph.description();
  if (member.graph_uid == graph.uid() && member.version == graph.parameter_version()) {
    FLOWDSL_DEBUG("hit topology {:016x}", plan.topology_hash);
    return {LaunchKind::hit, 0};
  }
  changed.clear();
  const bool compared = nodes_to_update(member, graph, plan, changed);
  check_parameters(graph, plan, compared);
  if (compared) ++stats.value_diffs;
  if (changed.empty()) {  // parameters set again to the values held, or another graph's equal ones
    member.graph_uid = graph.uid();
    member.version = graph.parameter_version();
    FLOWDSL_DEBUG("hit topology {:016x}{}", plan.topology_hash, compared ? " (values compared)" : "");
    return {LaunchKind::hit, 0};
  }

  // Until every update is applied, the executable holds no Graph's parameters exactly.
  member.graph_uid = 0;
  member.applied.begin_updates();
  LaunchReport report{LaunchKind::updated, 0};
  for (NodeId id : changed) {
    if (auto refusal = member.executable->update(d, plan, id)) {
      detail::log().info("update of node {} refused ({}); re-instantiating topology {:016x}",
                         quoted_name(node_path(d, id)), *refusal, plan.topology_hash);
      member.executable = backend->instantiate(d, plan, stream);
      member.marked = false;  // the new executable has never been launched
      member.applied.assign(d, plan);
      ++stats.reinstantiations;
      report = {LaunchKind::reinstantiated, 0, "node " + quoted_name(node_path(d, id)) + ": " + *refusal};
      break;
    }
    member.applied.assign(d, plan, id);
    ++report.nodes_updated;
  }
  if (report.kind == LaunchKind::updated) member.applied.end_updates(d, plan, compared);
  stats.node_updates += report.nodes_updated;
  member.graph_uid = graph.uid();
  member.version = graph.parameter_version();
  FLOWDSL_DEBUG("update topology {:016x}: {} of {} nodes{}", plan.topology_hash, report.nodes_updated,
                plan.position.size(), compared ? " (values compared)" : "");
  return report;
}

Runtime::Impl::Launch Runtime::Impl::prepare(const Graph& graph, cudaStream_t stream,
                                             std::unique_lock<std::mutex>& lock) {
  const Plan& plan = graph.plan();
  const detail::StreamKey where = detail::StreamKey::of(stream);
  Launch out;
  const std::uint64_t key = key_of(plan, graph);
  settle();
  for (;;) {
    // The pool's executables listed in slots are taken back first: one held by a launch is then
    // in flight, the others are the pool's to choose.
    withdraw_pool(key);
    detail::Pool* pool = cache.find(key);
    if (pool != nullptr && pool->node_count != plan.position.size()) {  // 64-bit hash collision
      cache.erase(key);
      forget_recent();
      pool = nullptr;
    }
    detail::Choice choice = pool != nullptr ? pool->choose(graph.uid(), where, bound(plan)) : detail::Choice{};
    if (choice.pick == detail::Pick::wait) {  // every executable is being enqueued by another thread
      // Counted before looking again: finish() clears `in_flight`, then reads `waiting` (both
      // sequentially consistent), so either it sees this wait and notifies under the lock, or
      // the second look sees the executable released.
      ++waiting;
      if (pool->choose(graph.uid(), where, bound(plan)).pick == detail::Pick::wait) released.wait(lock);
      --waiting;
      continue;
    }
    if (choice.member == nullptr) {
      out.member = instantiate(graph, plan, key, where, stream);
      out.report = {LaunchKind::instantiated, 0};
      pool = cache.find(key);
    } else {
      out.member = std::move(choice.member);
      out.member->last_use = tick();
      out.report = synchronise(*out.member, graph, plan, stream);
      ++stats.hits;
      if (choice.pick == detail::Pick::busy) ++stats.busy_launches;
    }
    // From the first launch of the topology on a second stream on, every launch's end is marked.
    pool->several_streams = pool->several_streams || (bound(plan) > 1 && pool->last_stream != where);
    pool->last_stream = where;
    out.mark = pool->several_streams;
    out.member->stream = where;
    out.member->in_flight.store(true, std::memory_order_relaxed);  // published by the unlock
    ++stats.launches;
    if (pool->members.size() == 1 && remember(graph, key, out.member, stream, out.mark)) {
      out.slot = graph.uid() % recent_slots;
    }
    return out;
  }
}

bool Runtime::Impl::remember(const Graph& graph, std::uint64_t key, const std::shared_ptr<detail::Member>& member,
                             cudaStream_t stream, bool mark) {
  if (stream == cudaStreamPerThread) return false;  // one handle, a stream per thread: not listed
  const std::size_t i = graph.uid() % recent_slots;
  withdraw(i);
  Recent& r = recent[i];
  if (r.state.load() != detail::SlotState::empty) return false;  // held by another Graph's launch
  RecentOwner& owner = recent_owners[i];
  const std::shared_ptr<const Plan>& plan = detail::plan_slot(graph.state());
  if (owner.plan != plan) owner.plan = plan;
  owner.member = member;
  owner.key = key;
  r.plan = plan.get();
  r.graph_uid = graph.uid();
  r.version = graph.parameter_version();
  r.stream = stream;
  const cudaGraphExec_t direct = mark ? nullptr : member->executable->direct_launch();
  r.target = direct != nullptr ? static_cast<void*>(direct) : static_cast<void*>(member->executable.get());
  owner.flags = (mark ? mark_bit : 0) | (direct != nullptr ? direct_bit : 0);
  r.tick.store(member->last_use, std::memory_order_relaxed);
  r.state.hold();  // by this launch, until finish()
  return true;
}

void Runtime::Impl::withdraw(std::size_t i) {
  Recent& r = recent[i];
  RecentOwner& owner = recent_owners[i];
  switch (r.state.withdraw()) {
    case detail::SlotState::Withdrawn::nothing:
      return;
    case detail::SlotState::Withdrawn::from_holder:
      // A launch is using it: in flight until it hands the slot in (hand_in).
      owner.member->last_use = std::max(owner.member->last_use, r.tick.load(std::memory_order_relaxed));
      owner.member->in_flight.store(true, std::memory_order_relaxed);
      return;
    case detail::SlotState::Withdrawn::from_list:
      owner.member->last_use = std::max(owner.member->last_use, r.tick.load(std::memory_order_relaxed));
      owner.member.reset();
      return;
  }
}

void Runtime::Impl::hand_in(std::size_t i) {
  std::lock_guard lock(mutex);
  RecentOwner& owner = recent_owners[i];
  owner.member->in_flight.store(false, std::memory_order_relaxed);
  owner.member.reset();  // the last owner of an executable evicted meanwhile
  recent[i].state.release();
  released.notify_all();
}

// Runs without the runtime's lock. prepare() counted the launch; one that failed is taken back.
void Runtime::Impl::finish(const Launch& go, bool launched, bool marked) {
  detail::Member& member = *go.member;
  if (go.slot < recent_slots) {
    // Listed under the lock: a launch that took the slot back meanwhile (withdraw) marked the
    // executable in flight for this one, which clears it here and nowhere else.
    std::lock_guard lock(mutex);
    member.marked = marked;
    member.in_flight.store(false, std::memory_order_relaxed);
    Recent& r = recent[go.slot];
    const std::uintptr_t listed = reinterpret_cast<std::uintptr_t>(&member) | recent_owners[go.slot].flags;
    if (!r.state.publish(listed)) recent_owners[go.slot].member.reset();  // withdrawn meanwhile
    if (!launched) --stats.launches;
    released.notify_all();
    return;
  }
  member.marked = marked;
  member.in_flight = false;  // publishes `marked`
  if (waiting > 0 || !launched) {
    std::lock_guard lock(mutex);
    if (!launched) --stats.launches;
    released.notify_all();
  }
}

Runtime::Runtime(RuntimeOptions options) : Runtime(options, make_cuda_backend()) {}

Runtime::Runtime(RuntimeOptions options, std::unique_ptr<Backend> backend)
    : impl_(std::make_unique<Impl>(options, std::move(backend))) {}

Runtime::~Runtime() = default;

LaunchReport Runtime::launch(const Graph& graph, cudaStream_t stream) {
  Impl& impl = *impl_;
  {
    // A repeated launch (Impl::Recent): its slot claimed, checked and handed back, no lock.
    const detail::GraphState& state = graph.state();
    const std::size_t i = state.uid() % Impl::recent_slots;
    Impl::Recent& r = impl.recent[i];
    if (const std::uintptr_t listed = r.state.claim(); listed != detail::SlotState::empty) {
      if (r.graph_uid == state.uid() && r.version == state.parameter_version() && r.plan == state.plan().get() &&
          r.stream == stream) {
        // Counted as the lock's path counts: a hit, and a launch once the launch is enqueued.
        const auto count = [&] {
          r.tick.store(impl.tick(), std::memory_order_relaxed);
          r.launches.store(r.launches.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        };
        bool launched = false;
        try {
          if ((listed & Impl::direct_bit) != 0) {
            check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(r.target), stream), "cudaGraphLaunch");
            launched = true;
          } else {
            auto* executable = static_cast<Executable*>(r.target);
            executable->launch(stream);
            launched = true;
            if ((listed & Impl::mark_bit) != 0) executable->mark_end(stream);
          }
        } catch (...) {
          if (launched) {
            count();
          } else {
            std::lock_guard lock(impl.mutex);
            ++impl.stats.hits;  // it had its executable; not a launch
          }
          impl.hand_back(i, listed);
          throw;
        }
        count();
        impl.hand_back(i, listed);
        return {LaunchKind::hit, 0};  // not traced: the logger's lines are not worth a repeated launch's time
      }
      impl.hand_back(i, listed);
    }
  }
  std::unique_lock lock(impl.mutex);
  if (impl.debug) {
    detail::launch_debug(graph, stream, *impl.registry);
    ++impl.stats.debug_launches;
    ++impl.stats.launches;
    return {LaunchKind::debug, 0};
  }
  Impl::Launch go = impl.prepare(graph, stream, lock);
  // Enqueued outside the lock: no other launch gets this executable until finish().
  lock.unlock();
  bool launched = false;
  try {
    go.member->executable->launch(stream);
    launched = true;
    if (go.mark) go.member->executable->mark_end(stream);
  } catch (...) {
    impl.finish(go, launched, false);
    throw;
  }
  impl.finish(go, true, go.mark);
  return go.report;
}

LaunchReport Runtime::prepare(const Graph& graph, cudaStream_t stream) {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  if (impl.debug) return {LaunchKind::debug, 0};
  const Plan& plan = graph.plan();
  const std::uint64_t key = key_of(plan, graph);
  if (const detail::Pool* pool = impl.cache.find(key); pool != nullptr) {
    if (pool->node_count == plan.position.size()) return {LaunchKind::hit, 0};
    impl.cache.erase(key);  // a 64-bit hash collision, as in Impl::prepare
    impl.forget_recent();
  }
  impl.settle();
  impl.instantiate(graph, plan, key, detail::StreamKey::of(stream), stream);
  ++impl.stats.prepared;
  return {LaunchKind::instantiated, 0};
}

LaunchExplanation Runtime::explain(const Graph& graph, cudaStream_t stream) const {
  std::lock_guard lock(impl_->mutex);
  impl_->settle();
  const Plan& plan = graph.plan();
  LaunchExplanation out;
  if (impl_->debug) {
    out.kind = LaunchKind::debug;
    return out;
  }
  const Description& d = graph.description();
  const detail::Pool* pool = impl_->cached(plan, graph);
  if (pool == nullptr) {
    out.kind = LaunchKind::instantiated;
    impl_->explain_miss(plan, graph, lowering::summarize_structure(d, plan), out);
    return out;
  }
  out.own_executables = own_executables(plan, graph);
  out.executables = pool->members.size();
  detail::Choice choice = pool->choose(graph.uid(), detail::StreamKey::of(stream), impl_->bound(plan));
  if (choice.pick == detail::Pick::wait) choice = {pool->least_recent(), detail::Pick::busy};
  out.busy = choice.pick == detail::Pick::busy || choice.pick == detail::Pick::none;
  if (choice.member == nullptr) {
    out.kind = LaunchKind::instantiated;
    return out;
  }
  std::vector<NodeId> changed;
  out.compared_values = nodes_to_update(*choice.member, graph, plan, changed);
  out.kind = changed.empty() ? LaunchKind::hit : LaunchKind::updated;
  for (NodeId id : changed) out.updated_nodes.push_back(node_path(d, id));
  return out;
}

bool Runtime::debug() const noexcept { return impl_->debug; }

bool Runtime::inspect_executable(const Graph& graph, const std::function<void(const Executable&)>& visit) const {
  std::lock_guard lock(impl_->mutex);
  if (impl_->debug) return false;
  impl_->settle();
  const detail::Pool* pool = impl_->cached(graph.plan(), graph);
  if (pool == nullptr) return false;
  // The executable this Graph's launches last used: of those synchronised with it, the one
  // chosen last; else (another Graph launched since) the one chosen last.
  const detail::Member* pick = nullptr;
  for (const auto& member : pool->members) {
    const bool own = member->graph_uid == graph.uid();
    const bool pick_own = pick != nullptr && pick->graph_uid == graph.uid();
    if (pick == nullptr || (own && !pick_own) || (own == pick_own && member->last_use > pick->last_use)) {
      pick = member.get();
    }
  }
  if (pick == nullptr) return false;
  visit(*pick->executable);
  return true;
}

RuntimeStatistics Runtime::statistics() const {
  std::lock_guard lock(impl_->mutex);
  RuntimeStatistics s = impl_->stats;
  impl_->cache.for_each([&](const detail::Pool& pool) {
    for (const auto& member : pool.members) s.executable_bytes += member->executable->device_memory();
  });
  for (const Impl::Recent& r : impl_->recent) {
    const std::uint64_t repeated = r.launches.load(std::memory_order_relaxed);
    s.hits += repeated;
    s.launches += repeated;
  }
  return s;
}

std::size_t Runtime::size() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cache.size();
}

std::size_t Runtime::capacity() const noexcept { return impl_->cache.capacity(); }

void Runtime::clear() {
  std::lock_guard lock(impl_->mutex);
  impl_->cache.clear();
  impl_->forget_recent();
}

}  // namespace flowdsl
