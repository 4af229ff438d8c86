// SPDX-License-Identifier: Apache-2.0
// Hazards: two nodes of one body touching overlapping bytes, one of them writing, with no path
// between them; and edges inferred from accesses in declaration order, transitively reduced.
//
// Accesses are a node's declared ones (reads()/writes(), a file's "reads"/"writes") and those
// its parameters imply (derived_accesses: registered kernels' extents, copies, fills). A node
// holding bodies touches what its bodies' nodes touch, so each body is checked on its own with
// its nodes standing for everything beneath them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "edges.hpp"
#include "flowdsl/hazards.hpp"
#include "flowdsl/plan.hpp"
#include "lowering_facets.hpp"
#include "value_text.hpp"

namespace flowdsl {
namespace lowering {
namespace {

constexpr std::uint64_t unbounded = std::numeric_limits<std::uint64_t>::max();

// One access as seen from one body: `node` is the node of that body holding `origin` (origin
// itself, or the child node whose bodies hold it).
struct Entry {
  std::uint64_t lo, hi;  // bytes [lo, hi)
  NodeId node;
  NodeId origin;
  std::uint32_t group;   // the body
  bool write;
};

// What reaches() found for a pair of nodes, by key (from << 32 | to): open addressing with
// linear probing in two flat arrays, about 18 bytes a pair where a node-based map takes 40.
class ReachCache {
 public:
  /// 0 when the pair was not searched, else 1 + what was found.
  int find(std::uint64_t key) const noexcept {
    if (keys_.empty()) return 0;
    for (std::size_t i = slot(key);; i = (i + 1) & (keys_.size() - 1)) {
      if (keys_[i] == key) return 1 + found_[i];
      if (keys_[i] == empty) return 0;
    }
  }
  void add(std::uint64_t key, bool found) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    std::size_t i = slot(key);
    while (keys_[i] != empty && keys_[i] != key) i = (i + 1) & (keys_.size() - 1);
    if (keys_[i] == empty) ++size_;
    keys_[i] = key;
    found_[i] = found ? 1 : 0;
  }

 private:
  // No pair has from == to, so the key of (0, 0) marks an empty slot.
  static constexpr std::uint64_t empty = 0;
  std::size_t slot(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow() {
    std::vector<std::uint64_t> keys = std::move(keys_);
    std::vector<std::uint8_t> found = std::move(found_);
    const std::size_t capacity = keys.empty() ? 1024 : 2 * keys.size();
    keys_.assign(capacity, empty);
    found_.assign(capacity, 0);
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] != empty) add(keys[i], found[i] != 0);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<std::uint8_t> found_;
  std::size_t size_ = 0;
  int shift_ = 64;
};

// Every access of every node, once per level from its own body up to the top.
std::vector<Entry> collect(const Description& d, BufferIndex& buffers, KernelInfos& kernels) {
  std::unordered_map<std::uint64_t, std::uint32_t> groups;  // (parent, body) -> group
  std::uint64_t last_key = ~std::uint64_t{0};               // most nodes share the last one's body
  std::uint32_t last_group = 0;
  const auto group_of = [&](const Node& n) {
    const std::uint64_t key = (std::uint64_t{n.parent} << 32) | n.body;
    if (key != last_key) {
      const auto found = groups.find(key);
      last_group = found != groups.end() ? found->second
                                         : groups.emplace(key, static_cast<std::uint32_t>(groups.size())).first->second;
      last_key = key;
    }
    return last_group;
  };
  std::vector<Entry> out;
  std::vector<Access> derived;  // reused: no allocation per node
  const auto add = [&](NodeId id, const Access& a) {
    if (a.ptr == nullptr) return;
    const auto lo = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
    std::uint64_t hi = unbounded;
    if (a.bytes != 0) {
      hi = a.bytes > unbounded - lo ? unbounded : lo + a.bytes;
    } else if (const NamedBuffer* b = buffers.find(static_cast<std::uintptr_t>(lo))) {
      hi = reinterpret_cast<std::uintptr_t>(b->ptr) + b->bytes;  // unknown extent: to its buffer's end
    }
    const bool write = a.mode != AccessMode::read;
    for (NodeId at = id;; at = d.nodes[at].parent) {
      out.push_back(Entry{lo, hi, at, id, group_of(d.nodes[at]), write});
      if (d.nodes[at].parent == no_node) break;
    }
  };
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const Node& n = d.nodes[id];
    derived.clear();
    std::visit([&](const auto& op) { lowering_of(op).derived_accesses(op, kernels, derived); }, n.op);
    if (n.accesses.empty() && derived.empty()) continue;
    // Typically a read and a write a node: no growth by copying. Reserved at the first access,
    // since many graphs have none.
    if (out.capacity() == 0) out.reserve(2 * (d.nodes.size() - id));
    for (const Access& a : n.accesses) add(id, a);  // declared, then derived
    for (const Access& a : derived) add(id, a);
  }
  return out;
}

// Successors from predecessors.
Adjacency transpose(const Adjacency& pred, std::size_t count) {
  Adjacency succ;
  succ.offsets.assign(count + 1, 0);
  for (NodeId v = 0; v < count; ++v) {
    for (const NodeId* p = pred.begin(v); p != pred.end(v); ++p) ++succ.offsets[*p + 1];
  }
  for (std::size_t i = 0; i < count; ++i) succ.offsets[i + 1] += succ.offsets[i];
  succ.nodes.resize(succ.offsets[count]);
  std::vector<std::uint32_t> fill(succ.offsets.begin(), succ.offsets.end() - 1);
  for (NodeId v = 0; v < count; ++v) {  // v ascending: each row comes out ascending
    for (const NodeId* p = pred.begin(v); p != pred.end(v); ++p) succ.nodes[fill[*p]++] = v;
  }
  return succ;
}


class HazardCheck {
 public:
  HazardCheck(const Description& d, const Ordering& ordering, BufferIndex& buffers, KernelInfos& kernels,
              Diagnostics& diag)
      : d_(d), ordering_(ordering), buffers_(buffers), kernels_(kernels), diag_(diag) {
    budget_ = 32 * (d.nodes.size() + ordering.edges.predecessors.nodes.size()) + (std::uint64_t{1} << 22);
  }

