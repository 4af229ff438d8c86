// SPDX-License-Identifier: Apache-2.0
// Pointer arguments of registered entries by their declared extents: checks and accesses.
#include "extent_checks.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "flowdsl/argument_checks.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl::lowering {
namespace {

// Calls visit(param, extent, pointer, value) for each non-null pointer argument with a declared
// extent in `entry`.
template <class Visit>
void for_each_extent(const ArgumentPack& args, const LaunchShape& launch, const KernelInfo& entry, Visit&& visit) {
  for (std::size_t i = 0; i < entry.params.size(); ++i) {
    const KernelParam& p = entry.params[i];
    if (!p.type.pointer || entry.extents[i].empty() || !args.bound(i) || args.slot_size(i) != sizeof(void*)) continue;
    const void* ptr = nullptr;
    std::memcpy(&ptr, args.data(i), sizeof ptr);
    if (ptr == nullptr) continue;
    visit(p, entry.extents[i], ptr, entry.extents[i].evaluate(args, launch));
  }
}

}  // namespace

const KernelInfo* registered_entry(const KernelInfo* declared, const void* function, const ArgumentPack& args,
                                   KernelInfos& kernels) {
  const KernelInfo* info = declared != nullptr ? declared : kernels.find(function);
  return info != nullptr && info->params.size() == args.size() && info->extents.size() == args.size() ? info : nullptr;
}

void check_arguments(const ArgumentPack& args, const LaunchShape& launch, const KernelInfo& entry, NodeCheck& diag) {
  for (const ArgumentProblem& problem : check_argument_values(entry, args)) {
    diag.report(problem.message, "args/" + entry.params[problem.param].name);
  }
  if (diag.buffers().empty()) return;  // nothing to check pointers against
  for_each_extent(args, launch, entry, [&](const KernelParam& p, const Extent&, const void* ptr, const Extent::Value& v) {
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    const NamedBuffer* b = diag.buffers().find(address);
    std::uint64_t available_bytes = UINT64_MAX;  // outside named buffers only an overflow is known wrong
    std::string memory;
    if (b != nullptr) {
      const std::uint64_t offset = address - reinterpret_cast<std::uintptr_t>(b->ptr);
      available_bytes = b->bytes - offset;
      memory = "buffer " + quoted_name(b->name) + " (" + std::to_string(available_bytes / size_of(p.type.scalar)) +
               (offset == 0 ? ")" : " after offset " + std::to_string(offset) + ")");
    } else if (v.kind != Extent::Value::Kind::overflow) {
      return;
    }
    const auto index = static_cast<std::uint32_t>(&p - entry.params.data());
    const ArgumentProblem problem = check_reach(entry, index, v, available_bytes, memory);
    if (!problem.message.empty()) diag.report(problem.message, "args/" + p.name);
  });
}

void extent_accesses(const ArgumentPack& args, const LaunchShape& launch, const KernelInfo& entry,
                     std::vector<Access>& out) {
  for_each_extent(args, launch, entry, [&](const KernelParam& p, const Extent&, const void* ptr, const Extent::Value& v) {
    if (v.kind == Extent::Value::Kind::unbound) return;
    const std::uint64_t element = size_of(p.type.scalar);
    // Unknown (data-dependent) or overflowing extents: bytes 0, the conservative rule.
    const std::size_t bytes =
        v.kind == Extent::Value::Kind::known && v.elements <= SIZE_MAX / element ? v.elements * element : 0;
    if (v.kind == Extent::Value::Kind::known && bytes == 0) return;  // touches nothing
    out.push_back(Access{ptr, bytes, p.type.is_const ? AccessMode::read : AccessMode::write});
  });
}

}  // namespace flowdsl::lowering
