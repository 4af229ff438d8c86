// SPDX-License-Identifier: Apache-2.0
// The data-flow view of DOT dumps (DotOptions::data_flow): the memory the nodes touch drawn as
// nodes of its own, with an edge from a buffer to each node that reads it and from each node
// that writes it to the buffer, from the accesses validation and edge inference use.
#include "dot_data_flow.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "flowdsl/hazards.hpp"

namespace flowdsl::io {
namespace {

// A byte range of one buffer, [lo, hi).
using Range = std::pair<std::uint64_t, std::uint64_t>;

// What one node does to one buffer.
struct Use {
  bool reads = false;
  bool writes = false;
  std::vector<Range> ranges;  // empty for memory of unknown size (an address in no buffer)
  std::uint64_t bytes = 0;    // for such memory: the most bytes an access declares (0: unknown)
};

// One buffer of the view: a named buffer, an alloc's memory, or an address in neither.
struct Memory {
  std::string label;
  bool named = true;  // a named buffer or alloc memory (its bounds known); else an address
  std::uint64_t size = 0;
  std::map<NodeId, Use> uses;  // by node, so that edges come out in declaration order
};

// "[0, 256) [1024, 2048)": the ranges merged; empty when they cover the whole buffer.
std::string ranges_text(std::vector<Range> ranges, std::uint64_t size) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (merged.size() == 1 && merged[0] == Range{0, size}) return {};
  std::string out;
  for (const Range& r : merged) {
    out += (out.empty() ? "[" : " [") + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
  }
  return out;
}

std::string bytes_text(std::uint64_t bytes) { return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes"); }

}  // namespace

std::string data_flow_dot(const Description& d, AddressNames& addresses) {
  std::vector<Memory> memory;
  std::map<const void*, std::size_t> index;  // a named buffer's start, or an unnamed address -> memory
  // Every named buffer, touched or not, in declaration order; the rest as nodes first touch them.
  for (const NamedBuffer& b : d.buffers) {
    index.emplace(b.ptr, memory.size());
    memory.push_back(Memory{b.name + "\n" + bytes_text(b.bytes), true, b.bytes, {}});
  }
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    for (const Access& a : accesses_of(d, id)) {
      if (a.ptr == nullptr) continue;
      const NamedBuffer* holder = addresses.holder(a.ptr);
      const void* key = holder ? holder->ptr : a.ptr;
      auto [it, added] = index.emplace(key, memory.size());
      if (added) {
        memory.push_back(
            holder ? Memory{holder->name + " (graph memory)\n" + bytes_text(holder->bytes), true, holder->bytes, {}}
                   : Memory{addresses(a.ptr), false, 0, {}});
      }
      Memory& m = memory[it->second];
      Use& use = m.uses[id];
      use.reads = use.reads || a.mode != AccessMode::write;
      use.writes = use.writes || a.mode != AccessMode::read;
      if (!m.named) {
        use.bytes = std::max<std::uint64_t>(use.bytes, a.bytes);
        continue;
      }
      // An access of unknown extent reaches the end of its buffer, as for hazards.
      const std::uint64_t lo = reinterpret_cast<std::uintptr_t>(a.ptr) - reinterpret_cast<std::uintptr_t>(holder->ptr);
      const std::uint64_t size = holder->bytes;  // lo < size: the holder holds a.ptr
      const std::uint64_t hi = a.bytes == 0 || a.bytes > size - lo ? size : lo + a.bytes;
      use.ranges.emplace_back(lo, hi);
    }
  }

  std::string out;
  for (std::size_t i = 0; i < memory.size(); ++i) {
    const Memory& m = memory[i];
    const std::string node = "b" + std::to_string(i);
    out += "  " + node + " [label=" + quoted(m.label) +
           ", shape=parallelogram, style=" + (m.named ? "filled" : "\"filled,dashed\"") + ", fillcolor=gray92];\n";
    for (const auto& [id, use] : m.uses) {
      const std::string range = m.named ? ranges_text(use.ranges, m.size) : use.bytes ? bytes_text(use.bytes) : "";
      const std::string label = range.empty() ? "" : ", label=" + quoted(range);
      const std::string at = "n" + std::to_string(id);
      if (use.reads && use.writes) {
        out += "  " + at + " -> " + node + " [dir=both, color=purple, fontcolor=purple, fontsize=10" + label + "];\n";
      } else if (use.writes) {
        out += "  " + at + " -> " + node + " [color=darkorange, fontcolor=darkorange, fontsize=10" + label + "];\n";
      } else {
        out += "  " + node + " -> " + at + " [color=steelblue, fontcolor=steelblue, fontsize=10" + label + "];\n";
      }
    }
  }
  return out;
}

}  // namespace flowdsl::io
