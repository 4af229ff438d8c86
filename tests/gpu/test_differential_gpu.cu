// SPDX-License-Identifier: Apache-2.0
// Graph launches against eager launches of the same description, on random DAGs of every node
// kind (kernel, memcpy, memset, empty, host, and child graphs wrapping any of them) relaunched
// with random parameter changes, some structural changes, and several Graph objects of one
// topology taking turns on one Runtime.
// After every launch each buffer must equal, byte for byte, what running the description node
// by node on a stream left, and the host counters must agree.
//
// Determinism: every two nodes touching one slice, one of them writing, are ordered by a path,
// before and after any change; then any topological order, the graph's or the eager one, gives
// the same bytes.
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;

namespace {

// ---------------------------------------------------------------------------------------------
// The operations. Kernels loop over their range with a grid stride, so any grid gives the same
// result: the grid is structure only.

__global__ void affine_kernel(const float* x, float* y, float a, float b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + b;
}

__global__ void add_kernel(const float* x, const float* z, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = x[i] + z[i];
}

constexpr int counter_count = 4;
std::atomic<int> counters[counter_count];  // what host nodes increment
void add_one(void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(1); }
void add_ten(void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(10); }

std::vector<int> read_counters() {
  std::vector<int> out;
  for (const auto& c : counters) out.push_back(c.load());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Memory: a few device buffers cut into equal slices; nodes read and write whole slices (or a
// prefix of one).

constexpr std::uint32_t buffer_count = 4;
constexpr std::uint32_t slices_per_buffer = 16;
constexpr std::uint32_t slice_count = buffer_count * slices_per_buffer;
constexpr std::uint32_t slice_floats = 256;

class Memory {
 public:
  explicit Memory(unsigned seed) {
    for (std::uint32_t b = 0; b < buffer_count; ++b) {
      buffers_.push_back(std::make_unique<DeviceBuffer<float>>(slices_per_buffer * slice_floats));
      initial_.push_back(flowdsl_test::random_floats(slices_per_buffer * slice_floats, seed + b));
    }
  }

  float* slice(std::uint32_t s) const {
    return buffers_[s / slices_per_buffer]->get() + (s % slices_per_buffer) * slice_floats;
  }

  /// Every buffer back to its initial contents, every counter to zero.
  void reset(cudaStream_t stream) {
    CUDA_REQUIRE(cudaStreamSynchronize(stream));
    for (std::uint32_t b = 0; b < buffer_count; ++b) buffers_[b]->upload(initial_[b]);
    // A copy from pageable memory may return before it lands, and our stream does not wait
    // for the legacy default stream.
    CUDA_REQUIRE(cudaDeviceSynchronize());
    for (auto& c : counters) c = 0;
  }

  /// The bytes of every buffer, after the work on `stream`.
  std::vector<std::vector<float>> contents(cudaStream_t stream) const {
    CUDA_REQUIRE(cudaStreamSynchronize(stream));
    std::vector<std::vector<float>> out;
    for (const auto& b : buffers_) out.push_back(b->download());
    return out;
  }

 private:
  std::vector<std::unique_ptr<DeviceBuffer<float>>> buffers_;
  std::vector<std::vector<float>> initial_;
};

// ---------------------------------------------------------------------------------------------
// Random numbers: our own reduction of mt19937_64, so a seed gives the same case everywhere.

using Rng = std::mt19937_64;

std::uint32_t uniform(Rng& rng, std::uint32_t lo, std::uint32_t hi) {  // in [lo, hi]
  return lo + static_cast<std::uint32_t>(rng() % (std::uint64_t{hi} - lo + 1));
}
bool chance(Rng& rng, std::uint32_t percent) { return uniform(rng, 1, 100) <= percent; }

// ---------------------------------------------------------------------------------------------
// Topology and parameters as the test sees them. Nodes are declared in id order and edges go
// from lower ids to higher ones.

enum Kind : std::uint32_t { affine_node, add_node, memcpy_node, memset_node, empty_node, host_node, kind_count };

struct NodeSpec {
  Kind kind = empty_node;
  std::uint32_t grid = 1;          // kernels
  std::uint32_t element_size = 1;  // memsets
  bool wrapped = false;            // declared alone in the body of a child-graph node
  std::set<flowdsl::NodeId> deps;
};

/// The parameters of one node, read according to its kind:
/// affine: y[out] = a * x[in0] + b over count floats; add: out = in0 + in1 over count floats;
/// memcpy: count floats from in0 to out; memset: count elements of out to value;
/// host: adds 1 (a < 0) or 10 to counter in0.
struct NodeParams {
  std::uint32_t in0 = 0, in1 = 0, out = 0;
  float a = 0, b = 0;
  std::uint32_t count = 1;
  std::uint32_t value = 0;
};

struct Access {
  std::uint32_t slice;
  bool write;
};

std::vector<Access> accesses(Kind kind, const NodeParams& p) {
  switch (kind) {
    case affine_node: return {{p.in0, false}, {p.out, true}};
    case add_node: return {{p.in0, false}, {p.in1, false}, {p.out, true}};
    case memcpy_node: return {{p.in0, false}, {p.out, true}};
    case memset_node: return {{p.out, true}};
    default: return {};  // host nodes touch host counters only; increments commute
  }
}

bool conflict(const std::vector<Access>& x, const std::vector<Access>& y) {
  for (const Access& p : x) {
    for (const Access& q : y) {
      if (p.slice == q.slice && (p.write || q.write)) return true;
    }
  }
  return false;
}

std::uint32_t max_count(Kind kind, std::uint32_t element_size) {
  return kind == memset_node ? slice_floats * 4 / element_size : slice_floats;
}

NodeParams random_params(Rng& rng, const NodeSpec& spec) {
  NodeParams p;
  p.in0 = uniform(rng, 0, slice_count - 1);
  p.in1 = uniform(rng, 0, slice_count - 1);
  p.out = uniform(rng, 0, slice_count - 1);
  if (spec.kind == memcpy_node && p.out == p.in0) p.out = (p.in0 + 1) % slice_count;  // no overlapping copy
  if (spec.kind == host_node) p.in0 %= counter_count;
  p.a = static_cast<float>(uniform(rng, 0, 16)) * 0.25f - 2.0f;
  p.b = static_cast<float>(uniform(rng, 0, 16)) * 0.125f - 1.0f;
  p.count = uniform(rng, 1, max_count(spec.kind, spec.element_size));
  p.value = uniform(rng, 0, (1u << (8 * spec.element_size - 1)) - 1);  // fits the element
  return p;
}

/// One Graph object of a topology, with its parameters, handles and reachability.
struct Instance {
  using AffineNode = flowdsl::KernelNode<const float*, float*, float, float, int>;
  using AddNode = flowdsl::KernelNode<const float*, const float*, float*, int>;
  using Handle = std::variant<AffineNode, AddNode, flowdsl::MemcpyNode, flowdsl::MemsetNode, flowdsl::NodeHandle,
                              flowdsl::HostNode>;

  std::vector<NodeSpec> nodes;
  std::vector<NodeParams> params;
  std::vector<std::vector<bool>> ancestors;  // ancestors[v][u]: a path leads from u to v
  flowdsl::Graph graph;
  std::vector<Handle> handles;
  std::vector<std::optional<flowdsl::NodeHandle>> wrappers;  // the child-graph node of a wrapped node
  std::set<flowdsl::NodeId> changed;  // nodes whose parameters changed since this graph's last launch

  /// The topology, as a map key.
  std::vector<std::uint32_t> key() const {
    std::vector<std::uint32_t> k;
    for (const NodeSpec& n : nodes) {
      k.insert(k.end(), {n.kind, n.grid, n.element_size, n.wrapped, static_cast<std::uint32_t>(n.deps.size())});
      k.insert(k.end(), n.deps.begin(), n.deps.end());
    }
    return k;
  }

  bool ordered(flowdsl::NodeId u, flowdsl::NodeId v) const { return ancestors[v][u] || ancestors[u][v]; }

  /// Whether node `id` may take `p`: ordered with every node it would conflict with.
  bool allowed(flowdsl::NodeId id, const NodeParams& p) const {
    const std::vector<Access> mine = accesses(nodes[id].kind, p);
    for (flowdsl::NodeId u = 0; u < nodes.size(); ++u) {
      if (u != id && !ordered(u, id) && conflict(mine, accesses(nodes[u].kind, params[u]))) return false;
    }
    return true;
  }

  /// The test's premise: every two nodes in conflict are ordered.
  bool well_ordered() const {
    std::vector<std::vector<Access>> all;
    for (flowdsl::NodeId id = 0; id < nodes.size(); ++id) all.push_back(accesses(nodes[id].kind, params[id]));
    for (flowdsl::NodeId v = 0; v < nodes.size(); ++v) {
      for (flowdsl::NodeId u = 0; u < v; ++u) {
        if (!ancestors[v][u] && conflict(all[u], all[v])) return false;
      }
    }
    return true;
  }

  /// The total each counter should reach in one launch.
  std::vector<int> expected_counters() const {
    std::vector<int> out(counter_count, 0);
    for (flowdsl::NodeId id = 0; id < nodes.size(); ++id) {
      if (nodes[id].kind == host_node) out[params[id].in0] += params[id].a < 0 ? 1 : 10;
    }
    return out;
  }
};

flowdsl::NodeHandle plain(const Instance::Handle& h) {
  return std::visit([](const auto& typed) { return flowdsl::NodeHandle(typed); }, h);
}

template <class Builder>
Instance::Handle declare(Builder& g, flowdsl::NodeId id, const NodeSpec& s, const NodeParams& p, const Memory& m) {
  const std::string name = "n" + std::to_string(id);
  const int n = static_cast<int>(p.count);
  switch (s.kind) {
    case affine_node:
      return g.kernel(name, affine_kernel).grid(s.grid).block(64).args(m.slice(p.in0), m.slice(p.out), p.a, p.b, n);
    case add_node:
      return g.kernel(name, add_kernel).grid(s.grid).block(64).args(m.slice(p.in0), m.slice(p.in1), m.slice(p.out), n);
    case memcpy_node:
      return g.memcpy(name, m.slice(p.out), m.slice(p.in0), p.count * sizeof(float));
    case memset_node:
      return g.memset(name, m.slice(p.out), p.value, p.count, s.element_size);
    case empty_node:
      return g.empty(name);
    default:
      return g.host(name, p.a < 0 ? add_one : add_ten, &counters[p.in0]);
  }
}

/// Appends node `s` with parameters `p` to `inst`: declared in its graph, its edges added.
void append_node(Instance& inst, const NodeSpec& s, const NodeParams& p, const Memory& m) {
  const auto id = static_cast<flowdsl::NodeId>(inst.nodes.size());
  if (s.wrapped) {
    const flowdsl::NodeHandle wrapper = inst.graph.child("w" + std::to_string(id));
    flowdsl::Body body = wrapper.body();
    inst.handles.push_back(declare(body, id, s, p, m));
    inst.wrappers.emplace_back(wrapper);
  } else {
    inst.handles.push_back(declare(inst.graph, id, s, p, m));
    inst.wrappers.emplace_back();
  }
  // Edges go to the node itself, or to the child-graph node that holds it.
  const auto edge_end = [&](flowdsl::NodeId u) { return inst.wrappers[u] ? *inst.wrappers[u] : plain(inst.handles[u]); };
  std::vector<bool> ancestors(id + 1, false);
  for (flowdsl::NodeId dep : s.deps) {
    edge_end(id).after(edge_end(dep));
    ancestors[dep] = true;
    for (flowdsl::NodeId u = 0; u < dep; ++u) ancestors[u] = ancestors[u] || inst.ancestors[dep][u];
  }
  for (auto& row : inst.ancestors) row.push_back(false);
  inst.ancestors.push_back(std::move(ancestors));
  inst.nodes.push_back(s);
  inst.params.push_back(p);
}

/// A node of random kind and parameters depending on up to two of the previous `width` nodes
/// and on every earlier node it conflicts with.
void append_random_node(Instance& inst, std::uint32_t width, const Memory& m, Rng& rng) {
  const auto id = static_cast<flowdsl::NodeId>(inst.nodes.size());
  NodeSpec s;
  s.kind = static_cast<Kind>(uniform(rng, 0, kind_count - 1));
  if (s.kind == affine_node || s.kind == add_node) s.grid = uniform(rng, 1, 4);
  if (s.kind == memset_node) s.element_size = std::uint32_t{1} << uniform(rng, 0, 2);
  s.wrapped = chance(rng, 15);
  const NodeParams p = random_params(rng, s);
  const flowdsl::NodeId first = id > width ? id - width : 0;
  for (std::uint32_t d = id == 0 ? 0 : uniform(rng, 0, 2); d > 0; --d) s.deps.insert(uniform(rng, first, id - 1));
  const std::vector<Access> mine = accesses(s.kind, p);
  for (flowdsl::NodeId u = 0; u < id; ++u) {
    if (conflict(mine, accesses(inst.nodes[u].kind, inst.params[u]))) s.deps.insert(u);
  }
  append_node(inst, s, p, m);
}

/// A DAG of 1..300 nodes of width 1..16.
Instance random_instance(const Memory& m, Rng& rng) {
  const std::uint32_t width = uniform(rng, 1, 16);
  const std::uint32_t count = chance(rng, 20) ? uniform(rng, 1, 10) : uniform(rng, 10, 300);
  Instance inst;
  for (std::uint32_t i = 0; i < count; ++i) append_random_node(inst, width, m, rng);
  return inst;
}

/// Another Graph object of `inst`'s topology, with the same parameters.
Instance same_topology(const Instance& inst, const Memory& m) {
  Instance other;
  for (flowdsl::NodeId id = 0; id < inst.nodes.size(); ++id) append_node(other, inst.nodes[id], inst.params[id], m);
  return other;
}

// ---------------------------------------------------------------------------------------------
// Changes.

/// Applies `p` to node `id` through its handle: one setter call.
void set_params(Instance& inst, flowdsl::NodeId id, const NodeParams& p, const Memory& m) {
  const NodeParams old = inst.params[id];
  inst.params[id] = p;
  inst.changed.insert(id);
  const int n = static_cast<int>(p.count);
  auto& h = inst.handles[id];
  switch (inst.nodes[id].kind) {
    case affine_node: {
      auto& k = std::get<Instance::AffineNode>(h);
      if (p.in0 == old.in0 && p.out == old.out && p.b == old.b && p.count == old.count) k.arg<2>(p.a);
      else k.args(m.slice(p.in0), m.slice(p.out), p.a, p.b, n);
      return;
    }
    case add_node: {
      auto& k = std::get<Instance::AddNode>(h);
      if (p.in0 == old.in0 && p.in1 == old.in1 && p.out == old.out) k.arg<3>(n);
      else k.args(m.slice(p.in0), m.slice(p.in1), m.slice(p.out), n);
      return;
    }
    case memcpy_node:
      std::get<flowdsl::MemcpyNode>(h).set(m.slice(p.out), m.slice(p.in0), p.count * sizeof(float));
      return;
    case memset_node:
      std::get<flowdsl::MemsetNode>(h).set(m.slice(p.out), p.value, p.count);
      return;
    case host_node:
      std::get<flowdsl::HostNode>(h).set(p.a < 0 ? add_one : add_ten, &counters[p.in0]);
      return;
    default:
      inst.changed.erase(id);  // an empty node has no parameters
  }
}

/// New parameters for a random node, drawn until the ordering rule allows them (the node's
/// own slices are always allowed, so scalars and sizes change even when slices cannot).
void change_random_node(Instance& inst, const Memory& m, Rng& rng) {
  const auto id = uniform(rng, 0, static_cast<std::uint32_t>(inst.nodes.size() - 1));
  const NodeParams old = inst.params[id];
  NodeParams p = random_params(rng, inst.nodes[id]);
  const bool keep_slices = chance(rng, 40) || !inst.allowed(id, p);
  if (keep_slices) {
    p.in0 = old.in0;
    p.in1 = old.in1;
    p.out = old.out;
  }
  if (chance(rng, 30)) {  // a scalar alone (affine: a; add: count)
    p = old;
    p.a = static_cast<float>(uniform(rng, 0, 16)) * 0.25f - 2.0f;
    p.count = uniform(rng, 1, max_count(inst.nodes[id].kind, inst.nodes[id].element_size));
    if (inst.nodes[id].kind == affine_node) p.count = old.count;
  }
  set_params(inst, id, p, m);
}

/// A kernel's grid changes, or a node is appended: a new topology for this graph only.
void change_structure(Instance& inst, const Memory& m, Rng& rng) {
  const auto id = uniform(rng, 0, static_cast<std::uint32_t>(inst.nodes.size() - 1));
  NodeSpec& s = inst.nodes[id];
  if (chance(rng, 50) && (s.kind == affine_node || s.kind == add_node)) {
    s.grid = s.grid % 4 + 1;
    if (auto* k = std::get_if<Instance::AffineNode>(&inst.handles[id])) k->grid(s.grid);
    else std::get<Instance::AddNode>(inst.handles[id]).grid(s.grid);
    return;
  }
  append_random_node(inst, 16, m, rng);
}

// ---------------------------------------------------------------------------------------------
// One case: instances of one or two topologies taking turns on one runtime.

class Case {
 public:
  explicit Case(std::uint64_t seed) : rng_(seed), memory_(static_cast<unsigned>(seed)), stream_(flowdsl::make_stream()) {
    instances_.push_back(random_instance(memory_, rng_));
    for (std::uint32_t i = uniform(rng_, 0, 2); i > 0; --i) add_variant(instances_.front());
    if (chance(rng_, 30)) instances_.push_back(random_instance(memory_, rng_));
  }

  void iteration() {
    const auto i = uniform(rng_, 0, static_cast<std::uint32_t>(instances_.size() - 1));
    Instance& inst = instances_[i];
    const std::uint32_t roll = uniform(rng_, 1, 100);
    bool structural = false;
    if (roll <= 70) {
      for (std::uint32_t n = uniform(rng_, 1, 6); n > 0; --n) change_random_node(inst, memory_, rng_);
    } else if (roll <= 80) {
      change_structure(inst, memory_, rng_);
      structural = true;
    }  // else: nothing changed
    const flowdsl::LaunchReport report = compare(inst);
    check_report(i, inst, report, structural);
  }

 private:
  /// Another Graph object of `base`'s topology whose parameters went their own way.
  void add_variant(const Instance& base) {
    Instance variant = same_topology(base, memory_);
    for (std::size_t n = variant.nodes.size(); n > 0; --n) change_random_node(variant, memory_, rng_);
    instances_.push_back(std::move(variant));
  }

  /// Runs the graph through the runtime and eagerly from the same start; they must agree.
  flowdsl::LaunchReport compare(const Instance& inst) {
    REQUIRE(inst.well_ordered());
    memory_.reset(stream_.get());
    const flowdsl::LaunchReport report = runtime_.launch(inst.graph, stream_.get());
    const auto graph_bytes = memory_.contents(stream_.get());
    const std::vector<int> graph_counters = read_counters();

    memory_.reset(stream_.get());
    flowdsl::launch_eagerly(inst.graph, stream_.get());
    const auto eager_bytes = memory_.contents(stream_.get());
    const std::vector<int> eager_counters = read_counters();

    for (std::uint32_t b = 0; b < buffer_count; ++b) {
      INFO("buffer " << b);
      REQUIRE(std::memcmp(graph_bytes[b].data(), eager_bytes[b].data(), graph_bytes[b].size() * sizeof(float)) == 0);
    }
    REQUIRE(graph_counters == eager_counters);
    REQUIRE(graph_counters == inst.expected_counters());
    return report;
  }

  /// Loose expectations on the report: a new topology instantiates; a graph relaunched with no
  /// change hits; one relaunched after parameter changes updates exactly those nodes; one
  /// taking the executable over from another graph updates the nodes whose values differ (at
  /// most every node; compare() checks that the results are right).
  void check_report(std::uint32_t i, Instance& inst, const flowdsl::LaunchReport& report, bool structural) {
    const auto key = inst.key();
    const auto last = last_graph_.find(key);
    if (last == last_graph_.end()) {
      REQUIRE(report.kind == flowdsl::LaunchKind::instantiated);
    } else if (last->second != i) {
      REQUIRE((report.kind == flowdsl::LaunchKind::updated || report.kind == flowdsl::LaunchKind::hit));
      REQUIRE(report.nodes_updated <= inst.graph.size());  // child-graph nodes too
    } else if (!structural && last_key_[i] == key) {
      REQUIRE(report.kind == (inst.changed.empty() ? flowdsl::LaunchKind::hit : flowdsl::LaunchKind::updated));
      REQUIRE(report.nodes_updated == inst.changed.size());
    }
    last_graph_[key] = i;
    last_key_[i] = key;
    inst.changed.clear();
  }

  Rng rng_;
  Memory memory_;
  flowdsl::StreamHandle stream_;
  flowdsl::Runtime runtime_{flowdsl::RuntimeOptions{64}};  // no eviction: expectations stay simple
  std::vector<Instance> instances_;
  std::map<std::vector<std::uint32_t>, std::uint32_t> last_graph_;  // topology -> instance launched last
  std::map<std::uint32_t, std::vector<std::uint32_t>> last_key_;    // instance -> topology at its last launch
};

}  // namespace

CATCH_REGISTER_ENUM(flowdsl::LaunchKind, flowdsl::LaunchKind::hit, flowdsl::LaunchKind::updated,
                    flowdsl::LaunchKind::instantiated, flowdsl::LaunchKind::reinstantiated)

TEST_CASE("Graph launches leave the same bytes as eager launches on random DAGs", "[runtime][differential][gpu]") {
  constexpr std::uint64_t seeds = 24;
  constexpr int iterations = 50;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      Case c(seed);
      for (int i = 0; i < iterations; ++i) {
        INFO("iteration " << i);
        c.iteration();
      }
    }
  }
}
