// Helpers of the JSON reader, binder and writer: typed member access failing at a JSON pointer.
#include "json_support.hpp"

#include <limits>

namespace flowdsl {
namespace json_detail {

std::string token(std::string_view key) {
  std::string out = "/";
  out.reserve(key.size() + 1);
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
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

void expect_object(const json& j, const std::vector<std::string_view>& allowed) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  for (const auto& item : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || item.key() == a;
    if (known) continue;
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    fail(token(item.key()), "unknown member " + quoted_name(item.key()) + " (expected one of: " + list + ")");
  }
}

const json& member(const json& j, const char* key) {
  const json* found = optional_member(j, key);
  if (found == nullptr) fail(token(key), std::string("missing required member '") + key + "'");
  return *found;
}

const json* optional_member(const json& j, const char* key) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string as_string(const json& j) {
  if (!j.is_string()) fail("", "expected a string, found " + type_of(j));
  return j.get<std::string>();
}

std::uint64_t as_unsigned(const json& j, std::uint64_t max) {
  if (j.is_number_integer() && !j.is_number_unsigned()) {
    fail("", "value " + std::to_string(j.get<std::int64_t>()) + " is out of range: expected an integer in [0, " +
                 std::to_string(max) + "]");
  }
  if (!j.is_number_unsigned()) fail("", "expected a non-negative integer, found " + type_of(j));
  const auto value = j.get<std::uint64_t>();
  if (value > max) {
    fail("", "value " + std::to_string(value) + " is out of range: expected an integer in [0, " + std::to_string(max) +
                 "]");
  }
  return value;
}

std::string get_string(const json& j, const char* key) {
  const json& value = member(j, key);
  std::string out;
  within(token(key), [&] { out = as_string(value); });
  return out;
}

std::uint64_t get_unsigned(const json& j, const char* key, std::uint64_t max) {
  const json& value = member(j, key);
  std::uint64_t out = 0;
  within(token(key), [&] { out = as_unsigned(value, max); });
  return out;
}

double get_number(const json& j, const char* key) {
  const json& value = member(j, key);
  if (!value.is_number()) fail(token(key), "expected a number, found " + type_of(value));
  return value.get<double>();
}

bool get_bool(const json& j, const char* key) {
  const json& value = member(j, key);
  if (!value.is_boolean()) fail(token(key), "expected true or false, found " + type_of(value));
  return value.get<bool>();
}

Dim3 get_dim(const json& j, const char* key) {
  constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
  const json& value = member(j, key);
  Dim3 d;
  within(token(key), [&] {
    if (value.is_number()) {
      d.x = static_cast<std::uint32_t>(as_unsigned(value, u32_max));
      return;
    }
    if (!value.is_array() || value.empty() || value.size() > 3) {
      fail("", "expected an integer or an array of 1 to 3 integers, found " + type_of(value));
    }
    std::uint32_t* axes[3] = {&d.x, &d.y, &d.z};
    for (std::size_t i = 0; i < value.size(); ++i) {
      within(token(i), [&] { *axes[i] = static_cast<std::uint32_t>(as_unsigned(value[i], u32_max)); });
    }
  });
  return d;
}

json write_dim(const Dim3& d) {
  if (d.y == 1 && d.z == 1) return d.x;
  if (d.z == 1) return json::array({d.x, d.y});
  return json::array({d.x, d.y, d.z});
}

}  // namespace json_detail

}  // namespace flowdsl
