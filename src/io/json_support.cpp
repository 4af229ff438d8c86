// SPDX-License-Identifier: Apache-2.0
// Helpers of the JSON reader, binder and writer: typed member access failing at a JSON pointer.
#include "json_support.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace flowdsl {
namespace json_detail {

std::string token(std::string_view key) { return pointer_to("", key); }

std::string pointer_to(std::string_view prefix, std::string_view key) {
  // Sized once: binders make one of these for each argument of each node.
  std::size_t escaped = 0;
  for (const char c : key) escaped += (c == '~' || c == '/') ? 1 : 0;
  std::string out(prefix.size() + 1 + key.size() + escaped, '/');
  char* at = out.data();
  std::memcpy(at, prefix.data(), prefix.size());
  at += prefix.size() + 1;  // the '/' the fill left there
  if (escaped == 0) {
    std::memcpy(at, key.data(), key.size());
    return out;
  }
  for (const char c : key) {
    if (c == '~' || c == '/') {
      *at++ = '~';
      *at++ = c == '~' ? '0' : '1';
    } else {
      *at++ = c;
    }
  }
  return out;
}

void fail(std::string pointer, std::string message) {
  throw JsonError({JsonProblem{std::move(pointer), std::move(message)}});
}

std::string type_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number with a fraction or exponent";
    default:
      return "an unsupported value";
  }
}

std::string type_of(Ref j) {
  switch (j.type()) {
    case CompactJson::Type::null: return "null";
    case CompactJson::Type::object: return "an object";
    case CompactJson::Type::array: return "an array";
    case CompactJson::Type::string: return "a string";
    case CompactJson::Type::boolean: return "a boolean";
    case CompactJson::Type::integer:
    case CompactJson::Type::unsigned_integer: return "an integer";
    case CompactJson::Type::number: return "a number with a fraction or exponent";
  }
  return "an unsupported value";
}

namespace {

// What the readers need of a value beyond the queries both kinds share.
const json* find_member(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}
std::optional<Ref> find_member(Ref j, const char* key) { return j.find(key); }

template <class F>
void each_key(const json& j, F&& f) {
  for (const auto& item : j.items()) f(std::string_view(item.key()));
}
template <class F>
void each_key(Ref j, F&& f) {
  for (const CompactJson::Member m : j.members()) f(m.key);
}

std::string string_of(const json& j) { return j.get<std::string>(); }
std::string string_of(Ref j) { return std::string(j.get_string()); }
bool bool_of(const json& j) { return j.get<bool>(); }
bool bool_of(Ref j) { return j.get_bool(); }

// The readers, once for both kinds of value (J: const json& or Ref).

template <class J>
void expect_object_of(const J& j, const std::vector<std::string_view>& allowed) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  each_key(j, [&](std::string_view key) {
    for (std::string_view a : allowed) {
      if (key.size() == a.size() && (key.empty() || key[0] == a[0]) && key == a) return;
    }
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    fail(token(key), "unknown member " + quoted_name(key) + " (expected one of: " + list + ")");
  });
}

template <class J>
auto optional_member_of(const J& j, const char* key) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  return find_member(j, key);
}

// A DOM's member by reference, a CompactJson's by value (a Ref is a reference itself).
template <class J>
auto member_of(const J& j, const char* key) -> std::conditional_t<std::is_same_v<J, json>, const json&, Ref> {
  const auto found = optional_member_of(j, key);
  if (!found) fail(token(key), std::string("missing required member '") + key + "'");
  return *found;
}

template <class J>
std::string as_string_of(const J& j) {
  if (!j.is_string()) fail("", "expected a string, found " + type_of(j));
  return string_of(j);
}

template <class J>
std::uint64_t as_unsigned_of(const J& j, std::uint64_t max) {
  if (j.is_number_integer() && !j.is_number_unsigned()) {
    fail("", "value " + std::to_string(integer_of(j)) + " is out of range: expected an integer in [0, " +
                 std::to_string(max) + "]");
  }
  if (!j.is_number_unsigned()) fail("", "expected a non-negative integer, found " + type_of(j));
  const std::uint64_t value = unsigned_of(j);
  if (value > max) {
    fail("", "value " + std::to_string(value) + " is out of range: expected an integer in [0, " + std::to_string(max) +
                 "]");
  }
  return value;
}

template <class J>
std::string get_string_of(const J& j, const char* key) {
  const auto& value = member_of(j, key);
  std::string out;
  within_member(key, [&] { out = as_string_of(value); });
  return out;
}

template <class J>
std::uint64_t get_unsigned_of(const J& j, const char* key, std::uint64_t max) {
  const auto& value = member_of(j, key);
  std::uint64_t out = 0;
  within_member(key, [&] { out = as_unsigned_of(value, max); });
  return out;
}

template <class J>
double get_number_of(const J& j, const char* key) {
  const auto& value = member_of(j, key);
  if (!value.is_number()) fail(token(key), "expected a number, found " + type_of(value));
  return number_of(value);
}

template <class J>
bool get_bool_of(const J& j, const char* key) {
  const auto& value = member_of(j, key);
  if (!value.is_boolean()) fail(token(key), "expected true or false, found " + type_of(value));
  return bool_of(value);
}

