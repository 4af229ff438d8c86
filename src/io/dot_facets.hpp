// SPDX-License-Identifier: Apache-2.0
// What the DOT writer needs of every node kind: the lines of its label and its style. Declared
// here for every kind of the list (FLOWDSL_NODE_KINDS); each kind defines them in
// src/kinds/<kind>/dot.cpp.
#pragma once

#include <string>
#include <vector>

#include "dot_text.hpp"
#include "flowdsl/dot.hpp"
#include "io_kinds.hpp"

namespace flowdsl::io {

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

#define FLOWDSL_DOT_FACETS(Op)                                                                 \
  /* The label lines after the node's name. */                                               \
  void dot_label(const Op&, DotLabel&);                                                       \
  /* The fill colour and shape of the kind's nodes. */                                       \
  DotStyle dot_style(Tag<Op>);
FLOWDSL_NODE_KINDS(FLOWDSL_DOT_FACETS)
#undef FLOWDSL_DOT_FACETS

}  // namespace flowdsl::io
