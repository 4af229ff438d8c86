// SPDX-License-Identifier: Apache-2.0
// The fusion pass's parts: the kernel nodes it may fuse (Member), the runs they form
// (RunBuilder), what the rest of the graph touches (Touches), and the kernel generated for a run
// (fusion_source.cpp). fusion.cpp walks a plan with them and checks that groups still stand.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "extent_checks.hpp"
#include "flowdsl/kind_traits.hpp"
#include "fusion.hpp"
#include "lowering_facets.hpp"

namespace flowdsl::lowering::fusion_parts {

constexpr std::size_t max_members = 64;  // one kernel's parameters stay small, its source short
constexpr std::uint32_t fused_block = 256;
constexpr std::uint32_t fused_unroll = 4;  // 16-byte vectors of each operand in flight a thread
constexpr std::uint64_t unbounded = std::numeric_limits<std::uint64_t>::max();

inline bool is_identifier_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_identifier_char(char c) { return is_identifier_start(c) || (c >= '0' && c <= '9'); }

// Calls `identifier(name)` for each identifier of `text` (not those inside numbers: 1e5f) and
// `other(text)` for what lies between them; the two together give back `text`.
template <class Identifier, class Other>
void for_each_token(std::string_view text, Identifier&& identifier, Other&& other) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_identifier_start(text[i]) && (i == 0 || !is_identifier_char(text[i - 1]))) {
      std::size_t end = i + 1;
      while (end < text.size() && is_identifier_char(text[end])) ++end;
      identifier(text.substr(i, end - i));
      i = end;
    } else {
      std::size_t end = i + 1;
      while (end < text.size() && !(is_identifier_start(text[end]) && !is_identifier_char(text[end - 1]))) ++end;
      other(text.substr(i, end - i));
      i = end;
    }
  }
}

/// Whether `t` is an element type (f32, f16, bf16) of element-wise kernels.
inline bool is_element_type(ScalarType t) { return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16; }
/// The C type of a scalar parameter of a fused kernel, or null for element types.
const char* scalar_c_type(ScalarType t);

// A kernel node the pass may fuse, with what it needs of its registered entry.
struct Member {
  NodeId id = no_node;
  const LaunchFields* op = nullptr;  // the kernel's launch and arguments
  const KernelInfo* info = nullptr;
  std::size_t output = 0;                  // the one non-const pointer
  std::string extent;                      // the output's extent: the element count
  std::vector<std::size_t> extent_params;  // the integer parameters it names, first use first
  std::int64_t n = 0;
  std::vector<bool> gathered;      // per parameter: a pointer the element function indexes (p[...])
  std::vector<std::uint64_t> span; // per parameter: bytes a pointer touches (0 for scalars)

  std::uint64_t word(std::size_t p) const { return op->args.word(p); }
  ScalarType type(std::size_t p) const { return info->params[p].type.scalar; }
  std::uint64_t bytes(std::size_t p) const { return span[p]; }
  bool pointer(std::size_t p) const { return info->params[p].type.pointer; }
};

constexpr std::string_view not_a_kernel = "-";

/// Why node `id` cannot join a group ("-": not a kernel, nothing to say), or "" with `out` set.
std::string as_member(const Description& d, NodeId id, KernelInfos& kernels, Member& out);

// Where the members of a run so far read and write: a new member joins when its count is theirs
// and each of its pointers equals one of their ranges (same element type) or misses them all.
class RunBuilder {
 public:
  bool accepts(const Description& d, const Member& m, std::string& why) const {
    if (members_.empty()) return true;
    if (members_.size() == max_members) {
      why = "the run before it holds " + std::to_string(max_members) + " kernels, the most one fused kernel takes";
      return false;
    }
    if (m.n != members_.front().n) {
      why = "its element count " + std::to_string(m.n) + " differs from the " + std::to_string(members_.front().n) +
            " of " + quoted_name(node_path(d, members_.back().id));
      return false;
    }
    for (std::size_t p = 0; p < m.info->params.size(); ++p) {
      if (!m.pointer(p) || m.bytes(p) == 0) continue;
      const std::uint64_t begin = m.word(p), end = begin + m.bytes(p);
      const bool writes = p == m.output;
      for (const Range& r : ranges_) {
        if (!(begin < r.end && r.begin < end)) continue;
        // Indexed operands are read by any thread: nothing in the group may write them. Others
        // meet element by element: the same pointer and type, or apart.
        const bool clash = (m.gathered[p] || r.gathered) ? (writes || r.written)
                                                         : !(begin == r.begin && m.type(p) == r.type);
        if (clash) {
          why = "its argument '" + m.info->params[p].name + "' overlaps " +
                (m.gathered[p] || r.gathered ? std::string("memory indexed or written by ")
                                             : std::string("an operand at another offset or of another type in ")) +
                quoted_name(node_path(d, r.owner));
          return false;
        }
      }
    }
    return true;
  }
  void add(Member m) {
    for (std::size_t p = 0; p < m.info->params.size(); ++p) {
      if (m.pointer(p) && m.bytes(p) != 0) {
        ranges_.push_back(Range{m.word(p), m.word(p) + m.bytes(p), m.type(p), m.id, p == m.output, m.gathered[p]});
      }
    }
    members_.push_back(std::move(m));
  }
  std::vector<Member>& members() { return members_; }
  void clear() {
    members_.clear();
    ranges_.clear();
  }

