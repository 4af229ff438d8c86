// SPDX-License-Identifier: Apache-2.0
// Validation: every problem of a description, each attached to the node(s) it is about.
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "edges.hpp"
#include "flowdsl/registry.hpp"
#include "graph_memory.hpp"
#include "lowering_facets.hpp"
#include "scratch.hpp"

namespace flowdsl {
namespace lowering {

void Diagnostics::report(const Description& d, NodeId id, const std::string& message, std::string member) {
  std::string path = node_path(d, id);
  std::string text = "node " + quoted_name(path) + " (" + std::string(kind_name(d.nodes[id].op)) + "): " + message;
  out_.push_back(Diagnostic{{std::move(path)}, std::move(text), std::move(member)});
}

bool BufferIndex::find_allocs() const noexcept {
  holds_allocs_ = std::any_of(d_.symbols.begin(), d_.symbols.end(), [&](NodeId owner) {
    return owner < d_.nodes.size() && allocated_bytes(d_.nodes[owner].op).has_value();
  });
  return holds_allocs_ != 0;
}

void BufferIndex::build() {
  // Symbols are few (the graph's allocs and conditions): scanning them costs little.
  for (std::uint32_t index = 0; index < d_.symbols.size(); ++index) {
    const NodeId owner = d_.symbols[index];
    const std::optional<std::size_t> bytes = owner < d_.nodes.size() ? allocated_bytes(d_.nodes[owner].op) : std::nullopt;
    if (!bytes || *bytes == 0 || *bytes - 1 > symbol::max_offset) continue;
    allocs_.push_back(NamedBuffer{node_path(d_, owner), reinterpret_cast<const void*>(symbol::make(index)), *bytes, false});
  }
  sorted_.reserve(d_.buffers.size() + allocs_.size());
  for (const NamedBuffer& b : d_.buffers) sorted_.push_back(&b);
  for (const NamedBuffer& b : allocs_) sorted_.push_back(&b);
  std::sort(sorted_.begin(), sorted_.end(), [](const NamedBuffer* a, const NamedBuffer* b) {
    return reinterpret_cast<std::uintptr_t>(a->ptr) < reinterpret_cast<std::uintptr_t>(b->ptr);
  });
  built_ = true;
}

const NamedBuffer* BufferIndex::find(std::uintptr_t address) {
  if (empty()) return nullptr;
  if (!built_) build();
  // The last buffer starting at or before `address`, if it reaches it.
  auto it = std::upper_bound(sorted_.begin(), sorted_.end(), address, [](std::uintptr_t a, const NamedBuffer* b) {
    return a < reinterpret_cast<std::uintptr_t>(b->ptr);
  });
  if (it == sorted_.begin()) return nullptr;
  const NamedBuffer* b = *--it;
  return address - reinterpret_cast<std::uintptr_t>(b->ptr) < b->bytes ? b : nullptr;
}

const KernelInfo* KernelInfos::look_up(const void* function) {
  const auto [it, added] = found_.try_emplace(function, nullptr);
  if (added) it->second = KernelRegistry::global().find_function(function);
  last_function_ = function;
  last_ = it->second;
  looked_ = true;
  return last_;
}

void Diagnostics::add(std::vector<std::string> nodes, std::string message, std::string member) {
  out_.push_back(Diagnostic{std::move(nodes), std::move(message), std::move(member)});
}

void Diagnostics::add(std::vector<Diagnostic>&& problems) {
  out_.insert(out_.end(), std::make_move_iterator(problems.begin()), std::make_move_iterator(problems.end()));
}

void check_same_device(NodeCheck& check, const void* ptr, int device, const char* member) {
  const Description& d = check.description();
  if (ptr == nullptr || symbol::is_symbol(reinterpret_cast<std::uintptr_t>(ptr))) return;
  NodeId conditional = no_node;
  for (NodeId at = check.node().parent; at != no_node && conditional == no_node; at = d.nodes[at].parent) {
    if (is_conditional(d.nodes[at].op)) conditional = at;
  }
  if (conditional == no_node) return;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != device) {
    check.report(std::string("its operand '") + member + "' is memory of device " + std::to_string(attributes.device) +
                     ", but the nodes in conditional node " + quoted_name(node_path(d, conditional)) +
                     " must all run on one device (" + std::to_string(device) + ")",
                 member);
  }
}

void check_range(NodeCheck& check, const void* ptr, std::size_t bytes, const char* verb, const char* member) {
  if (ptr == nullptr || bytes == 0) return;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const NamedBuffer* b = check.buffers().find(address);
  if (b == nullptr) return;
  const std::uint64_t offset = address - reinterpret_cast<std::uintptr_t>(b->ptr);
  if (bytes <= b->bytes - offset) return;
  check.report(std::string(verb) + " " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                   " of buffer " + quoted_name(b->name) + " (" + std::to_string(b->bytes) + " bytes)",
               member);
}

void check_pointer(NodeCheck& check, std::uint64_t value, const std::string& what, const std::string& member) {
  if (!symbol::is_symbol(value)) return;
  const Description& d = check.description();
  const std::uint32_t index = symbol::index_of(value);
  const NodeId owner = index < d.symbols.size() ? d.symbols[index] : no_node;
  if (owner >= d.nodes.size()) {
    check.report(what + " holds a symbolic address (#" + std::to_string(index) + ") that no node of this graph gave",
                 member);
  } else if (is_conditional(d.nodes[owner].op)) {
    check.report(what + " holds the condition of node " + quoted_name(node_path(d, owner)) + ", not an address",
                 member);
  } else if (const auto bytes = allocated_bytes(d.nodes[owner].op); bytes && symbol::offset_of(value) >= *bytes) {
    check.report(what + " points " + std::to_string(symbol::offset_of(value)) + " bytes into the memory of alloc " +
                     quoted_name(node_path(d, owner)) + ", which has " + std::to_string(*bytes) + " bytes",
                 member);
  }
}

namespace {

// FNV-1a over the name, 8 bytes at a time, then a final mix: node names are short, and this
// costs a fraction of std::hash's general-purpose hash. Equal hashes are compared by name.
// The last bytes are read as two overlapping words (4 to 7 bytes) or as their first, middle and
// last byte (1 to 3): with the length mixed in, that is every byte, and no call to memcpy.
std::uint64_t name_hash(const std::string& name) {
  const char* p = name.data();
  const std::size_t size = name.size();
  std::uint64_t h = 0xcbf29ce484222325ULL;
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 0x100000001b3ULL;
  }
  const std::size_t left = size - i;
  std::uint64_t tail = 0;
  if (left >= 4) {
    std::uint32_t first = 0, last = 0;
    std::memcpy(&first, p + i, 4);
    std::memcpy(&last, p + size - 4, 4);
    tail = first | (std::uint64_t{last} << 32);
  } else if (left > 0) {
    tail = static_cast<unsigned char>(p[i]) | (std::uint64_t{static_cast<unsigned char>(p[i + left / 2])} << 8) |
           (std::uint64_t{static_cast<unsigned char>(p[size - 1])} << 16);
  }
  h = (h ^ tail ^ (std::uint64_t{size} << 56)) * 0x100000001b3ULL;
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ULL;
  return h ^ (h >> 32);
}

// The first node of each (name, body), to find names declared more than once: an open-addressing
// table, at most half full, whose slots hold a node id and 32 bits of its hash, so that names are
// compared only when those match. Nodes are added in id order, so each duplicate finds the first
// node of its name.
class NameTable {
 public:
  explicit NameTable(std::size_t count) {
    std::size_t capacity = 16;
    while (capacity < 2 * count) capacity *= 2;
    mask_ = capacity - 1;
    take_scratch<ScratchUse::name_slots>(slots_);
    slots_.assign(capacity, free_slot);
  }
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;
  ~NameTable() { keep_scratch<ScratchUse::name_slots>(std::move(slots_)); }

