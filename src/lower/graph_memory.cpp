// SPDX-License-Identifier: Apache-2.0
// Graph memory across nodes: each free matched with its alloc, every use of an allocation ordered
// between its alloc and its free (bounded reachability, as in the hazard check), the allocations
// no free releases.
#include "graph_memory.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace flowdsl::lowering {
namespace {

NodeId alloc_of(const Description& d, std::uint64_t value) { return allocation_of(d, value); }

// Calls visit(alloc) for each alloc whose memory node `id` uses: symbols of its parameters and its
// declared accesses (an alloc may come more than once). What a free frees is not a use.
template <class Visit>
void for_each_use(const Description& d, NodeId id, Visit&& visit) {
  const Node& n = d.nodes[id];
  if (freed_memory(n.op)) return;
  for_each_symbol(n.op, [&](std::uint64_t value) {
    if (const NodeId alloc = alloc_of(d, value); alloc != no_node) visit(alloc);
  });
  for (const Access& a : n.accesses) {
    if (const NodeId alloc = alloc_of(d, reinterpret_cast<std::uintptr_t>(a.ptr)); alloc != no_node) visit(alloc);
  }
}

std::uint32_t depth_of(const Description& d, NodeId id) {
  std::uint32_t depth = 0;
  for (NodeId at = d.nodes[id].parent; at != no_node; at = d.nodes[at].parent) ++depth;
  return depth;
}

// `a` must run before `b`, which is proven by a path from `from` to `to`: the nodes standing for
// them in the deepest body holding both (no_node when none does: one holds the other's body, or
// they sit in different bodies of one node).
// The problem is about node `subject` (and names `other`).
struct Query {
  NodeId a, b;
  NodeId from = no_node, to = no_node;
  NodeId subject = no_node, other = no_node;
  std::string message;  // the problem, when no path is found
  bool proven = false;
};

Query make_query(const Description& d, NodeId a, NodeId b, NodeId subject) {
  Query q{a, b, no_node, no_node, subject, subject == a ? b : a, {}, false};
  NodeId ra = a, rb = b;
  std::uint32_t da = depth_of(d, a), db = depth_of(d, b);
  for (; da > db; --da) ra = d.nodes[ra].parent;
  for (; db > da; --db) rb = d.nodes[rb].parent;
  while (d.nodes[ra].parent != d.nodes[rb].parent) {
    ra = d.nodes[ra].parent;
    rb = d.nodes[rb].parent;
  }
  if (ra != rb && d.nodes[ra].body == d.nodes[rb].body) {
    q.from = ra;
    q.to = rb;
  }
  return q;
}

// Successors from predecessors.
Adjacency transpose(const Adjacency& pred, std::size_t count) {
  Adjacency succ;
  succ.offsets.assign(count + 1, 0);
  for (const NodeId p : pred.nodes) ++succ.offsets[p + 1];
  for (std::size_t i = 0; i < count; ++i) succ.offsets[i + 1] += succ.offsets[i];
  succ.nodes.resize(succ.offsets[count]);
  std::vector<std::uint32_t> fill(succ.offsets.begin(), succ.offsets.end() - 1);
  for (NodeId v = 0; v < count; ++v) {
    for (const NodeId* p = pred.begin(v); p != pred.end(v); ++p) succ.nodes[fill[*p]++] = v;
  }
  return succ;
}

class MemoryCheck {
 public:
  MemoryCheck(const Description& d, const Ordering& ordering, Diagnostics& diag)
      : d_(d), predecessors_(ordering.edges.predecessors), diag_(diag), position_(d.nodes.size(), 0),
        stamp_(d.nodes.size(), 0) {
    for (std::uint32_t i = 0; i < ordering.order.size(); ++i) position_[ordering.order[i]] = i;
    budget_ = 32 * (d.nodes.size() + predecessors_.nodes.size()) + (std::uint64_t{1} << 22);
  }

