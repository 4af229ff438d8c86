// SPDX-License-Identifier: Apache-2.0
// Arguments of registered entries checked by value and by reach: one implementation for C++,
// graph files and Python.
#include "flowdsl/argument_checks.hpp"

#include <cstring>
#include <type_traits>

#include "flowdsl/error.hpp"

namespace flowdsl {
namespace {

// An integer argument as read from its slot: negative, or its magnitude.
struct IntegerValue {
  bool negative = false;
  std::uint64_t magnitude = 0;
  std::string text() const { return (negative ? "-" : "") + std::to_string(magnitude); }
};

IntegerValue integer_at(ScalarType type, const void* bytes) {
  return visit_scalar(type, [&](auto tag) -> IntegerValue {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      T v;
      std::memcpy(&v, bytes, sizeof v);
      if constexpr (std::is_signed_v<T>) {
        if (v < 0) return {true, static_cast<std::uint64_t>(-(static_cast<std::int64_t>(v) + 1)) + 1};
      }
      return {false, static_cast<std::uint64_t>(v)};
    } else {
      return {};
    }
  });
}

bool is_integer(const ParamType& type) {
  return !type.pointer && !type.condition && type.scalar <= ScalarType::u64;
}

// The first pointer parameter whose extent reads parameter `param`, or params.size().
std::size_t first_extent_reading(const KernelInfo& entry, std::uint32_t param) {
  for (std::size_t i = 0; i < entry.extents.size(); ++i) {
    if (!entry.extents[i].empty() && entry.extents[i].reads(param)) return i;
  }
  return entry.params.size();
}

}  // namespace

std::vector<ArgumentProblem> check_argument_values(const KernelInfo& entry, const ArgumentPack& args) {
  std::vector<ArgumentProblem> out;
  if (args.size() != entry.params.size()) return out;
  for (std::uint32_t i = 0; i < entry.params.size(); ++i) {
    const KernelParam& p = entry.params[i];
    if (!is_integer(p.type) || !args.bound(i) || args.slot_size(i) != p.type.size()) continue;
    const IntegerValue v = integer_at(p.type.scalar, args.data(i));
    // The message is made only for a refusal: this runs before every update of the node.
    const auto head = [&] { return "argument " + quoted_name(p.name) + " is " + v.text(); };
    if (!p.enumerators.empty()) {
      if (v.negative || v.magnitude >= p.enumerators.size()) {
        std::string names;
        for (std::size_t e = 0; e < p.enumerators.size(); ++e) {
          names += (e == 0 ? "" : ", ") + std::to_string(e) + " " + p.enumerators[e];
        }
        out.push_back({i, head() + ", not one of its values (" + names + ")"});
      }
      continue;
    }
    if (!v.negative) continue;
    const std::size_t reader = first_extent_reading(entry, i);
    if (reader == entry.params.size()) continue;
    out.push_back({i, head() + ": it sizes the extent of " + quoted_name(entry.params[reader].name) + " (" +
                          entry.extents[reader].text() + ") and must not be negative"});
  }
  if (entry.check == nullptr || !out.empty()) return out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args.bound(i) || args.slot_size(i) != entry.params[i].type.size()) return out;
  }
  std::vector<const void*> pointers(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) pointers[i] = args.data(i);
  ArgumentProblem own = entry.check(pointers.data());
  if (!own.message.empty() && own.param < entry.params.size()) out.push_back(std::move(own));
  return out;
}

std::uint64_t elements_beyond(const Extent::Value& value, std::size_t element_size,
                              std::uint64_t available_bytes) noexcept {
  if (value.kind != Extent::Value::Kind::known || element_size == 0) return 0;
  const std::uint64_t available = available_bytes / element_size;
  return value.elements > available ? value.elements - available : 0;
}

ArgumentProblem check_reach(const KernelInfo& entry, std::uint32_t param, const Extent::Value& value,
                            std::uint64_t available_bytes, std::string_view memory) {
  if (param >= entry.params.size() || param >= entry.extents.size()) return {};
  const KernelParam& p = entry.params[param];
  const Extent& extent = entry.extents[param];
  if (value.kind == Extent::Value::Kind::overflow) {
    return {param, "argument " + quoted_name(p.name) + ": its extent " + quoted_name(extent.text()) +
                       " exceeds 2^63 elements"};
  }
  if (elements_beyond(value, size_of(p.type.scalar), available_bytes) == 0) return {};
  return {param, "argument " + quoted_name(p.name) + (p.type.is_const ? " reads " : " writes ") +
                     std::to_string(value.elements) + " elements (" + extent.text() + ") of " + std::string(memory)};
}

}  // namespace flowdsl
