// SPDX-License-Identifier: Apache-2.0
// The runtime's cache decisions on random scenarios, against an independent model of its policy:
// random DAGs of every node kind, several Graph objects per topology taking turns (each updating
// only the nodes whose values differ from the executable's), random parameter changes,
// structural changes, copies, refused updates and invalid parameters. After
// every launch the report, the statistics and the nodes the executable was asked to update must
// be what the model predicts. No GPU: the backend only records what it is asked to do.
#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;

namespace {

// ---------------------------------------------------------------------------------------------
// Random numbers: our own reduction of mt19937_64, so a seed gives the same scenario with any
// standard library.

using Rng = std::mt19937_64;

std::uint32_t uniform(Rng& rng, std::uint32_t lo, std::uint32_t hi) {  // in [lo, hi]
  return lo + static_cast<std::uint32_t>(rng() % (std::uint64_t{hi} - lo + 1));
}
bool chance(Rng& rng, std::uint32_t percent) { return uniform(rng, 1, 100) <= percent; }

// ---------------------------------------------------------------------------------------------
// What the nodes point at. Nothing runs: the values only have to be valid and to vary.

void saxpy(float*, const float*, float, int) {}
void add(float*, const float*, const float*, int) {}
void host_a(void*) {}
void host_b(void*) {}

float arena[1024];

float* some_pointer(Rng& rng) { return arena + uniform(rng, 0, 1000); }
float some_scalar(Rng& rng) { return static_cast<float>(uniform(rng, 0, 64)) - 32.0f; }
int some_count(Rng& rng) { return static_cast<int>(uniform(rng, 1, 64)); }
void (*some_host_function(Rng& rng))(void*) { return chance(rng, 50) ? host_a : host_b; }

// ---------------------------------------------------------------------------------------------
// The topology as the test sees it. Nodes are declared in id order and every edge goes from a
// lower id to a higher one, so the plan's canonical order is the declaration order: a node's
// plan position is its id.

using SaxpyNode = flowdsl::KernelNode<float*, const float*, float, int>;
using AddNode = flowdsl::KernelNode<float*, const float*, const float*, int>;
/// One handle per node; the alternative's index is the node's Kind.
using Handle = std::variant<SaxpyNode, AddNode, flowdsl::MemcpyNode, flowdsl::MemsetNode, flowdsl::NodeHandle,
                            flowdsl::HostNode>;
enum Kind : std::uint32_t { saxpy_kernel, add_kernel, memcpy_node, memset_node, empty_node, host_node, kind_count };

struct NodeSpec {
  Kind kind = empty_node;
  std::uint32_t grid = 1;          // kernels
  std::uint32_t element_size = 1;  // memsets
  std::set<flowdsl::NodeId> deps;  // all lower than the node's id
};

struct Topology {
  std::vector<NodeSpec> nodes;

