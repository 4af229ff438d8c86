// Pointer arguments of registered entries by their declared extents: checks and accesses.
#include "extent_checks.hpp"

#include <cstdint>
#include <cstring>
#include <string>

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

void check_extents(const ArgumentPack& args, const LaunchShape& launch, const KernelInfo& entry, NodeCheck& diag) {
  for_each_extent(args, launch, entry, [&](const KernelParam& p, const Extent& extent, const void* ptr, const Extent::Value& v) {
    const std::string member = "args/" + p.name;
    const std::string verb = p.type.is_const ? "reads " : "writes ";
    if (v.kind == Extent::Value::Kind::overflow) {
      diag.report(
          "argument " + quoted_name(p.name) + ": its extent " + quoted_name(extent.text()) + " exceeds 2^63 elements",
          member);
      return;
    }
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    const NamedBuffer* b = diag.buffers().find(address);
    if (b == nullptr || v.kind != Extent::Value::Kind::known) return;  // not checkable here
    const std::size_t element = size_of(p.type.scalar);
    const std::uint64_t offset = address - reinterpret_cast<std::uintptr_t>(b->ptr);
    const std::uint64_t available = (b->bytes - offset) / element;
    if (v.elements <= available) return;
    diag.report("argument " + quoted_name(p.name) + " " + verb + std::to_string(v.elements) + " elements (" +
                    extent.text() + ") of buffer " + quoted_name(b->name) + " (" + std::to_string(available) +
                    (offset == 0 ? ")" : " after offset " + std::to_string(offset) + ")"),
                member);
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