  void run(const std::vector<NodeId>* only) {
    freed_by_.assign(d_.nodes.size(), no_node);
    if (only == nullptr) {
      for (NodeId id = 0; id < d_.nodes.size(); ++id) {
        if (const auto memory = freed_memory(d_.nodes[id].op)) match_free(id, *memory);
      }
    } else {
      for (NodeId id = 0; id < d_.nodes.size(); ++id) {  // frees are structure: checked when lowered
        const auto memory = freed_memory(d_.nodes[id].op);
        const NodeId alloc = memory ? alloc_of(d_, *memory) : no_node;
        if (alloc != no_node && freed_by_[alloc] == no_node) freed_by_[alloc] = id;
      }
    }
    if (only == nullptr) {
      for (NodeId id = 0; id < d_.nodes.size(); ++id) add_uses(id);
    } else {
      for (NodeId id : *only) add_uses(id);
    }
    prove();
    for (const Query& q : queries_) {
      if (!q.proven && !stopped_) diag_.add({node_path(d_, q.subject), node_path(d_, q.other)}, q.message);
    }
    if (stopped_) {
      diag_.add({}, "graph memory check stopped after " + std::to_string(steps_) +
                        " steps, before it could prove every use of graph memory ordered between its alloc and "
                        "its free: declare edges closer to the allocs and frees");
    }
  }

 private:
  std::string quoted(NodeId id) const { return quoted_name(node_path(d_, id)); }
  std::string about(NodeId id) const {
    return "node " + quoted(id) + " (" + std::string(kind_name(d_.nodes[id].op)) + "): ";
  }
  // "(no path leads from 'a' to 'b')", naming the nodes of the body the path would lie in.
  std::string no_path(const Query& q) const {
    if (q.from == no_node) return " (no path can lead from one to the other: they sit in different bodies)";
    return " (no path leads from " + quoted(q.from) + " to " + quoted(q.to) + ")";
  }

  void match_free(NodeId id, std::uint64_t memory) {
    const NodeId alloc = alloc_of(d_, memory);
    if (alloc == no_node) {
      diag_.report(d_, id, "frees memory that no alloc node of this graph allocated (a free takes an alloc node)");
      return;
    }
    if (symbol::offset_of(memory) != 0) {
      diag_.report(d_, id, "frees an address " + std::to_string(symbol::offset_of(memory)) +
                               " bytes into the memory of alloc " + quoted(alloc) +
                               ": a free takes the address its alloc gave");
      return;
    }
    if (freed_by_[alloc] != no_node) {
      diag_.add({node_path(d_, id), node_path(d_, freed_by_[alloc])},
                about(id) + "frees alloc " + quoted(alloc) + ", which " + quoted(freed_by_[alloc]) +
                    " frees already: an allocation is freed once");
      return;
    }
    const Node& free = d_.nodes[id];
    const Node& allocated = d_.nodes[alloc];
    if (free.parent != allocated.parent || free.body != allocated.body) {
      diag_.add({node_path(d_, id), node_path(d_, alloc)},
                about(id) + "frees alloc " + quoted(alloc) + " of another body: a free sits in the body of its alloc");
      return;
    }
    freed_by_[alloc] = id;
    Query q = make_query(d_, alloc, id, id);
    q.message = about(id) + "frees alloc " + quoted(alloc) + " but does not run after it" + no_path(q);
    queries_.push_back(std::move(q));
  }

  void add_uses(NodeId id) {
    allocs_.clear();
    for_each_use(d_, id, [&](NodeId alloc) {
      if (std::find(allocs_.begin(), allocs_.end(), alloc) == allocs_.end()) allocs_.push_back(alloc);
    });
    for (NodeId alloc : allocs_) {
      Query after = make_query(d_, alloc, id, id);
      after.message = about(id) + "uses the memory of alloc " + quoted(alloc) + " but does not run after it" +
                      no_path(after);
      queries_.push_back(std::move(after));
      const NodeId free = freed_by_[alloc];
      if (free == no_node) continue;
      Query before = make_query(d_, id, free, id);
      before.message = about(id) + "uses the memory of alloc " + quoted(alloc) + " but does not run before its free " +
                       quoted(free) + no_path(before);
      queries_.push_back(std::move(before));
    }
  }

