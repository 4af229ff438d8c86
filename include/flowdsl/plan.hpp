// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file plan.hpp
/// \brief Validation and lowering of a description to a plan: pure data, no GPU needed.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/graph.hpp"

namespace flowdsl {

/// \brief A list of step indices that keeps up to four inline: most steps have one or two
/// dependencies, so a plan of a chain allocates nothing per step. A vector's interface, as far
/// as plans use it.
class IndexList {
 public:
  IndexList() noexcept : inline_{} {}
  IndexList(std::initializer_list<std::uint32_t> values) : IndexList() {
    reserve(values.size());
    for (std::uint32_t v : values) push_back(v);
  }
  IndexList(const IndexList& other) : IndexList() { *this = other; }
  IndexList(IndexList&& other) noexcept : IndexList() { take(other); }
  IndexList& operator=(const IndexList& other) {
    if (this == &other) return *this;
    clear();
    reserve(other.size_);
    std::copy(other.begin(), other.end(), data());
    size_ = other.size_;
    return *this;
  }
  IndexList& operator=(IndexList&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~IndexList() { release(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const std::uint32_t* data() const noexcept { return capacity_ > inline_capacity ? heap_ : inline_; }
  std::uint32_t* data() noexcept { return capacity_ > inline_capacity ? heap_ : inline_; }
  const std::uint32_t* begin() const noexcept { return data(); }
  const std::uint32_t* end() const noexcept { return data() + size_; }
  std::uint32_t* begin() noexcept { return data(); }
  std::uint32_t* end() noexcept { return data() + size_; }
  std::uint32_t operator[](std::size_t i) const noexcept { return data()[i]; }
  std::uint32_t& operator[](std::size_t i) noexcept { return data()[i]; }
  std::uint32_t back() const noexcept { return data()[size_ - 1]; }
  void clear() noexcept { size_ = 0; }
  void push_back(std::uint32_t value) {
    if (size_ == capacity_) reserve(std::size_t{capacity_} * 2);
    data()[size_++] = value;
  }
  void reserve(std::size_t wanted) {
    if (wanted <= capacity_) return;
    auto* grown = new std::uint32_t[wanted];
    std::copy(begin(), end(), grown);
    const std::uint32_t size = size_;
    release();  // empties
    heap_ = grown;
    capacity_ = static_cast<std::uint32_t>(wanted);
    size_ = size;
  }

  friend bool operator==(const IndexList& a, const IndexList& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const IndexList& a, const IndexList& b) noexcept { return !(a == b); }
  friend bool operator==(const IndexList& a, const std::vector<std::uint32_t>& b) noexcept {
    return a.size_ == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const std::vector<std::uint32_t>& a, const IndexList& b) noexcept { return b == a; }

 private:
  static constexpr std::uint32_t inline_capacity = 4;
  void release() noexcept {
    if (capacity_ > inline_capacity) delete[] heap_;
    capacity_ = inline_capacity;
    size_ = 0;
  }
  void take(IndexList& other) noexcept {  // this holds nothing
    if (other.capacity_ > inline_capacity) {
      heap_ = other.heap_;
    } else {
      std::copy(other.inline_, other.inline_ + other.size_, inline_);
    }
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.capacity_ = inline_capacity;
    other.size_ = 0;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = inline_capacity;
  union {
    std::uint32_t inline_[inline_capacity];
    std::uint32_t* heap_;
  };
};

struct FusionPlan;

/// \brief One node of the plan, with the steps it depends on and the bodies it holds.
struct PlanStep {
  NodeId node;                       ///< index into Description::nodes
  IndexList deps;                    ///< indices of earlier steps of the same body, ascending, no duplicates
  std::vector<std::uint32_t> bodies; ///< per body of the node: its index in Plan::bodies
  /// The deps reached through a programmatic edge (EdgeKind::programmatic), ascending; the
  /// others are full. Empty in most graphs.
  std::vector<std::uint32_t> programmatic;
};

/// \brief A validated description in deterministic topological order.
///
/// Among nodes of one body that are ready at the same time, the one declared first comes
/// first, so a description always lowers to the same plan. Emitting a plan adds native nodes
/// in step order with each step's dependencies in the order of `deps`; a step's bodies are
/// emitted, in the same way, when the step is.
///
/// Every node also has a *position*: its index in a walk of the whole plan that visits each
/// step and then its bodies' steps. Executables keep their native nodes by position. In a graph
/// without bodies a node's position is the index of its step.
struct Plan {
  std::vector<PlanStep> steps;               ///< the top level
  std::vector<std::vector<PlanStep>> bodies; ///< the bodies of every level, referenced by PlanStep::bodies
  std::vector<std::uint32_t> position;       ///< position[node id], see above
  std::uint64_t topology_hash = 0;           ///< see topology_hash()
  /// Some node allocates or frees graph memory (alloc, free): CUDA gives that memory its address
  /// per executable, so a Runtime keeps the executables of such a plan per Graph, never shared.
  bool graph_memory = false;
  /// Graph::plan(): the Graph's parameter_version() when it was lowered, when every parameter was
  /// valid; changes after it are checked before they reach an executable. 0 for a plan made by
  /// lower() alone.
  std::uint64_t checked_version = 0;
  /// The groups of nodes run as one generated kernel each (Description::fuse, flowdsl/fusion.hpp);
  /// null when the description does not fuse or no group was found. Their structure is in the
  /// topology hash.
  std::shared_ptr<const FusionPlan> fusion;
  /// Graph::plan(): the parameter_version() up to which changes were found to keep every group as
  /// it is (a change of a member's pointers or count may split or rewire its group). Written by
  /// the Graph that owns the plan only, under the same rules as the Graph itself.
  mutable std::uint64_t fusion_checked_version = 0;
};

/// \brief Checks a description and returns every problem found (empty when valid).
///
/// Reports: empty graph, duplicate names within a body, edges to unknown nodes, self-edges,
/// edges between bodies, empty bodies, cycles (as a path of node names), unset launch shapes,
/// zero grid/block dimensions, blocks over 1024 threads or over the per-axis limits (1024,
/// 1024, 64), null pointers where one is required, zero-byte copies and memsets, unsupported
/// memset element sizes. Device limits (shared memory) are checked when emitting. Nodes inside
/// bodies are named by their path ("outer/inner/step").
std::vector<Diagnostic> validate(const Description& description);

/// \brief Checks only the parameters of the given nodes (the checks an update needs).
std::vector<Diagnostic> validate_parameters(const Description& description, const std::vector<NodeId>& nodes);
/// \brief Checks the parameters of every node (the checks an instantiation of a cached plan needs).
std::vector<Diagnostic> validate_parameters(const Description& description);

/// \brief Validates and lowers a description.
/// \throws ValidationError listing every problem when the description is invalid.
Plan lower(const Description& description);

/// \brief The 64-bit topology hash of a lowered description.
///
/// Covers: node count; per step in plan order its kind, its structure (kernel: function, launch
/// shape and argument count; memset: element size) and its dependencies as step indices, each
/// with its edge kind (full or programmatic); for a step holding bodies, then each body's step
/// count and steps, in the same way.
/// Excludes names, parameters (arguments, pointers, sizes, values, host data) and declared
/// accesses. Equal topology with other parameters hashes equal.
[[nodiscard]] std::uint64_t topology_hash(const Description& description, const Plan& plan);

/// \brief Frees the memory flowdsl keeps for reuse once graphs are gone: the chunks of released
/// descriptions (up to 64 MiB for the process) and the vectors of dropped plans of 1024 nodes or
/// more (up to 32 MiB). A server may call it after a burst of large graphs; the next graphs then
/// take fresh memory. Thread-safe.
void release_cached_memory() noexcept;

}  // namespace flowdsl