  // The hash add() wants of node `n`, whose slot it starts fetching: the table outgrows the cache
  // in large graphs, and a walk that checks the rest of the node before add() hides the wait.
  std::uint64_t prepare(const Node& n) const {
    // Names are unique within their body: the body takes part in the hash and the comparison.
    const std::uint64_t h = name_hash(n.name) ^ (std::uint64_t{n.parent} * 0x9e3779b97f4a7c15ULL + n.body);
    __builtin_prefetch(&slots_[h & mask_]);
    return h;
  }

  // Reports a name the rule refuses (node_name_problem) at once, naming the node by its id: its
  // path would hold the name; a duplicate, with the others of its name, in report().
  // `h`: prepare(n).
  void add(const Description& d, NodeId id, const Node& n, std::uint64_t h, Diagnostics& diag) {
    if (const std::string problem = node_name_problem(n.name); !problem.empty()) {
      const NodeId parent = n.parent;
      const std::string node = "node #" + std::to_string(id) + " (" + std::string(kind_name(n.op)) + ")" +
                               (parent == no_node ? std::string() : " in " + quoted_name(node_path(d, parent)));
      diag.add({}, n.name.empty() ? node + " has an empty name"
                                  : node + " has the name " + quoted_name(n.name) + ", which is not valid: " + problem);
      return;
    }
    const std::uint64_t tag = h & 0xffffffff00000000ULL;
    for (std::size_t at = h & mask_;; at = (at + 1) & mask_) {
      const std::uint64_t slot = slots_[at];
      if (slot == free_slot) {
        slots_[at] = tag | id;
        return;
      }
      if ((slot & 0xffffffff00000000ULL) != tag) continue;
      const NodeId first = static_cast<NodeId>(slot & 0xffffffffu);
      const Node& other = d.nodes[first];
      if (other.parent == n.parent && other.body == n.body && other.name == n.name) {
        duplicates_.emplace_back(first, id);
        return;
      }
    }
  }

