// SPDX-License-Identifier: Apache-2.0
// Library nodes, builder side: the call's name for messages and dumps.
#include "flowdsl/graph.hpp"

namespace flowdsl {

std::string call_name_of(const LibraryOp& op) {
  if (!op.call_name.empty()) return op.call_name;
  const KernelInfo* info = KernelRegistry::global().find_function(op.function);
  return info == nullptr ? std::string() : info->name;
}

}  // namespace flowdsl
