// SPDX-License-Identifier: Apache-2.0
// What the JSON reader, binder, writer and schema need of every node kind. Declared here for
// every kind of the list (FLOWDSL_NODE_KINDS); each kind defines them in
// src/kinds/<kind>/json.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "flowdsl/json.hpp"
#include "io_kinds.hpp"
#include "json_support.hpp"

namespace flowdsl::io {

using nlohmann::json;

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

#define FLOWDSL_JSON_FACETS(Op)                                                                \
  /* The JSON Schema of the kind's own members: {"required": [...], "properties": {...}}. */  \
  json json_schema(Tag<Op>);                                                                  \
  /* Checks the kind's members of `node` (the node's object: the kind reads its own members) \
     and writes them to `out` as one object; JsonError relative to the node. */               \
  void read_json(Tag<Op>, CompactJson::Ref node, CompactJson::Builder& out);                  \
  /* Declares the node from its members; null after reporting problems to `binder`. */       \
  std::optional<NodeHandle> bind_json(Tag<Op>, const std::string& name, CompactJson::Ref fields, NodeBinder& binder); \
  /* The kind's members for an operation of a C++-built graph. */                            \
  json describe_json(const Op&, NodeDescriber&);
FLOWDSL_NODE_KINDS(FLOWDSL_JSON_FACETS)
#undef FLOWDSL_JSON_FACETS

}  // namespace flowdsl::io
