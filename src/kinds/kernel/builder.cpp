// Kernel nodes, builder side: registered kernels' arguments by name, checked against their types.
#include "flowdsl/graph.hpp"

namespace flowdsl {

std::string kernel_name_of(const KernelOp& op) {
  if (!op.kernel_name.empty()) return op.kernel_name;
  const KernelInfo* info = KernelRegistry::global().find_function(op.function);
  return info == nullptr ? std::string() : info->name;
}

std::size_t RegisteredKernelNode::index_of(std::string_view param) const {
  const std::size_t index = kernel_->index_of(param);
  if (index == kernel_->params.size()) {
    std::string known;
    for (const KernelParam& p : kernel_->params) known += (known.empty() ? "" : ", ") + p.name;
    throw UsageError("flowdsl: node '" + name() + "' (kernel '" + kernel_->name + "'): no parameter named '" +
                     std::string(param) + "' (parameters: " + known + ")");
  }
  return index;
}

std::size_t RegisteredKernelNode::check_param(std::string_view param, const ParamType& given) const {
  const std::size_t index = index_of(param);
  const ParamType& want = kernel_->params[index].type;
  // A pointer to non-const converts to a pointer to const, as in C++.
  const bool ok = given.condition == want.condition &&
                  (want.condition || (given.scalar == want.scalar && given.pointer == want.pointer &&
                                      (!given.is_const || want.is_const)));
  if (!ok) {
    throw UsageError("flowdsl: node '" + name() + "' (kernel '" + kernel_->name + "'): parameter '" +
                     std::string(param) + "' takes " + to_string(want) + ", not " + to_string(given));
  }
  return index;
}

RegisteredKernelNode& RegisteredKernelNode::set_bytes(std::string_view param, const void* value, std::size_t size) {
  const std::size_t index = index_of(param);
  const std::size_t want = kernel_->params[index].type.size();
  if (size != want) {
    throw UsageError("flowdsl: node '" + name() + "' (kernel '" + kernel_->name + "'): parameter '" +
                     std::string(param) + "' takes " + std::to_string(want) + " bytes, not " + std::to_string(size));
  }
  return set_slot(index, value, size);
}

RegisteredKernelNode& RegisteredKernelNode::set_slot(std::size_t index, const void* value, std::size_t size) {
  detail::parameters<KernelOp>(*state_, id_).args.set(index, value, size);
  return *this;
}

}  // namespace flowdsl
