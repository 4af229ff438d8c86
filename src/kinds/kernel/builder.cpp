// SPDX-License-Identifier: Apache-2.0
// Kernel nodes, builder side: registered kernels' arguments by name, checked against their types.
#include "builder/registered_name.hpp"
#include "flowdsl/graph.hpp"

namespace flowdsl {

std::string kernel_name_of(const LaunchFields& op) { return detail::registered_name(op.kernel_name, op.function); }

namespace detail {

std::size_t registered_slot(const KernelInfo& entry, const std::string& node, std::string_view param,
                            const ParamType* given, std::size_t size) {
  // The message's start, made only when one is raised.
  const auto who = [&] {
    return "flowdsl: node " + quoted_name(node) + " (" + (entry.is_call() ? "library call " : "kernel ") +
           quoted_name(entry.name) + "): ";
  };
  const std::size_t index = entry.index_of(param);
  if (index == entry.params.size()) {
    std::string known;
    for (const KernelParam& p : entry.params) known += (known.empty() ? "" : ", ") + p.name;
    throw UsageError(who() + "no parameter named " + quoted_name(std::string(param)) + " (parameters: " + known + ")");
  }
  const ParamType& want = entry.params[index].type;
  // A pointer to non-const converts to a pointer to const, as in C++.
  const bool ok = given == nullptr ||
                  (given->condition == want.condition &&
                   (want.condition || (given->scalar == want.scalar && given->pointer == want.pointer &&
                                       (!given->is_const || want.is_const))));
  if (!ok) {
    throw UsageError(who() + "parameter " + quoted_name(std::string(param)) + " takes " + to_string(want) + ", not " +
                     to_string(*given));
  }
  if (size != want.size()) {
    throw UsageError(who() + "parameter " + quoted_name(std::string(param)) + " takes " + std::to_string(want.size()) +
                     " bytes, not " + std::to_string(size));
  }
  return index;
}

}  // namespace detail

std::size_t detail::parameter_index(const void* function, std::size_t params, const std::string& node,
                                    std::string_view param) {
  const KernelInfo* entry = KernelRegistry::global().find_function(function);
  if (entry == nullptr || entry->params.size() != params) {
    throw UsageError("flowdsl: node " + quoted_name(node) + ": set(" + quoted_name(param) +
                     ", ...) names a parameter, but the kernel is not registered with names in "
                     "KernelRegistry::global() (flowdsl::kernels::ensure_builtins() registers the built-in ones; "
                     "arg<I>() binds by position)");
  }
  const std::size_t index = entry->index_of(param);
  if (index == params) (void)registered_slot(*entry, node, param, nullptr, 0);  // throws, listing the parameters
  return index;
}

ArgumentPack unbound_arguments(const KernelInfo& entry) {
  ArgumentPack pack;
  const unsigned char zero[16] = {};
  for (const KernelParam& p : entry.params) {
    pack.append(zero, p.type.size(), p.type.align(), /*bound=*/false, p.type.slot_kind());
  }
  return pack;
}

}  // namespace flowdsl
