// Runtime: the executable cache (hit, update, miss, re-instantiation, eviction) over a backend.
#include "flowdsl/runtime.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "debug_launch.hpp"
#include "log_internal.hpp"
#include "lower/hasher.hpp"
#include "lower/structure.hpp"
#include "lru_cache.hpp"

namespace flowdsl {
namespace {

constexpr std::size_t explained_differences = 3;

/// A cached executable and what it was last synchronised with: the parameters of graph
/// `graph_uid` as of `version`; and its structure, to explain misses of other topologies.
struct Entry {
  std::unique_ptr<Executable> executable;
  std::uint64_t graph_uid = 0;
  std::uint64_t version = 0;
  std::size_t node_count = 0;
  lowering::StructureSummary structure;
};

// The cache key of a plan: its topology hash, and for graphs holding memory nodes, whose
// executables are never shared, the Graph too.
std::uint64_t key_of(const Plan& plan, const Graph& graph) {
  if (!plan.graph_memory) return plan.topology_hash;
  lowering::Hasher h;
  h.add(plan.topology_hash);
  h.add(graph.uid());
  return h.finish();
}

bool debug_from_environment() {
  const char* value = std::getenv("FLOWDSL_DEBUG");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

}  // namespace

DebugError::DebugError(std::string message, std::string node, std::string kernel, cudaError_t code)
    : Error(std::move(message)), node_(std::move(node)), kernel_(std::move(kernel)), code_(code) {}

std::string LaunchExplanation::text() const {
  auto list = [](const std::vector<std::string>& items, const char* quote) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : ", ") + (quote + item + quote);
    return text;
  };
  switch (kind) {
    case LaunchKind::hit: return "hit: cached, no parameter changed";
    case LaunchKind::debug: return "debug: runs node by node with a check after each; the cache is not used";
    case LaunchKind::updated:
    case LaunchKind::reinstantiated:
      return "update: cached, " + std::to_string(updated_nodes.size()) + " node" +
             (updated_nodes.size() == 1 ? "" : "s") + " to update in place (" + list(updated_nodes, "'") + ")";
    case LaunchKind::instantiated: break;
  }
  if (differences.empty()) {
    return own_executables ? "miss: no executable of this graph is cached (it holds memory nodes: its executables are its own)"
                           : "miss: no executable is cached";
  }
  std::string text = "miss: the closest cached executable has " + std::to_string(closest_equal_nodes) +
                     " equal node" + (closest_equal_nodes == 1 ? "" : "s") + "; " + list(differences, "");
  if (difference_count > differences.size()) {
    text += " (and " + std::to_string(difference_count - differences.size()) + " more)";
  }
  return text;
}

struct Runtime::Impl {
  Impl(RuntimeOptions options, std::unique_ptr<Backend> b)
      : backend(std::move(b)),
        cache(options.capacity),
        debug(options.debug || debug_from_environment()),
        registry(options.registry ? options.registry : &KernelRegistry::global()) {
    if (!backend) throw UsageError("flowdsl: Runtime needs a backend");
  }

  Entry& instantiate(const Graph& graph, const Plan& plan, std::uint64_t key, cudaStream_t stream);
  LaunchReport synchronise(Entry& entry, const Graph& graph, const Plan& plan, cudaStream_t stream);
  const Entry* cached(const Plan& plan, const Graph& graph) const;
  void explain_miss(const Plan& plan, const Graph& graph, const lowering::StructureSummary& wanted,
                    LaunchExplanation& out) const;

  std::unique_ptr<Backend> backend;
  detail::LruCache<Entry> cache;
  RuntimeStatistics stats;
  std::vector<NodeId> changed;  // scratch, reused across launches
  const bool debug;
  const KernelRegistry* registry;
  mutable std::mutex mutex;
};

const Entry* Runtime::Impl::cached(const Plan& plan, const Graph& graph) const {
  const Entry* entry = cache.peek(key_of(plan, graph));
  return entry != nullptr && entry->node_count == plan.position.size() ? entry : nullptr;
}

void Runtime::Impl::explain_miss(const Plan& plan, const Graph& graph, const lowering::StructureSummary& wanted,
                                 LaunchExplanation& out) const {
  out.own_executables = plan.graph_memory;
  cache.for_each([&](const Entry& entry) {
    if (plan.graph_memory && entry.graph_uid != graph.uid()) return;  // never shared: no candidate
    lowering::StructureComparison c = lowering::compare_structure(entry.structure, wanted, explained_differences);
    const bool closer = out.differences.empty() || c.equal_nodes > out.closest_equal_nodes ||
                        (c.equal_nodes == out.closest_equal_nodes && c.difference_count < out.difference_count);
    if (!closer) return;
    out.closest_equal_nodes = c.equal_nodes;
    out.difference_count = c.difference_count;
    out.differences = std::move(c.differences);
  });
}

