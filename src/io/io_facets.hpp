// SPDX-License-Identifier: Apache-2.0
// What the JSON reader, binder, writer and schema and the DOT writer need of every node kind.
// Declared here for every kind of the list (FLOWDSL_NODE_KINDS); each kind defines them in
// src/kinds/<kind>/io.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "flowdsl/dot.hpp"
#include "flowdsl/json.hpp"
#include "dot_text.hpp"
#include "json_support.hpp"

namespace flowdsl::io {

using nlohmann::json;

/// Names a kind where there is no operation to name it by (reading, schema, colour).
template <class Op>
struct Tag {};

/// A member of a node's object that holds bodies, and what a DOT dump calls them. A kind lists
/// its members in the order of its bodies, and bodies fill them in that order: a member of one
/// body takes the next, a member of many takes all the rest. So optional members and a member
/// of many come last.
struct BodyMember {
  const char* name;           ///< "nodes", "then", "cases"
  const char* title;          ///< a cluster's label ("then", "body (while)"; "case" + index for many); null: the node's path
  bool many = false;          ///< an array of bodies (a SWITCH's "cases"), rather than one body
  bool optional = false;      ///< may be absent (an IF's "else"): then the node has one body fewer
};

/// Where body `b` of a node sits among its kind's `members`: the member, and for a member of
/// many its index there. A null member when the kind has no place for a body `b`.
struct BodyPlace {
  const BodyMember* member = nullptr;
  std::size_t index = 0;
  /// "/then", "/cases/2".
  std::string pointer() const;
  /// "then", "case 2"; empty when the member says "the node's path".
  std::string title() const;
};
BodyPlace body_place(const std::vector<BodyMember>& members, std::uint32_t b);

/// Binding one node of a graph file: where its problems go, the buffers it may point into,
/// the kernels and host functions it may name, and the body its node is declared in.
class NodeBinder {
 public:
  virtual ~NodeBinder() = default;
  /// Where the node is declared.
  virtual Body& builder() = 0;
  /// The node's JSON pointer ("/nodes/3", "/nodes/2/nodes/0").
  virtual const std::string& pointer() const = 0;
  /// How many bodies the file gives the node (an IF with "else": 2; a SWITCH: its cases).
  virtual std::uint32_t bodies() const = 0;
  /// Records a problem at the node's pointer + `suffix`.
  virtual void problem(const std::string& suffix, std::string message) = 0;
  /// The buffer `ref` names, or null (and a problem at `suffix`).
  virtual const BufferSpec* buffer(const BufferRef& ref, const std::string& suffix) = 0;
  /// Whether `ref` names the memory of an alloc node (untyped bytes) rather than a buffer.
  virtual bool names_alloc(const BufferRef& ref) const = 0;
  /// The address of `ref` (a buffer's, or a symbolic one in an alloc's memory) when `bytes` bytes
  /// from it fit in its buffer or alloc and it is aligned to `align`; null (and a problem at
  /// `suffix`) otherwise.
  virtual void* address(const BufferRef& ref, std::uint64_t bytes, std::uint64_t align, const std::string& suffix) = 0;
  /// The symbolic address of the memory of the alloc node named `name` (declared anywhere in the
  /// file), or nothing (and a problem at `suffix`).
  virtual std::optional<std::uint64_t> alloc_memory(const std::string& name, const std::string& suffix) = 0;
  /// Tells the binder that the alloc named `name` was declared as node `id` (its memory's symbol
  /// may have been handed out before).
  virtual void declared_alloc(const std::string& name, NodeId id) = 0;
  /// The event named `name`, or null (and a problem at `suffix`).
  virtual CudaEvent event(const std::string& name, const std::string& suffix) = 0;
  /// Resolves `name`, a condition argument of the node being bound: the first node of that name
  /// in the node's body, else in the body holding that one, and so on out to the top level. When
  /// it is a conditional node, calls `set` with its condition once it is declared (at once if it
  /// is already) and returns true; otherwise records a problem at `suffix` and returns false.
  virtual bool condition(const std::string& name, const std::string& suffix, std::function<void(Condition)> set) = 0;
  /// The kernel registered as `name` (in the registry, or among the file's own kernels while
  /// checking), or null.
  virtual const KernelInfo* find_kernel(std::string_view name) const = 0;
  virtual const GraphSpec& spec() const = 0;
  virtual const HostFunctions& hosts() const = 0;
};

/// Describing one node of a C++-built graph: pointers become buffer references.
class NodeDescriber {
 public:
  virtual ~NodeDescriber() = default;
  /// The buffer and offset holding `ptr` (or the alloc, for a symbolic address); an empty buffer
  /// name (and a problem) when none does.
  virtual BufferRef locate(const void* ptr, const std::string& suffix) = 0;
  /// The name by which the node being described names the conditional node whose condition
  /// `word` holds (a kernel argument's bytes), as the reader resolves it (see
  /// NodeBinder::condition); empty, and a problem at `suffix`, when no name finds that node.
  virtual std::string condition_name(std::uint64_t word, const std::string& suffix) = 0;
  virtual void problem(const std::string& suffix, std::string message) = 0;
  virtual const KernelRegistry& registry() const = 0;
  virtual const HostFunctions& hosts() const = 0;
  virtual const Events& events() const = 0;
};

/// The lines of one node's DOT label, what the label may show, the description the node is
/// in (a kernel's Condition argument is shown by its node's path) and the names of its addresses.
struct DotLabel {
  const DotOptions& options;
  std::vector<std::string>& lines;
  const Description& description;  ///< the graph, for labels naming another node
  AddressNames& addresses;         ///< operands by the buffer they point into ("input+256")
};

/// How DOT draws a kind's nodes.
struct DotStyle {
  const char* colour;            ///< the fill colour
  const char* shape = nullptr;   ///< null: the rounded box every node has
};

#define FLOWDSL_IO_FACETS(Op)                                                                  \
  /* The members holding the kind's bodies, in body order ({} without bodies). */             \
  std::vector<BodyMember> json_bodies(Tag<Op>);                                               \
  /* The JSON Schema of the kind's own members: {"required": [...], "properties": {...}}. */  \
  json json_schema(Tag<Op>);                                                                  \
  /* Checks the kind's members of `node` (the node's object: the kind reads its own members) \
     and writes them to `out` as one object; JsonError relative to the node. */               \
  void read_json(Tag<Op>, CompactJson::Ref node, CompactJson::Builder& out);                  \
  /* Declares the node from its members; null after reporting problems to `binder`. */       \
  std::optional<NodeHandle> bind_json(Tag<Op>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder); \
  /* The kind's members for an operation of a C++-built graph. */                            \
  json describe_json(const Op&, NodeDescriber&);                                              \
  /* The label lines after the node's name. */                                               \
  void dot_label(const Op&, DotLabel&);                                                       \
  /* The fill colour and shape of the kind's nodes. */                                       \
  DotStyle dot_style(Tag<Op>);
FLOWDSL_NODE_KINDS(FLOWDSL_IO_FACETS)
#undef FLOWDSL_IO_FACETS

/// Whether nodes of kind `Op` allocate graph memory, which other nodes name by the node's name.
template <class Op>
constexpr bool allocates_memory(Tag<Op>) {
  return allocates_graph_memory<Op>;
}

/// Whether nodes of kind `Op` have a condition that kernels set (IF, WHILE, SWITCH).
template <class Op>
constexpr bool holds_condition(Tag<Op>) {
  return conditional_kind<Op>;
}

/// Calls `f(Tag<Op>{})` for the kind named `kind`; false when no kind has that name.
template <class F>
bool with_kind(std::string_view kind, F&& f) {
  bool found = false;
  const auto visit = [&](auto tag, std::string_view name) {
    if (!found && name == kind) {
      found = true;
      f(tag);
    }
  };
#define FLOWDSL_IO_VISIT(Op) visit(Tag<Op>{}, Op::kind);
  FLOWDSL_NODE_KINDS(FLOWDSL_IO_VISIT)
#undef FLOWDSL_IO_VISIT
  return found;
}

/// "kernel, memcpy, ..." in the order of the list.
std::string kind_names();

}  // namespace flowdsl::io