  // One problem per name declared more than once, listing its nodes.
  void report(const Description& d, Diagnostics& diag) {
    if (duplicates_.empty()) return;
    // By first node, then (as found) by id: each name's message lists its nodes in id order.
    std::stable_sort(duplicates_.begin(), duplicates_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < duplicates_.size();) {
      const NodeId first = duplicates_[i].first;
      std::string where = "#" + std::to_string(first);
      std::size_t j = i;
      for (; j < duplicates_.size() && duplicates_[j].first == first; ++j) {
        if (j - i < max_listed - 1) where += ", #" + std::to_string(duplicates_[j].second);
      }
      const std::size_t count = j - i + 1;
      if (count > max_listed) where += " and " + std::to_string(count - max_listed) + " more";
      const std::string path = node_path(d, first);
      diag.add({path}, "node " + quoted_name(path) + " is declared " + std::to_string(count) + " times (nodes " +
                           where + "): names must be unique within their body");
      i = j;
    }
  }

 private:
  static constexpr std::uint64_t free_slot = ~std::uint64_t{0};
  static constexpr std::size_t max_listed = 10;  ///< nodes a duplicate's message lists by id
  std::size_t mask_ = 0;
  std::vector<std::uint64_t> slots_;                  ///< (hash >> 32) << 32 | id, or free_slot
  std::vector<std::pair<NodeId, NodeId>> duplicates_;  ///< (first, later)
};

// Reports each cycle once, as a path of names, among the nodes a topological sort left over.
void check_cycles(const Description& d, const ResolvedEdges& edges, const std::vector<NodeId>& order,
                  Diagnostics& diag) {
  if (order.size() == d.nodes.size()) return;
  std::vector<char> sorted(d.nodes.size(), 0);
  for (NodeId id : order) sorted[id] = 1;
  std::vector<char> visited(d.nodes.size(), 0);
  std::vector<int> seen_at(d.nodes.size(), -1);
  for (NodeId start = 0; start < d.nodes.size(); ++start) {
    if (sorted[start] || visited[start]) continue;
    // Every unsorted node has an unsorted predecessor, so walking predecessors must repeat:
    // either within this walk (a new cycle) or into an earlier walk (a cycle already reported).
    std::vector<NodeId> path;
    NodeId at = start;
    while (seen_at[at] < 0 && !visited[at]) {
      seen_at[at] = static_cast<int>(path.size());
      path.push_back(at);
      at = *std::find_if(edges.predecessors.begin(at), edges.predecessors.end(at), [&](NodeId p) { return !sorted[p]; });
    }
    if (!visited[at]) {
      std::vector<NodeId> cycle(path.begin() + seen_at[at], path.end());
      std::reverse(cycle.begin(), cycle.end());  // walked backwards: print in edge order
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());  // first declared first
      std::vector<std::string> names;
      std::string text;
      for (NodeId id : cycle) {
        names.push_back(node_path(d, id));
        text += quoted_name(names.back()) + " -> ";
      }
      text += quoted_name(names.front());
      diag.add(std::move(names), "cycle: " + text);
    }
    for (NodeId id : path) {
      visited[id] = 1;
      seen_at[id] = -1;
    }
  }
}

