// SPDX-License-Identifier: Apache-2.0
// KernelRegistry and the names of parameter types.
#include "flowdsl/registry.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace flowdsl {
std::string to_string(const ParamType& type) {
  if (type.condition) return "condition";
  std::string text = std::string(type.is_const ? "const " : "") + std::string(to_string(type.scalar));
  return type.pointer ? text + "*" : text;
}

std::string_view KernelParam::enumerator_at(const void* bytes) const noexcept {
  if (enumerators.empty() || type.pointer || type.condition) return {};
  return visit_scalar(type.scalar, [&](auto tag) -> std::string_view {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      T value;
      std::memcpy(&value, bytes, sizeof value);
      if constexpr (std::is_signed_v<T>) {
        if (value < 0) return {};
      }
      return static_cast<std::uint64_t>(value) < enumerators.size() ? enumerator(static_cast<std::int64_t>(value))
                                                                    : std::string_view();
    } else {
      return {};
    }
  });
}

std::size_t KernelInfo::index_of(std::string_view param) const noexcept {
  const auto it = std::find_if(params.begin(), params.end(), [&](const KernelParam& p) { return p.name == param; });
  return static_cast<std::size_t>(it - params.begin());
}

namespace {
// "{none, relu, gelu}": the names of values 0, 1, 2 of an integer parameter.
std::vector<std::string> enumerators_of(const std::string& kernel, const KernelParam& p) {
  const std::string where = "flowdsl: kernel '" + kernel + "': parameter '" + p.name + "'";
  if (p.type.pointer || p.type.condition || p.type.scalar > ScalarType::u64) {
    throw UsageError(where + " has named values but is not an integer scalar (" + to_string(p.type) + ")");
  }
  if (p.extent.back() != '}') throw UsageError(where + ": named values are written {name, name, ...}");
  std::vector<std::string> names;
  std::string name;
  for (const char c : p.extent.substr(1)) {
    if (c == ',' || c == '}') {
      if (name.empty() || std::find(names.begin(), names.end(), name) != names.end()) {
        throw UsageError(where + ": an empty or repeated value name in " + p.extent);
      }
      names.push_back(std::move(name));
      name.clear();
    } else if (c != ' ') {
      name += c;
    }
  }
  return names;
}
}  // namespace

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry registry;
  return registry;
}

bool KernelInfo::checked() const noexcept {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].type.pointer && (i >= extents.size() || extents[i].empty())) return false;
  }
  return true;
}

KernelParam KernelRegistry::split_param(const std::string& declared, const ParamType& type) {
  const std::size_t colon = declared.find(':');
  if (colon == std::string::npos) return KernelParam{declared, type, {}, {}};
  std::size_t end = colon;
  while (end > 0 && declared[end - 1] == ' ') --end;
  std::size_t start = colon + 1;
  while (start < declared.size() && declared[start] == ' ') ++start;
  return KernelParam{declared.substr(0, end), type, declared.substr(start), {}};
}

const KernelInfo& KernelRegistry::add(KernelInfo info) {
  if (info.name.empty()) throw UsageError("flowdsl: a registered kernel needs a name");
  if (info.function == nullptr) throw UsageError("flowdsl: kernel " + quoted_name(info.name) + " has a null function");
  if (info.derived && !valid_derived(info.derived)) {
    throw UsageError("flowdsl: kernel " + quoted_name(info.name) + ": derived parameters of " +
                     std::to_string(info.derived.bytes) + " bytes aligned to " + std::to_string(info.derived.align) +
                     " (1 to " + std::to_string(DerivedParameters::max_bytes) +
                     " bytes, a power-of-two alignment up to " + std::to_string(DerivedParameters::max_align) + ")");
  }
  std::set<std::string_view> seen;
  for (const KernelParam& p : info.params) {
    if (p.name.empty() || !seen.insert(p.name).second) {
      throw UsageError("flowdsl: kernel " + quoted_name(info.name) + " has an empty or repeated parameter name " +
                       quoted_name(p.name));
    }
  }
  info.extents.assign(info.params.size(), Extent{});
  for (std::size_t i = 0; i < info.params.size(); ++i) {
    KernelParam& p = info.params[i];
    if (p.extent.empty()) continue;
    if (p.extent.front() == '{') {
      p.enumerators = enumerators_of(info.name, p);
      p.extent.clear();
      continue;
    }
    if (!p.type.pointer) {
      throw UsageError("flowdsl: kernel " + quoted_name(info.name) + ": parameter " + quoted_name(p.name) +
                       " is a scalar (" + to_string(p.type) + "), so it has no extent");
    }
    try {
      info.extents[i] = Extent::parse(p.extent, info.params, p.name);
    } catch (const UsageError& e) {
      throw UsageError("flowdsl: kernel " + quoted_name(info.name) + ": " + std::string(e.what()).substr(9));
    }
  }
  std::lock_guard lock(mutex_);
  if (kernels_.count(info.name) != 0)
    throw UsageError("flowdsl: a kernel named " + quoted_name(info.name) + " is already registered");
  auto owned = std::make_unique<KernelInfo>(std::move(info));
  const KernelInfo& ref = *owned;
  kernels_.emplace(ref.name, std::move(owned));
  by_function_.emplace(ref.function, &ref);
  return ref;
}

const KernelInfo* KernelRegistry::find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : it->second.get();
}

const KernelInfo* KernelRegistry::find_function(const void* function) const {
  std::lock_guard lock(mutex_);
  const auto it = by_function_.find(function);
  return it == by_function_.end() ? nullptr : it->second;
}

std::vector<const KernelInfo*> KernelRegistry::list() const {
  std::lock_guard lock(mutex_);
  std::vector<const KernelInfo*> out;
  for (const auto& [name, info] : kernels_) out.push_back(info.get());
  return out;
}

}  // namespace flowdsl
