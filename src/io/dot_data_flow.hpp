// SPDX-License-Identifier: Apache-2.0
// The data-flow view of DOT dumps: buffers as nodes, with read and write edges.
#pragma once

#include <string>

#include "dot_text.hpp"
#include "flowdsl/description.hpp"

namespace flowdsl::io {

/// The DOT statements of the data-flow view of `d`, whose nodes are drawn as "n<id>": one
/// parallelogram per named buffer (all of them), per alloc's memory a node touches, and per
/// address in neither that a node touches (dashed); an edge from a buffer to each node that
/// reads it (steelblue), from each node that writes it to the buffer (darkorange), one with both
/// arrows for a node that does both (purple), labelled with the byte ranges when they are not
/// the whole buffer. Accesses are accesses_of's: declared and derived.
std::string data_flow_dot(const Description& d, AddressNames& addresses);

}  // namespace flowdsl::io