// Every body a node's kind holds must hold at least one node (CUDA's bodies cannot be empty).
void check_bodies(const Description& d, Diagnostics& diag) {
  std::vector<std::size_t> first(d.nodes.size() + 1, 0);  // per node: index of its first body's flag
  for (NodeId id = 0; id < d.nodes.size(); ++id) first[id + 1] = first[id] + body_count(d.nodes[id].op);
  std::vector<bool> filled(first.back(), false);
  for (const Node& n : d.nodes) {
    if (n.parent != no_node && n.body < first[n.parent + 1] - first[n.parent]) filled[first[n.parent] + n.body] = true;
  }
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    for (std::size_t b = 0; b < first[id + 1] - first[id]; ++b) {
      if (!filled[first[id] + b]) {
        diag.report(d, id, "body " + std::to_string(b) + " is empty: declare at least one node in it");
      }
    }
  }
}

// What a conditional body may hold, from the kinds' allowed_in_conditional_body: "kernel,
// memcpy, ..., library and conditional nodes" (the conditional kinds named once, last).
template <class... Ops>
std::string kinds_allowed_in_bodies(const std::variant<Ops...>*) {
  std::vector<std::string_view> names;
  bool conditional = false;
  const auto add = [&](bool allowed, bool is_conditional, std::string_view name) {
    if (!allowed) return;
    if (is_conditional) {
      conditional = true;
    } else {
      names.push_back(name);
    }
  };
  (add(allowed_in_conditional_body<Ops>, conditional_kind<Ops>, Ops::kind), ...);
  if (conditional) names.push_back("conditional");
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += i == 0 ? "" : i + 1 == names.size() ? " and " : ", ";
    text += names[i];
  }
  return text + " nodes";
}

const std::string& allowed_in_bodies_text() {
  static const std::string text = kinds_allowed_in_bodies(static_cast<const Operation*>(nullptr));
  return text;
}