 private:
  struct Range {
    std::uint64_t begin, end;
    ScalarType type;
    NodeId owner;
    bool written;   // the owner's output
    bool gathered;  // indexed by the owner's element function
  };
  std::vector<Member> members_;
  std::vector<Range> ranges_;
};

/// Where access `a` ends: at its extent, or, unknown, at the end of the named buffer or graph
/// memory it starts in (as the hazard check takes it), else at the end of memory.
std::uint64_t access_end(const Access& a, BufferIndex& buffers);

// Every node's accesses, for the question whether a node outside a group touches an output the
// group would keep in registers; and whether some node may touch any memory.
class Touches {
 public:
  Touches(const Description& d, KernelInfos& kernels) {
    BufferIndex buffers(d);
    std::vector<Access> accesses;
    for (NodeId id = 0; id < d.nodes.size(); ++id) {
      const Node& node = d.nodes[id];
      if (unknown_.empty()) unknown_ = touches_any(d, id, kernels);
      accesses.assign(node.accesses.begin(), node.accesses.end());
      std::visit([&](const auto& op) { lowering_of(op).derived_accesses(op, kernels, accesses); }, node.op);
      for (const Access& a : accesses) {
        const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
        const std::uint64_t end = access_end(a, buffers);
        if (end == unbounded) {
          open_.push_back(Span{begin, end, id});
        } else {
          spans_.push_back(Span{begin, end, id});
          longest_ = std::max(longest_, end - begin);
        }
      }
    }
    // Buffers read after launches: touched from outside every group.
    for (const NamedBuffer& b : d.buffers) {
      if (!b.output) continue;
      const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b.ptr));
      spans_.push_back(Span{begin, begin + b.bytes, no_node});
      longest_ = std::max<std::uint64_t>(longest_, b.bytes);
    }
    std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  }
  /// Why every output must be stored (a node that may touch any memory), or "".
  const std::string& unknown() const { return unknown_; }
  /// Whether a node other than `members` touches [begin, end).
  bool touched_by_others(std::uint64_t begin, std::uint64_t end, const std::vector<Member>& members) const {
    auto outside = [&](NodeId id) {
      return std::none_of(members.begin(), members.end(), [&](const Member& m) { return m.id == id; });
    };
    for (const Span& s : open_) {
      if (s.begin < end && outside(s.node)) return true;
    }
    const std::uint64_t from = begin > longest_ ? begin - longest_ : 0;
    auto it = std::lower_bound(spans_.begin(), spans_.end(), from, [](const Span& s, std::uint64_t v) { return s.begin < v; });
    for (; it != spans_.end() && it->begin < end; ++it) {
      if (it->end > begin && outside(it->node)) return true;
    }
    return false;
  }

 private:
  static std::string touches_any(const Description& d, NodeId id, KernelInfos& kernels) {
    const Operation& op = d.nodes[id].op;
    std::string why;
    if (reaches_any_memory(op)) why = "may read any memory";
    if (const std::optional<RegisteredCall> call = registered_call(op)) {
      const KernelInfo* info = registered_entry(call->info, call->function, *call->args, kernels);
      if (info == nullptr || !info->checked()) why = std::string(call->action) + " whose pointers' extents are not declared";
    }
    return why.empty() ? why : "node " + quoted_name(node_path(d, id)) + " " + why;
  }
  struct Span {
    std::uint64_t begin, end;
    NodeId node;
  };
  std::vector<Span> spans_;
  std::vector<Span> open_;  // unknown extents: to the end of memory
  std::uint64_t longest_ = 0;
  std::string unknown_;
};

/// FusedGroup::pattern of `members`.
std::vector<std::int32_t> wiring_pattern(const std::vector<Member>& members);

/// The group of `members` (a run RunBuilder accepted): its kernel's source, parameters and stored
/// outputs. `touches`: the graph's accesses, to decide which outputs stay in registers;
/// `stores_all`: why none may, or empty. (fusion_source.cpp)
FusedGroup generate(const std::vector<Member>& members, const Touches& touches, const std::string& stores_all);

}  // namespace flowdsl::lowering::fusion_parts