  /// Everything the topology hash covers, as a map key: equal keys must hash equal, others not.
  std::vector<std::uint32_t> key() const {
    std::vector<std::uint32_t> k;
    for (const NodeSpec& n : nodes) {
      k.insert(k.end(), {n.kind, n.grid, n.element_size, static_cast<std::uint32_t>(n.deps.size())});
      k.insert(k.end(), n.deps.begin(), n.deps.end());
    }
    return k;
  }
};

NodeSpec random_node(Rng& rng, flowdsl::NodeId id, std::uint32_t window) {
  NodeSpec n;
  n.kind = static_cast<Kind>(uniform(rng, 0, kind_count - 1));
  // Only a kernel has a grid and only a memset an element size: the others keep the defaults,
  // so that equal topologies have equal keys.
  if (n.kind == saxpy_kernel || n.kind == add_kernel) n.grid = uniform(rng, 1, 3);
  if (n.kind == memset_node) n.element_size = std::uint32_t{1} << uniform(rng, 0, 2);
  const flowdsl::NodeId first = id > window ? id - window : 0;
  for (std::uint32_t d = id == 0 ? 0 : uniform(rng, 0, 3); d > 0; --d) n.deps.insert(uniform(rng, first, id - 1));
  return n;
}

/// A DAG of 1..300 nodes whose edges reach back at most `2 * width` nodes (width 1..16).
Topology random_topology(Rng& rng) {
  const std::uint32_t width = uniform(rng, 1, 16);
  const std::uint32_t count = chance(rng, 20) ? uniform(rng, 1, 8) : uniform(rng, 1, 300);
  Topology t;
  for (flowdsl::NodeId id = 0; id < count; ++id) t.nodes.push_back(random_node(rng, id, 2 * width));
  return t;
}

// ---------------------------------------------------------------------------------------------
// One Graph object with its handles, and the model's view of its parameter changes.

struct Instance {
  Topology topology;
  flowdsl::Graph graph;
  std::vector<Handle> handles;
  std::uint64_t version = 0;             // model: one per parameter change
  std::vector<std::uint64_t> last_change;  // model: per node, the version of its last change
};

flowdsl::NodeHandle plain(const Handle& h) {
  return std::visit([](const auto& typed) { return flowdsl::NodeHandle(typed); }, h);
}

Handle declare(flowdsl::Graph& g, const NodeSpec& spec, flowdsl::NodeId id, Rng& rng) {
  const std::string name = "n" + std::to_string(id);
  switch (spec.kind) {
    case saxpy_kernel:
      return g.kernel(name, saxpy).grid(spec.grid).block(1).args(some_pointer(rng), some_pointer(rng), some_scalar(rng),
                                                        some_count(rng));
    case add_kernel:
      return g.kernel(name, add).grid(spec.grid).block(1).args(some_pointer(rng), some_pointer(rng), some_pointer(rng),
                                                      some_count(rng));
    case memcpy_node:
      return g.memcpy(name, some_pointer(rng), some_pointer(rng), sizeof(float) * uniform(rng, 1, 16));
    case memset_node:
      return g.memset(name, some_pointer(rng), uniform(rng, 0, 255), uniform(rng, 1, 16), spec.element_size);
    case empty_node:
      return g.empty(name);
    default:
      return g.host(name, some_host_function(rng), some_pointer(rng));
  }
}

/// Declares the next node of `spec` in `inst` (graph, handles and model).
void append_node(Instance& inst, const NodeSpec& spec, Rng& rng) {
  const auto id = static_cast<flowdsl::NodeId>(inst.handles.size());
  inst.handles.push_back(declare(inst.graph, spec, id, rng));
  for (flowdsl::NodeId dep : spec.deps) plain(inst.handles[id]).after(plain(inst.handles[dep]));
  inst.last_change.push_back(0);
  inst.version = inst.graph.parameter_version();  // declaring binds arguments: changes no launch has seen
}

Instance build(const Topology& topology, Rng& rng) {
  Instance inst;
  // Random pointers into one fake range race freely; this test is about the cache, and the gpu
  // differential test keeps its graphs free of hazards (and checked).
  inst.graph.check_hazards(false);
  for (const NodeSpec& spec : topology.nodes) append_node(inst, spec, rng);
  inst.topology = topology;
  return inst;
}

// ---------------------------------------------------------------------------------------------
// Parameter changes through the handles. Each setter call is one change: one version.

template <class T>
T current_arg(const flowdsl::Graph& g, flowdsl::NodeId id, std::size_t index) {
  T value;
  std::memcpy(&value, std::get<flowdsl::KernelOp>(g.description().nodes[id].op).args.data(index), sizeof(T));
  return value;
}

/// A new value for one argument (or all of them) of a kernel node of either signature.
template <class Node>
void change_kernel(Node& k, Rng& rng) {
  switch (uniform(rng, 0, 4)) {
    case 0: k.template arg<0>(some_pointer(rng)); break;
    case 1: k.template arg<1>(some_pointer(rng)); break;
    case 2:
      if constexpr (std::is_same_v<Node, SaxpyNode>) {
        k.template arg<2>(some_scalar(rng));
      } else {
        k.template arg<2>(some_pointer(rng));
      }
      break;
    case 3: k.template arg<3>(some_count(rng)); break;
    default:
      if constexpr (std::is_same_v<Node, SaxpyNode>) {
        k.args(some_pointer(rng), some_pointer(rng), some_scalar(rng), some_count(rng));
      } else {
        k.args(some_pointer(rng), some_pointer(rng), some_pointer(rng), some_count(rng));
      }
  }
}

/// Sets the parameters of node `id` to new random values (`same`: to the values it holds).
/// An empty node has none: nothing changes.
void change_parameters(Instance& inst, flowdsl::NodeId id, bool same, Rng& rng) {
  const flowdsl::Operation& op = inst.graph.description().nodes[id].op;
  Handle& h = inst.handles[id];
  switch (static_cast<Kind>(h.index())) {
    case saxpy_kernel:
      if (same) std::get<SaxpyNode>(h).arg<2>(current_arg<float>(inst.graph, id, 2));
      else change_kernel(std::get<SaxpyNode>(h), rng);
      break;
    case add_kernel:
      if (same) std::get<AddNode>(h).arg<3>(current_arg<int>(inst.graph, id, 3));
      else change_kernel(std::get<AddNode>(h), rng);
      break;
    case memcpy_node: {
      const auto& m = std::get<flowdsl::MemcpyOp>(op);
      if (same) std::get<flowdsl::MemcpyNode>(h).set(m.dst, m.src, m.bytes);
      else std::get<flowdsl::MemcpyNode>(h).set(some_pointer(rng), some_pointer(rng), sizeof(float) * uniform(rng, 1, 16));
      break;
    }
    case memset_node: {
      const auto& m = std::get<flowdsl::MemsetOp>(op);
      if (same) std::get<flowdsl::MemsetNode>(h).set(m.dst, m.value, m.count);
      else std::get<flowdsl::MemsetNode>(h).set(some_pointer(rng), uniform(rng, 0, 255), uniform(rng, 1, 16));
      break;
    }
    case host_node: {
      const auto& m = std::get<flowdsl::HostOp>(op);
      if (same) std::get<flowdsl::HostNode>(h).set(m.fn, m.user_data);
      else std::get<flowdsl::HostNode>(h).set(some_host_function(rng), some_pointer(rng));
      break;
    }
    default:
      return;
  }
  inst.last_change[id] = ++inst.version;
}

/// Makes a parameter of node `id` (a memcpy or memset) invalid; returns the expected message.
std::string break_parameters(Instance& inst, flowdsl::NodeId id) {
  const std::string name = "node 'n" + std::to_string(id) + "' ";
  inst.last_change[id] = ++inst.version;
  if (auto* copy = std::get_if<flowdsl::MemcpyNode>(&inst.handles[id])) {
    copy->set(arena, nullptr, 4);
    return name + "(memcpy): source pointer is null";
  }
  std::get<flowdsl::MemsetNode>(inst.handles[id]).set(arena, 0, 0);
  return name + "(memset): sets zero elements";
}

// ---------------------------------------------------------------------------------------------
// Structural changes: each gives the instance a new topology (or an earlier one back).

void toggle_grid(Instance& inst, flowdsl::NodeId id) {
  NodeSpec& spec = inst.topology.nodes[id];
  spec.grid = spec.grid == 1 ? 2 : 1;
  if (auto* k = std::get_if<SaxpyNode>(&inst.handles[id])) k->grid(spec.grid);
  else std::get<AddNode>(inst.handles[id]).grid(spec.grid);
}

void add_edge(Instance& inst, flowdsl::NodeId from, flowdsl::NodeId to) {
  inst.topology.nodes[to].deps.insert(from);
  plain(inst.handles[to]).after(plain(inst.handles[from]));
}

/// One random structural change; false when the chosen one does not apply to this topology.
bool change_structure(Instance& inst, Rng& rng) {
  const auto count = static_cast<flowdsl::NodeId>(inst.handles.size());
  const flowdsl::NodeId id = uniform(rng, 0, count - 1);
  switch (uniform(rng, 0, 2)) {
    case 0:
      if (inst.topology.nodes[id].kind > add_kernel) return false;
      toggle_grid(inst, id);
      return true;
    case 1: {
      if (id == 0) return false;
      const flowdsl::NodeId from = uniform(rng, 0, id - 1);
      if (inst.topology.nodes[id].deps.count(from)) return false;  // a duplicate edge changes nothing
      add_edge(inst, from, id);
      return true;
    }
    default: {
      const NodeSpec spec = random_node(rng, count, 32);
      append_node(inst, spec, rng);
      inst.topology.nodes.push_back(spec);
      return true;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The model's view of a node's parameters: the values its handle set, as words (a float by its
// bits, as CUDA receives it). Read from the description, but by the test's own knowledge of
// each kind's fields.

template <class T>
std::uint64_t word(T value) {
  std::uint64_t w = 0;
  std::memcpy(&w, &value, sizeof value);
  return w;
}

std::vector<std::uint64_t> parameters_of(const Instance& inst, flowdsl::NodeId id) {
  const flowdsl::Graph& g = inst.graph;
  const flowdsl::Operation& op = g.description().nodes[id].op;
  switch (static_cast<Kind>(inst.handles[id].index())) {
    case saxpy_kernel:
      return {word(current_arg<float*>(g, id, 0)), word(current_arg<const float*>(g, id, 1)),
              word(current_arg<float>(g, id, 2)), word(current_arg<int>(g, id, 3))};
    case add_kernel:
      return {word(current_arg<float*>(g, id, 0)), word(current_arg<const float*>(g, id, 1)),
              word(current_arg<const float*>(g, id, 2)), word(current_arg<int>(g, id, 3))};
    case memcpy_node: {
      const auto& m = std::get<flowdsl::MemcpyOp>(op);
      return {word(m.dst), word(m.src), word(m.bytes)};
    }
    case memset_node: {
      const auto& m = std::get<flowdsl::MemsetOp>(op);
      return {word(m.dst), word(m.value), word(m.count)};
    }
    case host_node: {
      const auto& m = std::get<flowdsl::HostOp>(op);
      return {word(m.fn), word(m.user_data)};
    }
    default:
      return {};
  }
}

std::vector<std::vector<std::uint64_t>> parameters_of(const Instance& inst) {
  std::vector<std::vector<std::uint64_t>> out;
  for (flowdsl::NodeId id = 0; id < inst.handles.size(); ++id) out.push_back(parameters_of(inst, id));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The model of the runtime's cache policy, written from its documentation and src/runtime:
// an LRU list of topologies, each remembering the graph (uid) and parameter version its
// executable was last synchronised with, and the parameter values it holds.

struct Expectation {
  flowdsl::LaunchKind kind = flowdsl::LaunchKind::hit;
  std::size_t nodes_updated = 0;
  std::vector<std::uint32_t> to_update;  // plan positions, ascending
  bool refused = false;
};

class CacheModel {
 public:
  explicit CacheModel(std::size_t capacity) : capacity_(capacity) {}

  /// What launching `inst` (its graph's uid is `uid`) does; `refuse`: the position whose
  /// update the backend refuses.
  Expectation launch(const Instance& inst, std::uint64_t uid, std::optional<std::uint32_t> refuse) {
    Expectation e;
    ++stats.launches;
    Entry* entry = touch(inst.topology.key());
    if (entry == nullptr) {
      insert(inst.topology.key(), Entry{uid, inst.version, parameters_of(inst)});
      ++stats.misses;
      e.kind = flowdsl::LaunchKind::instantiated;
      return e;
    }
    ++stats.hits;  // a refused update, solved by re-instantiating, still counts as a hit
    std::vector<std::vector<std::uint64_t>> held = parameters_of(inst);
    if (entry->uid == uid) {
      e.to_update = changed_positions(*entry, inst);
    } else {
      ++stats.value_diffs;
      e.to_update = differing_positions(*entry, held);
    }
    *entry = Entry{uid, inst.version, std::move(held)};
    if (e.to_update.empty()) return e;
    e.refused = refuse && std::binary_search(e.to_update.begin(), e.to_update.end(), *refuse);
    if (e.refused) {
      ++stats.reinstantiations;
      e.kind = flowdsl::LaunchKind::reinstantiated;  // and nothing counted as updated
      return e;
    }
    e.kind = flowdsl::LaunchKind::updated;
    e.nodes_updated = e.to_update.size();
    stats.node_updates += e.nodes_updated;
    return e;
  }

  /// A launch that fails validation of its changed parameters: nothing is counted, but a
  /// cached topology has already been looked up and so becomes the most recently used.
  void failed_launch(const Instance& inst) { touch(inst.topology.key()); }

  std::size_t size() const { return lru_.size(); }
  flowdsl::RuntimeStatistics stats;

 private:
  using Key = std::vector<std::uint32_t>;
  struct Entry {
    std::uint64_t uid;
    std::uint64_t version;
    std::vector<std::vector<std::uint64_t>> held;  // per node (position == id): the values applied
  };

  /// The entry of `key`, now the most recently used; null when not cached.
  Entry* touch(const Key& key) {
    const auto it = std::find_if(lru_.begin(), lru_.end(), [&](const auto& e) { return e.first == key; });
    if (it == lru_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it);
    return &lru_.front().second;
  }

  void insert(const Key& key, Entry entry) {
    lru_.emplace_front(key, entry);
    if (lru_.size() <= capacity_) return;
    lru_.pop_back();
    ++stats.evictions;
  }

  /// Same graph: the nodes changed since the entry's version, whatever their values.
  static std::vector<std::uint32_t> changed_positions(const Entry& entry, const Instance& inst) {
    std::vector<std::uint32_t> out;
    for (flowdsl::NodeId id = 0; id < inst.last_change.size(); ++id) {
      if (inst.last_change[id] > entry.version) out.push_back(id);  // position == id
    }
    return out;
  }

  /// Another graph of the topology: the nodes whose values differ from those the executable holds.
  static std::vector<std::uint32_t> differing_positions(const Entry& entry,
                                                        const std::vector<std::vector<std::uint64_t>>& wanted) {
    std::vector<std::uint32_t> out;
    for (flowdsl::NodeId id = 0; id < wanted.size(); ++id) {
      if (entry.held[id] != wanted[id]) out.push_back(id);
    }
    return out;
  }

  std::size_t capacity_;
  std::list<std::pair<Key, Entry>> lru_;  // most recently used first
};

// ---------------------------------------------------------------------------------------------
// The scenario: a runtime, its model, the instances, and checks after every launch.

class Scenario {
 public:
  explicit Scenario(std::uint64_t seed)
      : rng_(seed),
        capacity_(uniform(rng_, 1, 6)),
        runtime_(flowdsl::RuntimeOptions{capacity_}, std::make_unique<flowdsl_test::RecordingBackend>(record_)),
        model_(capacity_) {
    const Topology first = random_topology(rng_);
    const Topology second = random_topology(rng_);
    for (std::uint32_t i = uniform(rng_, 1, 4); i > 0; --i) instances_.push_back(build(first, rng_));
    for (std::uint32_t i = uniform(rng_, 0, 2); i > 0; --i) instances_.push_back(build(second, rng_));
  }

  void step() {
    Instance& inst = instances_[uniform(rng_, 0, static_cast<std::uint32_t>(instances_.size() - 1))];
    const std::uint32_t roll = uniform(rng_, 1, 100);
    if (roll <= 55) {
      for (std::uint32_t n = uniform(rng_, 0, 5); n > 0; --n) change_parameters(inst, random_node_of(inst), false, rng_);
    } else if (roll <= 65) {
      change_parameters(inst, random_node_of(inst), true, rng_);  // the value it holds: still a change
    } else if (roll <= 73) {
      while (!change_structure(inst, rng_)) {
      }
    } else if (roll <= 77) {
      launch_copy(inst);
    } else if (roll <= 80) {
      launch_invalid(inst);
      return;  // the next launch of `inst` may come after others: the failed one's effect on the LRU shows
    }  // else: nothing changed since this graph's last launch (a hit, if still cached)
    launch(inst, inst.graph);
  }

 private:
  flowdsl::NodeId random_node_of(const Instance& inst) {
    return uniform(rng_, 0, static_cast<flowdsl::NodeId>(inst.handles.size() - 1));
  }

  /// Launches `graph` (which is `inst`'s graph or a copy of it) and checks every observable.
  void launch(const Instance& inst, const flowdsl::Graph& graph) {
    REQUIRE(graph.parameter_version() == inst.version);
    check_topology_hash(inst, graph);
    std::optional<std::uint32_t> refuse;
    if (chance(rng_, 10)) refuse = random_node_of(inst);
    record_.refuse_position = refuse;
    record_.asked.clear();
    const int instantiations = record_.instantiations;

    const Expectation want = model_.launch(inst, graph.uid(), refuse);
    const flowdsl::LaunchReport got = runtime_.launch(graph);

    REQUIRE(got.kind == want.kind);
    REQUIRE(got.nodes_updated == want.nodes_updated);
    check_updates_asked(want);
    const bool instantiated =
        want.kind == flowdsl::LaunchKind::instantiated || want.kind == flowdsl::LaunchKind::reinstantiated;
    REQUIRE(record_.instantiations - instantiations == (instantiated ? 1 : 0));
    check_statistics();
  }

  /// Without a refusal, exactly the changed nodes, each once; with one, the refused update
  /// ends the sequence and no node is asked twice.
  void check_updates_asked(const Expectation& want) {
    std::vector<std::uint32_t> asked = record_.asked;
    std::sort(asked.begin(), asked.end());
    REQUIRE(std::adjacent_find(asked.begin(), asked.end()) == asked.end());
    if (!want.refused) {
      REQUIRE(asked == want.to_update);
      return;
    }
    REQUIRE(record_.asked.back() == *record_.refuse_position);
    REQUIRE(std::includes(want.to_update.begin(), want.to_update.end(), asked.begin(), asked.end()));
  }

  void check_statistics() {
    const flowdsl::RuntimeStatistics got = runtime_.statistics();
    const flowdsl::RuntimeStatistics& want = model_.stats;
    REQUIRE(got.launches == want.launches);
    REQUIRE(got.hits == want.hits);
    REQUIRE(got.misses == want.misses);
    REQUIRE(got.node_updates == want.node_updates);
    REQUIRE(got.reinstantiations == want.reinstantiations);
    REQUIRE(got.evictions == want.evictions);
    REQUIRE(got.value_diffs == want.value_diffs);
    REQUIRE(runtime_.size() == model_.size());
    REQUIRE(record_.live == static_cast<int>(model_.size()));
    REQUIRE(record_.launches == static_cast<int>(want.launches));
  }

  /// The model's premises: plan position == id, and the topology hash tells topologies apart
  /// exactly as the test's keys do.
  void check_topology_hash(const Instance& inst, const flowdsl::Graph& graph) {
    const flowdsl::Plan& plan = graph.plan();
    for (flowdsl::NodeId id = 0; id < plan.position.size(); ++id) REQUIRE(plan.position[id] == id);
    const auto [it, added] = hash_of_.emplace(inst.topology.key(), plan.topology_hash);
    REQUIRE(it->second == plan.topology_hash);
    if (added) REQUIRE(hashes_.insert(plan.topology_hash).second);
  }

  /// A copy is another graph (new uid) with the same parameters and change history.
  void launch_copy(const Instance& inst) {
    const flowdsl::Graph copy = inst.graph;
    REQUIRE(copy.uid() != inst.graph.uid());
    launch(inst, copy);
  }

  /// An invalid parameter: the launch throws naming the node; then the node is fixed.
  void launch_invalid(Instance& inst) {
    std::vector<flowdsl::NodeId> candidates;
    for (flowdsl::NodeId id = 0; id < inst.handles.size(); ++id) {
      const auto kind = static_cast<Kind>(inst.handles[id].index());
      if (kind == memcpy_node || kind == memset_node) candidates.push_back(id);
    }
    if (candidates.empty()) return;
    const flowdsl::NodeId id = candidates[uniform(rng_, 0, static_cast<std::uint32_t>(candidates.size() - 1))];
    const std::string message = break_parameters(inst, id);
    const int launches = record_.launches;
    REQUIRE_THROWS_WITH(runtime_.launch(inst.graph), contains(message));
    model_.failed_launch(inst);
    REQUIRE(record_.launches == launches);
    check_statistics();
    change_parameters(inst, id, false, rng_);
  }

  Rng rng_;
  std::uint32_t capacity_;
  flowdsl_test::Record record_;
  flowdsl::Runtime runtime_;
  CacheModel model_;
  std::vector<Instance> instances_;
  std::map<std::vector<std::uint32_t>, std::uint64_t> hash_of_;  // topology key -> topology hash
  std::set<std::uint64_t> hashes_;
};

}  // namespace

CATCH_REGISTER_ENUM(flowdsl::LaunchKind, flowdsl::LaunchKind::hit, flowdsl::LaunchKind::updated,
                    flowdsl::LaunchKind::instantiated, flowdsl::LaunchKind::reinstantiated)

TEST_CASE("Runtime decisions match a model of the cache on random scenarios", "[runtime][differential]") {
  constexpr std::uint64_t seeds = 200;
  constexpr int launches = 400;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      Scenario scenario(seed);
      for (int i = 0; i < launches; ++i) {
        INFO("launch " << i);
        scenario.step();
      }
    }
  }
}