  void run() {
    std::vector<Entry> entries = collect(d_, buffers_, kernels_);
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.group != b.group ? a.group < b.group : a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi;
    });
    // Clusters: maximal runs of one body whose ranges overlap one another transitively.
    for (std::size_t i = 0; i < entries.size() && !stopped_;) {
      std::size_t j = i + 1;
      std::uint64_t end = entries[i].hi;
      bool writes = entries[i].write;
      while (j < entries.size() && entries[j].group == entries[i].group && entries[j].lo < end) {
        end = std::max(end, entries[j].hi);
        writes = writes || entries[j].write;
        ++j;
      }
      if (writes && j - i > 1) cluster(entries.data() + i, entries.data() + j);
      i = j;
    }
    if (stopped_) {
      diag_.add({}, "hazard check stopped after " + std::to_string(steps_) +
                        " steps, before it could prove every pair of accesses ordered: declare edges between the nodes "
                        "that share buffers, or turn the check off (check_hazards(false), \"check_hazards\": false)");
    }
    if (reported_ > max_reports) {
      diag_.add({}, "... and " + std::to_string(reported_ - max_reports) + " more hazards");
    }
  }

 private:
  static constexpr std::size_t max_reports = 100;

  // Checks one cluster: entries sorted by lo, overlapping one another transitively.
  void cluster(const Entry* first, const Entry* last) {
    if (position_.empty()) index_order();
    const bool uniform = std::all_of(first, last, [&](const Entry& e) { return e.lo == first->lo && e.hi == first->hi; });
    if (uniform) {
      active_.assign(first, last);
      chain();
      return;
    }
    // Elementary segments between consecutive boundaries; each is checked with the accesses
    // covering it, whenever that set changed.
    std::vector<std::uint64_t> bounds;
    for (const Entry* e = first; e != last; ++e) {
      bounds.push_back(e->lo);
      bounds.push_back(e->hi);
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    std::vector<const Entry*> covering;
    const Entry* next = first;
    for (std::size_t k = 0; k + 1 < bounds.size() && !stopped_; ++k) {
      const std::uint64_t at = bounds[k];
      bool changed = false;
      const auto ended = std::remove_if(covering.begin(), covering.end(), [&](const Entry* e) { return e->hi <= at; });
      changed = ended != covering.end();
      covering.erase(ended, covering.end());
      for (; next != last && next->lo == at; ++next) {
        covering.push_back(next);
        changed = true;
      }
      if (!changed || covering.size() < 2) continue;
      if (!spend(covering.size())) return;
      active_.clear();
      for (const Entry* e : covering) active_.push_back(*e);
      if (std::any_of(active_.begin(), active_.end(), [](const Entry& e) { return e.write; })) chain();
    }
  }

  // The accesses in active_ all overlap. In topological order, each writer must follow the
  // previous writer and the readers since it, and each reader must follow the last writer;
  // by transitivity every conflicting pair is then ordered, and a failed step is a real race.
  void chain() {
    std::sort(active_.begin(), active_.end(), [&](const Entry& a, const Entry& b) {
      return position_[a.node] != position_[b.node] ? position_[a.node] < position_[b.node] : a.write > b.write;
    });
    // One item per node: it writes if any of its accesses here writes.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < active_.size(); ++i) {
      if (kept > 0 && active_[kept - 1].node == active_[i].node) continue;  // writer first, so kept wins
      active_[kept++] = active_[i];
    }
    active_.resize(kept);
    const Entry* writer = nullptr;
    readers_.clear();
    for (const Entry& e : active_) {
      if (writer != nullptr) ordered(*writer, e);
      if (e.write) {
        for (const Entry* r : readers_) ordered(*r, e);
        readers_.clear();
        writer = &e;
      } else {
        readers_.push_back(&e);
      }
      if (stopped_) return;
    }
  }

  // Reports a and b (a earlier in topological order) unless a path leads from a to b.
  void ordered(const Entry& a, const Entry& b) {
    if (a.node == b.node || reaches(a.node, b.node)) return;
    const std::uint64_t key = (std::uint64_t{a.node} << 32) | b.node;
    if (!reported_pairs_.insert(key).second) return;
    if (++reported_ > max_reports) return;
    report(a.origin < b.origin ? a : b, a.origin < b.origin ? b : a);  // in declaration order
  }

  void report(const Entry& a, const Entry& b) {
    const std::string pa = node_path(d_, a.origin), pb = node_path(d_, b.origin);
    const std::string roles = a.write && b.write ? "both write"
                              : a.write          ? quoted_name(pa) + " writes, " + quoted_name(pb) + " reads"
                                                 : quoted_name(pa) + " reads, " + quoted_name(pb) + " writes";
    diag_.add({pa, pb}, "hazard: nodes " + quoted_name(pa) + " and " + quoted_name(pb) + " touch " +
                            range(std::max(a.lo, b.lo), std::min(a.hi, b.hi)) + " (" + roles +
                            ") with no path between them: add an edge between them");
  }

  // "bytes [0, 4096) of buffer 'x'", or raw addresses outside named buffers.
  std::string range(std::uint64_t lo, std::uint64_t hi) {
    if (const NamedBuffer* b = buffers_.find(static_cast<std::uintptr_t>(lo))) {
      const auto base = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b->ptr));
      const std::uint64_t end = std::min<std::uint64_t>(hi, base + b->bytes);
      return "bytes [" + std::to_string(lo - base) + ", " + std::to_string(end - base) + ") of buffer " +
             quoted_name(b->name);
    }
    if (hi == unbounded) return "memory from " + detail::hex(lo) + " on (an access of unknown extent)";
    return "bytes [" + detail::hex(lo) + ", " + detail::hex(hi) + ")";
  }

  // Whether a path leads from `from` to `to`: a search that never passes `to`'s position.
  bool reaches(NodeId from, NodeId to) {
    if (position_[from] >= position_[to]) return false;
    const std::uint64_t key = (std::uint64_t{from} << 32) | to;
    if (const int known = reach_cache_.find(key); known != 0) return known == 2;
    const std::uint32_t limit = position_[to];
    ++generation_;
    stack_.assign(1, from);
    stamp_[from] = generation_;
    bool found = false;
    while (!stack_.empty() && !found) {
      const NodeId at = stack_.back();
      stack_.pop_back();
      if (!spend(1 + successors_.count(at))) return true;  // stopped: reported as such
      for (const NodeId* s = successors_.begin(at); s != successors_.end(at); ++s) {
        if (*s == to) {
          found = true;
          break;
        }
        if (position_[*s] < limit && stamp_[*s] != generation_) {
          stamp_[*s] = generation_;
          stack_.push_back(*s);
        }
      }
    }
    reach_cache_.add(key, found);
    return found;
  }

  // Successors and positions, made for the first cluster: most graphs have none.
  void index_order() {
    const std::size_t count = d_.nodes.size();
    successors_ = transpose(ordering_.edges.predecessors, count);
    position_.resize(count);
    for (std::uint32_t i = 0; i < ordering_.order.size(); ++i) position_[ordering_.order[i]] = i;
    stamp_.assign(count, 0);
  }

  bool spend(std::uint64_t steps) {
    steps_ += steps;
    if (steps_ > budget_) stopped_ = true;
    return !stopped_;
  }

  const Description& d_;
  const Ordering& ordering_;
  BufferIndex& buffers_;
  KernelInfos& kernels_;
  Diagnostics& diag_;
  Adjacency successors_;
  std::vector<std::uint32_t> position_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t generation_ = 0;
  std::vector<NodeId> stack_;
  std::vector<Entry> active_;
  std::vector<const Entry*> readers_;
  ReachCache reach_cache_;
  std::unordered_set<std::uint64_t> reported_pairs_;
  std::size_t reported_ = 0;
  std::uint64_t steps_ = 0, budget_ = 0;
  bool stopped_ = false;
};

}  // namespace

