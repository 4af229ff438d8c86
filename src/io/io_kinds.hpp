// SPDX-License-Identifier: Apache-2.0
// What graph files and DOT dumps both need of every node kind: a tag to name a kind by, the
// members holding its bodies (with what a DOT cluster calls them), and the walk over the kinds.
// The JSON facets are json_facets.hpp, the DOT facets dot_facets.hpp; each kind defines them in
// src/kinds/<kind>/json.cpp and dot.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flowdsl/kind_traits.hpp"
#include "flowdsl/kinds.hpp"

namespace flowdsl::io {

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

#define FLOWDSL_IO_BODIES(Op)                                                                  \
  /* The members holding the kind's bodies, in body order ({} without bodies). */             \
  std::vector<BodyMember> json_bodies(Tag<Op>);
FLOWDSL_NODE_KINDS(FLOWDSL_IO_BODIES)
#undef FLOWDSL_IO_BODIES

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