Entry& Runtime::Impl::instantiate(const Graph& graph, const Plan& plan, std::uint64_t key, cudaStream_t stream) {
  // The plan may predate parameter changes (it is kept while only parameters change).
  if (auto problems = validate_parameters(graph.description()); !problems.empty()) {
    throw ValidationError(std::move(problems));
  }
  lowering::StructureSummary structure = lowering::summarize_structure(graph.description(), plan);
  if (detail::log().should_log(spdlog::level::debug)) {
    LaunchExplanation why;
    explain_miss(plan, graph, structure, why);
    FLOWDSL_DEBUG("instantiate topology {:016x}: {} nodes; {}", plan.topology_hash, plan.position.size(), why.text());
  }
  Entry entry{backend->instantiate(graph.description(), plan, stream), graph.uid(), graph.parameter_version(),
              plan.position.size(), std::move(structure)};
  if (const auto evicted = cache.insert(key, std::move(entry))) {
    ++stats.evictions;
    FLOWDSL_DEBUG("evict executable {:016x}", *evicted);
  }
  if (plan.graph_memory) ++stats.private_executables;
  return cache.front();
}

LaunchReport Runtime::Impl::synchronise(Entry& entry, const Graph& graph, const Plan& plan, cudaStream_t stream) {
  const Description& d = graph.description();
  const bool same_graph = entry.graph_uid == graph.uid();
  if (same_graph && entry.version == graph.parameter_version()) {
    FLOWDSL_DEBUG("hit topology {:016x}", plan.topology_hash);
    return {LaunchKind::hit, 0};
  }
  changed.clear();
  if (same_graph) {
    graph.changes_since(entry.version, changed);
  } else {  // another graph of the same topology: every node, in every body, may differ
    for (NodeId id = 0; id < d.nodes.size(); ++id) changed.push_back(id);
  }
  if (changed.empty()) {  // parameters were set again to the values held
    entry.version = graph.parameter_version();
    return {LaunchKind::hit, 0};
  }
  if (auto problems = validate_parameters(d, changed); !problems.empty()) throw ValidationError(std::move(problems));

  LaunchReport report{LaunchKind::updated, 0};
  for (NodeId id : changed) {
    if (auto refusal = entry.executable->update(d, plan, id)) {
      detail::log().info("update of node '{}' refused ({}); re-instantiating topology {:016x}", node_path(d, id),
                         *refusal, plan.topology_hash);
      entry.executable = backend->instantiate(d, plan, stream);
      ++stats.reinstantiations;
      report = {LaunchKind::reinstantiated, 0};
      break;
    }
    ++report.nodes_updated;
  }
  stats.node_updates += report.nodes_updated;
  entry.graph_uid = graph.uid();
  entry.version = graph.parameter_version();
  FLOWDSL_DEBUG("update topology {:016x}: {} of {} nodes", plan.topology_hash, report.nodes_updated,
                plan.position.size());
  return report;
}

Runtime::Runtime(RuntimeOptions options) : Runtime(options, make_cuda_backend()) {}

Runtime::Runtime(RuntimeOptions options, std::unique_ptr<Backend> backend)
    : impl_(std::make_unique<Impl>(options, std::move(backend))) {}

Runtime::~Runtime() = default;

LaunchReport Runtime::launch(const Graph& graph, cudaStream_t stream) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->debug) {
    detail::launch_debug(graph, stream, *impl_->registry);
    ++impl_->stats.debug_launches;
    ++impl_->stats.launches;
    return {LaunchKind::debug, 0};
  }
  const Plan& plan = graph.plan();
  const std::uint64_t key = key_of(plan, graph);
  Entry* entry = impl_->cache.find(key);
  if (entry != nullptr && entry->node_count != plan.position.size()) {  // 64-bit hash collision
    impl_->cache.erase(key);
    entry = nullptr;
  }
  LaunchReport report{LaunchKind::instantiated, 0};
  if (entry == nullptr) {
    entry = &impl_->instantiate(graph, plan, key, stream);
    ++impl_->stats.misses;
  } else {
    report = impl_->synchronise(*entry, graph, plan, stream);
    ++impl_->stats.hits;
  }
  entry->executable->launch(stream);
  ++impl_->stats.launches;
  return report;
}

LaunchExplanation Runtime::explain(const Graph& graph) const {
  std::lock_guard lock(impl_->mutex);
  const Plan& plan = graph.plan();
  LaunchExplanation out;
  if (impl_->debug) {
    out.kind = LaunchKind::debug;
    return out;
  }
  const Description& d = graph.description();
  const Entry* entry = impl_->cached(plan, graph);
  if (entry == nullptr) {
    out.kind = LaunchKind::instantiated;
    impl_->explain_miss(plan, graph, lowering::summarize_structure(d, plan), out);
    return out;
  }
  std::vector<NodeId> changed;
  if (entry->graph_uid == graph.uid()) {
    graph.changes_since(entry->version, changed);
  } else {
    for (NodeId id = 0; id < d.nodes.size(); ++id) changed.push_back(id);
  }
  out.kind = changed.empty() ? LaunchKind::hit : LaunchKind::updated;
  for (NodeId id : changed) out.updated_nodes.push_back(node_path(d, id));
  return out;
}

bool Runtime::debug() const noexcept { return impl_->debug; }

bool Runtime::inspect_executable(const Graph& graph, const std::function<void(const Executable&)>& visit) const {
  std::lock_guard lock(impl_->mutex);
  if (impl_->debug) return false;
  const Entry* entry = impl_->cached(graph.plan(), graph);
  if (entry == nullptr) return false;
  visit(*entry->executable);
  return true;
}

RuntimeStatistics Runtime::statistics() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

std::size_t Runtime::size() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cache.size();
}

std::size_t Runtime::capacity() const noexcept { return impl_->cache.capacity(); }

void Runtime::clear() {
  std::lock_guard lock(impl_->mutex);
  impl_->cache.clear();
}

}  // namespace flowdsl
