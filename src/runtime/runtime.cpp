// Runtime: the executable cache (hit, update, miss, re-instantiation, eviction) over a backend.
#include "flowdsl/runtime.hpp"

#include <mutex>

#include "log_internal.hpp"
#include "lru_cache.hpp"

namespace flowdsl {
namespace {

/// A cached executable and what it was last synchronised with: the parameters of graph
/// `graph_uid` as of `version`.
struct Entry {
  std::unique_ptr<Executable> executable;
  std::uint64_t graph_uid = 0;
  std::uint64_t version = 0;
  std::size_t node_count = 0;
};

}  // namespace

struct Runtime::Impl {
  Impl(RuntimeOptions options, std::unique_ptr<Backend> b) : backend(std::move(b)), cache(options.capacity) {
    if (!backend) throw UsageError("flowdsl: Runtime needs a backend");
  }

  Entry& instantiate(const Graph& graph, const Plan& plan, cudaStream_t stream);
  LaunchReport synchronise(Entry& entry, const Graph& graph, const Plan& plan, cudaStream_t stream);

  std::unique_ptr<Backend> backend;
  detail::LruCache<Entry> cache;
  RuntimeStatistics stats;
  std::vector<NodeId> changed;  // scratch, reused across launches
  mutable std::mutex mutex;
};

Entry& Runtime::Impl::instantiate(const Graph& graph, const Plan& plan, cudaStream_t stream) {
  // The plan may predate parameter changes (it is kept while only parameters change).
  if (auto problems = validate_parameters(graph.description()); !problems.empty()) {
    throw ValidationError(std::move(problems));
  }
  FLOWDSL_DEBUG("instantiate topology {:016x}: {} nodes", plan.topology_hash, plan.position.size());
  Entry entry{backend->instantiate(graph.description(), plan, stream), graph.uid(), graph.parameter_version(),
              plan.position.size()};
  if (const auto evicted = cache.insert(plan.topology_hash, std::move(entry))) {
    ++stats.evictions;
    FLOWDSL_DEBUG("evict topology {:016x}", *evicted);
  }
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
    if (auto refusal = entry.executable->update(d, id, plan.position[id])) {
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
  const Plan& plan = graph.plan();
  Entry* entry = impl_->cache.find(plan.topology_hash);
  if (entry != nullptr && entry->node_count != plan.position.size()) {  // 64-bit hash collision
    impl_->cache.erase(plan.topology_hash);
    entry = nullptr;
  }
  LaunchReport report{LaunchKind::instantiated, 0};
  if (entry == nullptr) {
    entry = &impl_->instantiate(graph, plan, stream);
    ++impl_->stats.misses;
  } else {
    report = impl_->synchronise(*entry, graph, plan, stream);
    ++impl_->stats.hits;
  }
  entry->executable->launch(stream);
  ++impl_->stats.launches;
  return report;
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