void check_hazards(const Description& d, const Ordering& ordering, BufferIndex& buffers, KernelInfos& kernels,
                   Diagnostics& diag) {
  HazardCheck(d, ordering, buffers, kernels, diag).run();
}

}  // namespace lowering

namespace {

// The state of one byte range while inferring: its last writer and the readers since.
struct Segment {
  NodeId writer = no_node;
  std::vector<NodeId> readers;
};

}  // namespace

std::vector<Access> accesses_of(const Description& d, NodeId id) {
  const Node& n = d.nodes[id];
  std::vector<Access> out(n.accesses.begin(), n.accesses.end());
  lowering::KernelInfos kernels;
  std::visit([&](const auto& op) { lowering::lowering_of(op).derived_accesses(op, kernels, out); }, n.op);
  return out;
}

EdgeInference infer_edges(Graph& graph) {
  using namespace lowering;
  const Description& d = graph.description();
  const std::size_t count = d.nodes.size();
  BufferIndex buffers(d);
  KernelInfos kernels;
  std::vector<Entry> entries = collect(d, buffers, kernels);
  // Per body, nodes in declaration order (ids ascend with it).
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.group != b.group ? a.group < b.group : a.node < b.node;
  });

  // Declared edges that resolve, as pairs; unresolved ones stay as written for validation.
  std::vector<Diagnostic> ignored;
  Diagnostics quiet(ignored);
  const ResolvedEdges declared = resolve_edges(d, quiet);
  std::unordered_set<std::uint64_t> declared_pairs;
  for (NodeId v = 0; v < count; ++v) {
    for (const NodeId* p = declared.predecessors.begin(v); p != declared.predecessors.end(v); ++p) {
      declared_pairs.insert((std::uint64_t{*p} << 32) | v);
    }
  }

  // Dependencies in declaration order: a reader after the last writer of its bytes; a writer
  // after the last writer and every reader since.
  std::unordered_set<std::uint64_t> inferred;
  for (std::size_t i = 0; i < entries.size();) {
    std::size_t j = i;
    std::map<std::uint64_t, Segment> segments{{0, Segment{}}};  // start -> state up to the next start
    const auto split = [&](std::uint64_t at) {
      if (at == unbounded) return segments.end();
      auto it = segments.upper_bound(at);
      --it;
      if (it->first == at) return it;
      return segments.emplace_hint(std::next(it), at, it->second);
    };
    while (j < entries.size() && entries[j].group == entries[i].group) {
      const Entry& e = entries[j++];
      split(e.lo);
      const auto end = split(e.hi);
      for (auto it = segments.find(e.lo); it != end; ++it) {
        Segment& s = it->second;
        if (s.writer != no_node && s.writer != e.node) inferred.insert((std::uint64_t{s.writer} << 32) | e.node);
        if (e.write) {
          for (NodeId r : s.readers) {
            if (r != e.node) inferred.insert((std::uint64_t{r} << 32) | e.node);
          }
          s.writer = e.node;
          s.readers.clear();
        } else if (s.readers.empty() || s.readers.back() != e.node) {
          s.readers.push_back(e.node);
        }
      }
    }
    i = j;
  }

  // Every edge, then a transitive reduction: u -> v goes when v is reachable from another
  // successor of u. Successors are tried in topological order, so that any path to v through
  // another successor is found before v itself is met.
  std::vector<std::vector<NodeId>> succ(count);
  for (std::uint64_t key : declared_pairs) succ[key >> 32].push_back(static_cast<NodeId>(key & 0xffffffffu));
  for (std::uint64_t key : inferred) {
    if (declared_pairs.count(key) == 0) succ[key >> 32].push_back(static_cast<NodeId>(key & 0xffffffffu));
  }
  ResolvedEdges all;
  all.predecessors.offsets.assign(count + 1, 0);
  for (NodeId u = 0; u < count; ++u) {
    for (NodeId v : succ[u]) ++all.predecessors.offsets[v + 1];
  }
  for (std::size_t k = 0; k < count; ++k) all.predecessors.offsets[k + 1] += all.predecessors.offsets[k];
  all.predecessors.nodes.resize(all.predecessors.offsets[count]);
  {
    std::vector<std::uint32_t> fill(all.predecessors.offsets.begin(), all.predecessors.offsets.end() - 1);
    for (NodeId u = 0; u < count; ++u) {
      for (NodeId v : succ[u]) all.predecessors.nodes[fill[v]++] = u;
    }
    for (NodeId v = 0; v < count; ++v) std::sort(all.predecessors.nodes.begin() + all.predecessors.offsets[v],
                                                 all.predecessors.nodes.begin() + all.predecessors.offsets[v + 1]);
  }
  const std::vector<NodeId> order = topological_order(all, count);
  EdgeInference result;
  if (order.size() == count) {
    std::vector<std::uint32_t> position(count);
    for (std::uint32_t k = 0; k < count; ++k) position[order[k]] = k;
    std::vector<std::uint32_t> stamp(count, 0);
    std::uint32_t generation = 0;
    std::vector<NodeId> stack;
    std::uint64_t steps = 0;
    const std::uint64_t budget = 64 * (count + all.predecessors.nodes.size()) + (std::uint64_t{1} << 24);
    for (NodeId u = 0; u < count && result.reduced; ++u) {
      auto& out = succ[u];
      if (out.size() < 2) continue;
      std::sort(out.begin(), out.end(), [&](NodeId a, NodeId b) { return position[a] < position[b]; });
      ++generation;
      std::vector<NodeId> kept;
      for (NodeId v : out) {
        if (stamp[v] == generation) continue;  // reached through an earlier successor
        kept.push_back(v);
        stack.assign(1, v);
        stamp[v] = generation;
        while (!stack.empty()) {
          const NodeId at = stack.back();
          stack.pop_back();
          for (NodeId s : succ[at]) {
            if (stamp[s] != generation) {
              stamp[s] = generation;
              stack.push_back(s);
            }
          }
          if (++steps > budget) break;
        }
        if (steps > budget) {
          result.reduced = false;
          break;
        }
      }
      if (result.reduced) out = std::move(kept);
    }
  } else {
    result.reduced = false;  // the edges hold a cycle: validation reports it
  }

  // The new edge list: the declared edges that remain (in their order, unresolved ones
  // included), then the inferred ones that remain.
  std::unordered_set<std::uint64_t> final_pairs;
  for (NodeId u = 0; u < count; ++u) {
    for (NodeId v : succ[u]) final_pairs.insert((std::uint64_t{u} << 32) | v);
  }
  // An end given by name lies in the body of the other end (as validation resolves it).
  const auto resolve = [&](const EdgeEnd& end, const EdgeEnd& other) {
    if (end.id != no_node) return end.id;
    if (other.id == no_node || other.id >= count) return no_node;
    const Node& beside = d.nodes[other.id];
    return detail::find_node(graph.state(), edge_name(d, end), beside.parent, beside.body);
  };
  ChunkedList<Edge> edges;
  std::unordered_set<std::uint64_t> written;
  for (const Edge& e : d.edges) {
    const NodeId from = resolve(e.from, e.to), to = resolve(e.to, e.from);
    if (from == no_node || to == no_node || from >= count || to >= count) {
      edges.push_back(e);  // validation reports it
      continue;
    }
    const std::uint64_t key = (std::uint64_t{from} << 32) | to;
    if (final_pairs.count(key) != 0) {
      if (written.insert(key).second) edges.push_back(e);
    }
  }
  for (std::uint64_t key : declared_pairs) {
    if (final_pairs.count(key) == 0) ++result.removed;
  }
  for (NodeId u = 0; u < count; ++u) {
    for (NodeId v : succ[u]) {
      const std::uint64_t key = (std::uint64_t{u} << 32) | v;
      if (declared_pairs.count(key) != 0) continue;
      edges.push_back(Edge{EdgeEnd{u, 0}, EdgeEnd{v, 0}, EdgeKind::full});
      ++result.added;
    }
  }
  detail::set_edges(graph.state(), std::move(edges));
  return result;
}

}  // namespace flowdsl