// CUDA's rules for conditional nodes: what their bodies may hold, where they may sit, and that
// a kernel sets each one's condition (a WHILE's from inside its body, or it never ends).
void check_conditionals(const Description& d, Diagnostics& diag) {
  std::vector<std::uint8_t> set_by;  // per node: 1 = some kernel sets it, 2 = one inside its bodies does
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const Node& n = d.nodes[id];
    NodeId conditional = no_node;  // the innermost conditional node holding this one
    NodeId child = no_node;        // the innermost child node holding this one
    for (NodeId at = n.parent; at != no_node; at = d.nodes[at].parent) {
      if (conditional == no_node && is_conditional(d.nodes[at].op)) conditional = at;
      if (child == no_node && is_child_graph(d.nodes[at].op)) child = at;
    }
    const bool allowed =
        std::visit([](const auto& op) { return allowed_in_conditional_body<std::decay_t<decltype(op)>>; }, n.op);
    if (conditional != no_node && !allowed) {
      diag.report(d, id,
                  "cannot run inside conditional node " + quoted_name(node_path(d, conditional)) +
                      " (CUDA allows " + allowed_in_bodies_text() + " there)");
    }
    if (is_conditional(n.op) && child != no_node) {
      diag.report(d, id,
                  "a conditional node cannot sit inside child graph " + quoted_name(node_path(d, child)) +
                      " (CUDA cannot nest a graph holding one as a child): put it in a conditional "
                      "node's body or at the top level");
    }
    const LaunchFields* kernel = launch_fields(n.op);
    if (kernel == nullptr) continue;
    for (std::size_t i = 0; i < kernel->args.size(); ++i) {
      if (kernel->args.kind(i) != SlotKind::condition || !symbol::is_symbol(kernel->args.word(i))) continue;
      const std::uint32_t index = symbol::index_of(kernel->args.word(i));
      if (index >= d.symbols.size()) continue;  // reported by the kernel's parameter check
      const NodeId target = d.symbols[index];
      if (set_by.empty()) set_by.assign(d.nodes.size(), 0);
      bool inside = false;
      for (NodeId at = n.parent; at != no_node && !inside; at = d.nodes[at].parent) inside = at == target;
      set_by[target] = std::max<std::uint8_t>(set_by[target], inside ? 2 : 1);
    }
  }
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const Operation& op = d.nodes[id].op;
    if (!is_conditional(op)) continue;
    const std::uint8_t set = set_by.empty() ? 0 : set_by[id];
    if (repeats_body(op) && set < 2) {
      diag.report(d, id, "no kernel in its body sets its condition, so the loop would never end or never run: "
                         "pass its condition() to a kernel of its body");
    } else if (set == 0 && !conditional_fields(op)->default_value.has_value()) {
      diag.report(d, id, "nothing sets its condition: give it a default value or pass its condition() to a kernel");
    }
  }
}

}  // namespace

Ordering validate(const Description& d, Diagnostics& diag, bool structure_hashes) {
  Ordering ordering;
  if (d.nodes.empty()) {
    diag.add({}, "graph is empty: declare at least one node");
    return ordering;
  }
  // One walk over the nodes checks names, structure and parameters, and notes what later steps
  // need of them, so that a large graph's nodes pass through the cache once. The problems come
  // out in the order of separate passes: names, edges, then each node's own.
  NameTable names(d.nodes.size());
  std::vector<Diagnostic> node_problems;
  Diagnostics node_diag(node_problems);
  BufferIndex buffers(d);
  KernelInfos kernels;
  // Whether some node declares or implies an access: in a graph where none does, the hazard check
  // has nothing to look at. Implied accesses are derived on this walk until one turns up (the
  // check derives them all again then), rather than on a walk of the check's own.
  bool accesses = false;
  std::vector<Access> derived;  // stays empty until accesses is true
  bool one_body = true;         // every node sits where the first does
  const Node& first = d.nodes.front();
  StructureHashes structure;
  if (structure_hashes) {
    take_scratch<ScratchUse::structure>(ordering.structure);
    ordering.structure.reserve(d.nodes.size());
  }
  // Names are hashed, and their table slots fetched, `ahead` nodes before the walk adds them: a
  // large graph's table lies outside the nearer caches, and one node's checks are too short to
  // hide the wait for its own slot.
  constexpr NodeId ahead = 16;
  std::uint64_t hashes[ahead];
  auto next = d.nodes.begin();
  for (NodeId i = 0; i < ahead && next != d.nodes.end(); ++i, ++next) hashes[i] = names.prepare(*next);
  NodeId id = 0;
  for (const Node& n : d.nodes) {
    const std::uint64_t name = hashes[id % ahead];
    if (next != d.nodes.end()) {
      hashes[id % ahead] = names.prepare(*next);
      ++next;
    }
    one_body = one_body && n.parent == first.parent && n.body == first.body;
    NodeCheck check(d, id, node_diag, buffers, kernels);
    std::visit([&](const auto& op) {
      const auto& facets = lowering_of(op);
      facets.check_structure(op, check);
      facets.check_parameters(op, check);
      ordering.nested = ordering.nested || bodies_of(op) != 0;
      ordering.graph_memory = ordering.graph_memory || is_graph_memory<std::decay_t<decltype(op)>>;
      if (structure_hashes) ordering.structure.push_back(structure(op, n.op.index()));
      if (d.check_hazards && !accesses) {
        facets.derived_accesses(op, kernels, derived);
        accesses = !derived.empty() || !n.accesses.empty();
      }
    }, n.op);
    names.add(d, id, n, name, diag);
    ++id;
  }
  names.report(d, diag);
  ordering.edges = resolve_edges(d, diag, one_body);
  diag.add(std::move(node_problems));
  if (ordering.nested) {
    check_bodies(d, diag);
    check_conditionals(d, diag);
  }
  ordering.order = topological_order(ordering.edges, d.nodes.size());
  check_cycles(d, ordering.edges, ordering.order, diag);
  if (ordering.order.size() == d.nodes.size()) {
    check_graph_memory(d, ordering, diag);
    if (d.check_hazards && accesses) check_hazards(d, ordering, buffers, kernels, diag);
  }
  return ordering;
}

