// KernelRegistry and the names of parameter types.
#include "flowdsl/registry.hpp"

#include <algorithm>
#include <array>
#include <set>

namespace flowdsl {
namespace {

constexpr std::array<std::pair<ScalarType, std::string_view>, 12> scalar_names = {{
    {ScalarType::i8, "i8"}, {ScalarType::i16, "i16"}, {ScalarType::i32, "i32"}, {ScalarType::i64, "i64"},
    {ScalarType::u8, "u8"}, {ScalarType::u16, "u16"}, {ScalarType::u32, "u32"}, {ScalarType::u64, "u64"},
    {ScalarType::f16, "f16"}, {ScalarType::bf16, "bf16"}, {ScalarType::f32, "f32"}, {ScalarType::f64, "f64"},
}};

}  // namespace

std::string_view to_string(ScalarType type) noexcept {
  for (const auto& [t, name] : scalar_names) {
    if (t == type) return name;
  }
  return "?";
}

bool parse_scalar_type(std::string_view text, ScalarType& out) noexcept {
  for (const auto& [t, name] : scalar_names) {
    if (name == text) {
      out = t;
      return true;
    }
  }
  return false;
}

std::size_t size_of(ScalarType type) noexcept {
  switch (type) {
    case ScalarType::i8:
    case ScalarType::u8:
      return 1;
    case ScalarType::i16:
    case ScalarType::u16:
    case ScalarType::f16:
    case ScalarType::bf16:
      return 2;
    case ScalarType::i32:
    case ScalarType::u32:
    case ScalarType::f32:
      return 4;
    case ScalarType::i64:
    case ScalarType::u64:
    case ScalarType::f64:
      return 8;
  }
  return 0;
}

std::string to_string(const ParamType& type) {
  std::string text = std::string(type.is_const ? "const " : "") + std::string(to_string(type.scalar));
  return type.pointer ? text + "*" : text;
}

std::size_t KernelInfo::index_of(std::string_view param) const noexcept {
  const auto it = std::find_if(params.begin(), params.end(), [&](const KernelParam& p) { return p.name == param; });
  return static_cast<std::size_t>(it - params.begin());
}

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry registry;
  return registry;
}

const KernelInfo& KernelRegistry::add(KernelInfo info) {
  if (info.name.empty()) throw UsageError("flowdsl: a registered kernel needs a name");
  if (info.function == nullptr) throw UsageError("flowdsl: kernel '" + info.name + "' has a null function");
  std::set<std::string_view> seen;
  for (const KernelParam& p : info.params) {
    if (p.name.empty() || !seen.insert(p.name).second) {
      throw UsageError("flowdsl: kernel '" + info.name + "' has an empty or repeated parameter name '" + p.name + "'");
    }
  }
  std::lock_guard lock(mutex_);
  if (kernels_.count(info.name) != 0) throw UsageError("flowdsl: a kernel named '" + info.name + "' is already registered");
  auto owned = std::make_unique<KernelInfo>(std::move(info));
  const KernelInfo& ref = *owned;
  kernels_.emplace(ref.name, std::move(owned));
  return ref;
}

const KernelInfo* KernelRegistry::find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : it->second.get();
}

std::vector<const KernelInfo*> KernelRegistry::list() const {
  std::lock_guard lock(mutex_);
  std::vector<const KernelInfo*> out;
  for (const auto& [name, info] : kernels_) out.push_back(info.get());
  return out;
}

}  // namespace flowdsl
