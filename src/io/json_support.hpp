// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the JSON reader, binder and writer: typed member access that fails with a
// JsonError at a JSON pointer, and pointer tokens.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "flowdsl/compact_json.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/node_parts.hpp"

namespace flowdsl {
struct NodeSpec;
struct GraphSpec;
struct JsonLimits;
struct BufferRef;
struct AccessSpec;

/// A buffer reference of a node's fields as they are kept (see from_json(const json&, BufferRef&)).
/// \throws JsonError relative to `j`
void from_json(CompactJson::Ref j, BufferRef& v);
void from_json(CompactJson::Ref j, AccessSpec& v);
}

namespace flowdsl::json_detail {

using nlohmann::json;

/// Reads a node of a DOM (from_json(const json&, NodeSpec&)): converted to a CompactJson, then
/// read as the parser's nodes are.
void read_node(const json& node, NodeSpec& out);

/// Reads the members of a graph file but the checks of its named bodies' uses (which need its
/// nodes: the parser reads those apart).
void read_graph(const json& j, GraphSpec& out);

/// The problems of the named bodies of `spec` and their uses: a use of a body not declared, a
/// body that uses itself (directly or through others); with `limits`, a graph that has more
/// nodes, or nests deeper, than they allow once every use is written out. Linear in the spec:
/// each named body is measured once.
std::vector<JsonProblem> check_named_bodies(const GraphSpec& spec, const JsonLimits* limits);

/// A JSON pointer token: "~" becomes "~0" and "/" becomes "~1" (RFC 6901).
std::string token(std::string_view key);
/// `prefix` followed by token(key): the pointer of the member `key` of the value at `prefix`.
std::string pointer_to(std::string_view prefix, std::string_view key);
inline std::string token(std::size_t index) { return "/" + std::to_string(index); }

[[noreturn]] void fail(std::string pointer, std::string message);

/// Runs `read`, prefixing the pointer of any JsonError it throws with what `prefix()` returns
/// (made only then: readers run this for every member of every node).
template <class Prefix, class F>
void within_made(Prefix&& prefix, F&& read) {
  try {
    std::forward<F>(read)();
  } catch (const JsonError& e) {
    const std::string before = prefix();
    std::vector<JsonProblem> problems = e.problems();
    for (JsonProblem& p : problems) p.pointer = before + p.pointer;
    throw JsonError(std::move(problems), e.source());
  }
}

/// Runs `read`, prefixing the pointer of any JsonError it throws with `prefix`.
template <class F>
void within(const std::string& prefix, F&& read) {
  within_made([&] { return prefix; }, std::forward<F>(read));
}
/// As within(token(key), read) and within(token(index), read).
template <class F>
void within_member(std::string_view key, F&& read) {
  within_made([&] { return token(key); }, std::forward<F>(read));
}
template <class F>
void within_element(std::size_t index, F&& read) {
  within_made([&] { return token(index); }, std::forward<F>(read));
}

// The readers below take a nlohmann DOM (what a graph file's top level is read from) or a
// CompactJson value (what a node's fields are kept as) alike.
using Ref = CompactJson::Ref;

/// The JSON type of `j`, for messages ("a string", "an array", ...).
std::string type_of(const json& j);
std::string type_of(Ref j);

/// Fails unless `j` is an object whose members are all among `allowed`.
void expect_object(const json& j, const std::vector<std::string_view>& allowed);
void expect_object(Ref j, const std::vector<std::string_view>& allowed);
/// The member `key` of an object; fails when absent.
const json& member(const json& j, const char* key);
Ref member(Ref j, const char* key);
/// The member `key`, or none when absent (fails when `j` is not an object).
const json* optional_member(const json& j, const char* key);
std::optional<Ref> optional_member(Ref j, const char* key);

std::string get_string(const json& j, const char* key);
std::string get_string(Ref j, const char* key);
/// The string member `key`, where the value keeps it (valid while `j`'s CompactJson lives).
std::string_view get_string_view(Ref j, const char* key);
/// An integer in [0, max].
std::uint64_t get_unsigned(const json& j, const char* key, std::uint64_t max);
std::uint64_t get_unsigned(Ref j, const char* key, std::uint64_t max);
double get_number(const json& j, const char* key);
double get_number(Ref j, const char* key);
bool get_bool(const json& j, const char* key);
bool get_bool(Ref j, const char* key);

/// A launch dimension: an integer or an array of 1 to 3 integers (absent: the member is required).
Dim3 get_dim(const json& j, const char* key);
Dim3 get_dim(Ref j, const char* key);
/// The launch dimension `key`, or none when absent.
std::optional<Dim3> optional_dim(Ref j, const char* key);
json write_dim(const Dim3& d);
void write_dim(CompactJson::Builder& out, const Dim3& d);

/// The members of the object `j` named `keys`, found in one walk over its members: slot i holds
/// keys[i]'s value, or nothing (the last where the text repeats a key, as member() finds). For
/// readers that look several members up: each lookup alone walks every member.
/// \throws JsonError at "" when `j` is not an object.
template <std::size_t N>
std::array<std::optional<Ref>, N> members_named(Ref j, const std::array<std::string_view, N>& keys) {
  if (!j.is_object()) fail("", "expected an object, found " + type_of(j));
  std::array<std::optional<Ref>, N> out{};
  for (const CompactJson::Member m : j.members()) {
    for (std::size_t i = 0; i < N; ++i) {
      if (m.key.size() == keys[i].size() && (m.key.empty() || m.key[0] == keys[i][0]) && m.key == keys[i]) {
        out[i] = m.value;
        break;
      }
    }
  }
  return out;
}
/// The readers above for a member found with members_named (`key`: its name, for messages).
Ref required(const std::optional<Ref>& value, const char* key);
std::string_view string_view_of(const std::optional<Ref>& value, const char* key);
std::string string_of(const std::optional<Ref>& value, const char* key);
std::uint64_t unsigned_of(const std::optional<Ref>& value, const char* key, std::uint64_t max);
std::optional<Dim3> optional_dim(const std::optional<Ref>& value, const char* key);
Dim3 dim_of(const std::optional<Ref>& value, const char* key);

/// The members of object `j`, each key once: the last where the text repeats one, as a DOM
/// keeps (in time n log n, whatever the text).
std::vector<CompactJson::Member> unique_members(Ref j);
/// Appends {key: value}.
void write_string_member(CompactJson::Builder& out, const char* key, std::string_view value);
/// Appends a buffer reference as a file writes it: its name, or {"buffer", "offset"}.
void write_buffer_ref(CompactJson::Builder& out, const BufferRef& ref);

/// Reads a node as from_json(const json&, NodeSpec&) does, from the node's object as the parser
/// keeps it; `scratch` builds the node's fields (reused from node to node).
void read_node(Ref node, NodeSpec& out, CompactJson::Builder& scratch);

/// Value readers for a member that is already found (pointer "" is the value itself).
std::string as_string(const json& j);
std::string as_string(Ref j);
std::uint64_t as_unsigned(const json& j, std::uint64_t max);
std::uint64_t as_unsigned(Ref j, std::uint64_t max);

/// A number's value, as its type (precondition: a number), for both kinds of value.
inline std::int64_t integer_of(const json& j) { return j.get<std::int64_t>(); }
inline std::int64_t integer_of(Ref j) { return j.get_integer(); }
inline std::uint64_t unsigned_of(const json& j) { return j.get<std::uint64_t>(); }
inline std::uint64_t unsigned_of(Ref j) { return j.get_unsigned(); }
inline double number_of(const json& j) { return j.get<double>(); }
inline double number_of(Ref j) { return j.get_number(); }
/// An array's elements, for a range-for over either kind of value.
inline const json& elements_of(const json& j) { return j; }
inline Ref::Elements elements_of(Ref j) { return j.elements(); }

}  // namespace flowdsl::json_detail