  // Proves the queries by one search per distinct start: forward from each `from` up to its
  // farthest `to`.
  void prove() {
    std::unordered_map<NodeId, std::vector<std::size_t>> by_start;
    for (std::size_t i = 0; i < queries_.size(); ++i) {
      const Query& q = queries_[i];
      if (q.from != no_node && position_[q.from] < position_[q.to]) by_start[q.from].push_back(i);
    }
    if (by_start.empty()) return;
    const Adjacency successors = transpose(predecessors_, d_.nodes.size());
    // In query order, so that which searches run before the budget ends does not depend on hashing.
    for (const Query& first : queries_) {
      const auto group = by_start.find(first.from);
      if (group == by_start.end()) continue;
      std::uint32_t limit = 0;
      for (std::size_t i : group->second) limit = std::max(limit, position_[queries_[i].to]);
      if (!reach_from(successors, first.from, limit)) return;
      for (std::size_t i : group->second) queries_[i].proven = stamp_[queries_[i].to] == generation_;
      by_start.erase(group);
    }
  }

  // Stamps every node reachable from `start` without passing position `limit`; false when the
  // budget ran out.
  bool reach_from(const Adjacency& successors, NodeId start, std::uint32_t limit) {
    ++generation_;
    stack_.assign(1, start);
    stamp_[start] = generation_;
    while (!stack_.empty()) {
      const NodeId at = stack_.back();
      stack_.pop_back();
      steps_ += 1 + successors.count(at);
      if (steps_ > budget_) {
        stopped_ = true;
        return false;
      }
      for (const NodeId* s = successors.begin(at); s != successors.end(at); ++s) {
        if (position_[*s] <= limit && stamp_[*s] != generation_) {
          stamp_[*s] = generation_;
          stack_.push_back(*s);
        }
      }
    }
    return true;
  }

  const Description& d_;
  const Adjacency& predecessors_;
  Diagnostics& diag_;
  std::vector<std::uint32_t> position_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t generation_ = 0;
  std::vector<NodeId> stack_;
  std::vector<NodeId> freed_by_;  ///< per alloc: its free, or no_node
  std::vector<NodeId> allocs_;    ///< scratch: the allocs one node uses
  std::vector<Query> queries_;
  std::uint64_t steps_ = 0, budget_ = 0;
  bool stopped_ = false;
};

}  // namespace

void check_graph_memory(const Description& d, const Ordering& ordering, Diagnostics& diag,
                        const std::vector<NodeId>* only) {
  if (ordering.graph_memory) MemoryCheck(d, ordering, diag).run(only);
}

bool uses_graph_memory(const Description& d, const std::vector<NodeId>& nodes) {
  if (d.symbols.empty()) return false;  // no alloc's address was ever taken
  bool uses = false;
  for (NodeId id : nodes) for_each_use(d, id, [&](NodeId) { uses = true; });
  return uses;
}

std::vector<std::uint32_t> unfreed_allocs(const Description& d, const Plan& plan) {
  std::vector<char> freed(d.nodes.size(), 0);
  for (const Node& n : d.nodes) {
    const auto memory = freed_memory(n.op);
    if (const NodeId alloc = memory ? alloc_of(d, *memory) : no_node; alloc != no_node) freed[alloc] = 1;
  }
  std::vector<std::uint32_t> out;
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (allocated_bytes(d.nodes[id].op) && !freed[id]) out.push_back(plan.position[id]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void release_eager_memory(const Description& d, const Plan& plan, const std::vector<std::uint64_t>& values,
                          cudaStream_t stream) {
  std::unordered_set<std::uint64_t> freed;
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (freed_memory(d.nodes[id].op) && values[plan.position[id]] != 0) {
      freed.insert(values[plan.position[id]]);
    }
  }
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const std::uint64_t address = values[plan.position[id]];
    if (!allocated_bytes(d.nodes[id].op) || address == 0 || freed.count(address) != 0) continue;
    check(cudaFreeAsync(reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), stream), "cudaFreeAsync",
          node_path(d, id).c_str());
  }
}

}  // namespace flowdsl::lowering