void recycle(Ordering&& ordering) {
  keep_scratch<ScratchUse::predecessor_offsets>(std::move(ordering.edges.predecessors.offsets));
  keep_scratch<ScratchUse::predecessor_nodes>(std::move(ordering.edges.predecessors.nodes));
  keep_scratch<ScratchUse::order>(std::move(ordering.order));
  keep_scratch<ScratchUse::structure>(std::move(ordering.structure));
}

}  // namespace lowering

std::vector<Diagnostic> validate(const Description& d) {
  std::vector<Diagnostic> out;
  lowering::Diagnostics diag(out);
  lowering::validate(d, diag);
  return out;
}

namespace {

void check_parameters_of(const Description& d, NodeId id, lowering::Diagnostics& diag, lowering::BufferIndex& buffers,
                         lowering::KernelInfos& kernels) {
  lowering::NodeCheck check(d, id, diag, buffers, kernels);
  std::visit([&](const auto& op) { lowering::lowering_of(op).check_parameters(op, check); }, d.nodes[id].op);
}

// A parameter may now point into an alloc's memory: its node must run between that alloc and its
// free. Only updates of nodes that use graph memory pay for the order (edges and a sort).
void check_memory_order(const Description& d, const std::vector<NodeId>* nodes, lowering::Diagnostics& diag) {
  std::vector<Diagnostic> ignored;  // edge problems were reported when the graph was lowered
  lowering::Diagnostics quiet(ignored);
  lowering::Ordering ordering;
  ordering.edges = lowering::resolve_edges(d, quiet);
  ordering.order = lowering::topological_order(ordering.edges, d.nodes.size());
  ordering.graph_memory = true;  // the nodes use an alloc's memory
  if (ordering.order.size() == d.nodes.size()) lowering::check_graph_memory(d, ordering, diag, nodes);
}

}  // namespace

std::vector<Diagnostic> validate_parameters(const Description& d, const std::vector<NodeId>& nodes) {
  std::vector<Diagnostic> out;
  lowering::Diagnostics diag(out);
  lowering::BufferIndex buffers(d);
  lowering::KernelInfos kernels;
  for (NodeId id : nodes) check_parameters_of(d, id, diag, buffers, kernels);
  if (lowering::uses_graph_memory(d, nodes)) check_memory_order(d, &nodes, diag);
  return out;
}

std::vector<Diagnostic> validate_parameters(const Description& d) {
  std::vector<Diagnostic> out;
  lowering::Diagnostics diag(out);
  lowering::BufferIndex buffers(d);
  lowering::KernelInfos kernels;
  for (NodeId id = 0; id < d.nodes.size(); ++id) check_parameters_of(d, id, diag, buffers, kernels);
  if (!d.symbols.empty()) {  // some alloc's address may be used
    std::vector<NodeId> all(d.nodes.size());
    for (NodeId id = 0; id < d.nodes.size(); ++id) all[id] = id;
    if (lowering::uses_graph_memory(d, all)) check_memory_order(d, &all, diag);
  }
  return out;
}

}  // namespace flowdsl
