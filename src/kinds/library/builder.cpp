// SPDX-License-Identifier: Apache-2.0
// Library nodes, builder side: the call's name for messages and dumps.
#include "builder/registered_name.hpp"
#include "flowdsl/graph.hpp"

namespace flowdsl {

std::string call_name_of(const LibraryOp& op) { return detail::registered_name(op.call_name, op.function); }

}  // namespace flowdsl