// The launch dimension `value`, the member `key` of its object.
template <class V>
Dim3 dim_of(const V& value, const char* key) {
  constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
  Dim3 d;
  within_member(key, [&] {
    if (value.is_number()) {
      d.x = static_cast<std::uint32_t>(as_unsigned_of(value, u32_max));
      return;
    }
    if (!value.is_array() || value.empty() || value.size() > 3) {
      fail("", "expected an integer or an array of 1 to 3 integers, found " + type_of(value));
    }
    std::uint32_t* axes[3] = {&d.x, &d.y, &d.z};
    std::size_t i = 0;
    for (const auto& axis : elements_of(value)) {
      within_element(i, [&] { *axes[i] = static_cast<std::uint32_t>(as_unsigned_of(axis, u32_max)); });
      ++i;
    }
  });
  return d;
}

template <class J>
Dim3 get_dim_of(const J& j, const char* key) {
  return dim_of(member_of(j, key), key);
}

}  // namespace

void expect_object(const json& j, const std::vector<std::string_view>& allowed) { expect_object_of(j, allowed); }
void expect_object(Ref j, const std::vector<std::string_view>& allowed) { expect_object_of(j, allowed); }
const json& member(const json& j, const char* key) { return member_of(j, key); }
Ref member(Ref j, const char* key) { return member_of(j, key); }
const json* optional_member(const json& j, const char* key) { return optional_member_of(j, key); }
std::optional<Ref> optional_member(Ref j, const char* key) { return optional_member_of(j, key); }
std::string as_string(const json& j) { return as_string_of(j); }
std::string as_string(Ref j) { return as_string_of(j); }
std::uint64_t as_unsigned(const json& j, std::uint64_t max) { return as_unsigned_of(j, max); }
std::uint64_t as_unsigned(Ref j, std::uint64_t max) { return as_unsigned_of(j, max); }
std::string get_string(const json& j, const char* key) { return get_string_of(j, key); }
std::string get_string(Ref j, const char* key) { return get_string_of(j, key); }
std::uint64_t get_unsigned(const json& j, const char* key, std::uint64_t max) { return get_unsigned_of(j, key, max); }
std::uint64_t get_unsigned(Ref j, const char* key, std::uint64_t max) { return get_unsigned_of(j, key, max); }
double get_number(const json& j, const char* key) { return get_number_of(j, key); }
double get_number(Ref j, const char* key) { return get_number_of(j, key); }
bool get_bool(const json& j, const char* key) { return get_bool_of(j, key); }
bool get_bool(Ref j, const char* key) { return get_bool_of(j, key); }
Dim3 get_dim(const json& j, const char* key) { return get_dim_of(j, key); }
Dim3 get_dim(Ref j, const char* key) { return get_dim_of(j, key); }

std::optional<Dim3> optional_dim(Ref j, const char* key) { return optional_dim(optional_member_of(j, key), key); }

Ref required(const std::optional<Ref>& value, const char* key) {
  if (!value) fail(token(key), std::string("missing required member '") + key + "'");
  return *value;
}

std::string_view string_view_of(const std::optional<Ref>& value, const char* key) {
  const Ref v = required(value, key);
  if (!v.is_string()) within_member(key, [&] { (void)as_string_of(v); });  // fails, naming the type found
  return v.get_string();
}

std::string string_of(const std::optional<Ref>& value, const char* key) {
  return std::string(string_view_of(value, key));
}

std::uint64_t unsigned_of(const std::optional<Ref>& value, const char* key, std::uint64_t max) {
  const Ref v = required(value, key);
  std::uint64_t out = 0;
  within_member(key, [&] { out = as_unsigned_of(v, max); });
  return out;
}

std::optional<Dim3> optional_dim(const std::optional<Ref>& value, const char* key) {
  if (!value) return std::nullopt;
  return dim_of(*value, key);
}

Dim3 dim_of(const std::optional<Ref>& value, const char* key) { return dim_of(required(value, key), key); }

std::string_view get_string_view(Ref j, const char* key) { return string_view_of(optional_member_of(j, key), key); }

void write_dim(CompactJson::Builder& out, const Dim3& d) {
  if (d.y == 1 && d.z == 1) {
    out.unsigned_integer(d.x);
    return;
  }
  out.start_array();
  out.unsigned_integer(d.x);
  out.unsigned_integer(d.y);
  if (d.z != 1) out.unsigned_integer(d.z);
  out.end_array();
}

std::vector<CompactJson::Member> unique_members(Ref j) {
  std::vector<CompactJson::Member> out;
  out.reserve(j.size());
  for (const CompactJson::Member m : j.members()) out.push_back(m);
  // By key, in text order within a key (stable); a node's objects are small, so insertion sort
  // up to a few dozen members, a merge sort beyond (n log n on a hostile object).
  const auto by_key = [](const CompactJson::Member& a, const CompactJson::Member& b) { return a.key < b.key; };
  if (out.size() <= 32) {
    for (std::size_t i = 1; i < out.size(); ++i) {
      const CompactJson::Member m = out[i];
      std::size_t k = i;
      for (; k > 0 && by_key(m, out[k - 1]); --k) out[k] = out[k - 1];
      out[k] = m;
    }
  } else {
    std::stable_sort(out.begin(), out.end(), by_key);
  }
  // The last of each run of equal keys is the one kept.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i + 1 < out.size() && out[i + 1].key == out[i].key) continue;
    out[kept++] = out[i];
  }
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(kept), out.end());
  return out;
}

void write_string_member(CompactJson::Builder& out, const char* key, std::string_view value) {
  out.start_object();
  out.key(key);
  out.string(value);
  out.end_object();
}

json write_dim(const Dim3& d) {
  if (d.y == 1 && d.z == 1) return d.x;
  if (d.z == 1) return json::array({d.x, d.y});
  return json::array({d.x, d.y, d.z});
}

}  // namespace json_detail

}  // namespace flowdsl
