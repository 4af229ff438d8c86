// SPDX-License-Identifier: Apache-2.0
// CompactJson: built from events or converted from nlohmann's DOM, read back the same.
#include <random>
#include <string>

#include "catch.hpp"
#include "flowdsl/compact_json.hpp"

using flowdsl::CompactJson;
using nlohmann::json;

namespace {

// A random JSON value of bounded depth: every type, empty and nested containers, keys that
// repeat across objects, strings with NULs and non-ASCII bytes.
json random_value(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 0 ? 9 : 7));
  switch (kind) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return -static_cast<std::int64_t>(rng() % 1000000) - 1;
    case 3: return static_cast<std::uint64_t>(rng()) << 20;
    case 4: return static_cast<double>(rng() % 100000) / 7.0;
    case 5: return std::string("s\0\xc3\xa9", 4) + std::to_string(rng() % 100);
    case 6: return std::string();
    case 7: {
      json a = json::array();
      const int n = static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) a.push_back(random_value(rng, depth - 1));
      return a;
    }
    default: {
      json o = json::object();
      const int n = static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) o["k" + std::to_string(rng() % 8)] = random_value(rng, depth - 1);
      return o;
    }
  }
}

}  // namespace

TEST_CASE("CompactJson round-trips any value through nlohmann's DOM", "[compact_json]") {
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    const json value = random_value(rng, 4);
    const CompactJson compact = CompactJson::from_json(value);
    INFO(value.dump());
    CHECK(compact.to_json() == value);
    const CompactJson copy = compact;  // deep copy
    CHECK(copy == compact);
    CHECK(copy.to_json() == value);
  }
}

TEST_CASE("CompactJson is read as nlohmann's const API reads", "[compact_json]") {
  const json value = json::parse(R"({"kernel": "scale.f32", "grid": [4, 2], "block": 256, "neg": -3,
                                     "args": {"n": 4096, "a": 2.5, "x": "in", "y": {"buffer": "out", "offset": 64}},
                                     "flag": true, "none": null, "empty": {}, "list": []})");
  const CompactJson c = CompactJson::from_json(value);
  const CompactJson::Ref root = c.root();
  REQUIRE(root.is_object());
  CHECK(root.size() == 9);
  CHECK(root.find("kernel")->get_string() == "scale.f32");
  CHECK_FALSE(root.find("missing").has_value());
  CHECK(root.contains("none"));
  CHECK(root.find("none")->is_null());
  CHECK(root.find("flag")->get_bool());
  CHECK(root.find("block")->is_number_unsigned());
  CHECK(root.find("block")->get_unsigned() == 256);
  CHECK(root.find("neg")->type() == CompactJson::Type::integer);
  CHECK(root.find("neg")->get_integer() == -3);
  CHECK(root.find("neg")->is_number_integer());
  const CompactJson::Ref grid = *root.find("grid");
  REQUIRE(grid.is_array());
  CHECK(grid.size() == 2);
  CHECK(grid[0].get_unsigned() == 4);
  CHECK(grid[1].get_unsigned() == 2);
  const CompactJson::Ref args = *root.find("args");
  CHECK(args.find("a")->is_number_float());
  CHECK(args.find("a")->get_number() == 2.5);
  CHECK(args.find("y")->find("offset")->get_unsigned() == 64);
  CHECK(root.find("empty")->is_object());
  CHECK(root.find("empty")->empty());
  CHECK(root.find("list")->is_array());
  CHECK(root.find("list")->empty());
  // Members each once, in the DOM's order (nlohmann's objects sort their keys).
  std::string keys;
  for (const CompactJson::Member m : args.members()) keys += std::string(m.key) + ",";
  CHECK(keys == "a,n,x,y,");
  // Scalars have no members or elements.
  CHECK(root.find("block")->members().begin() == root.find("block")->members().end());
  CHECK(root.find("kernel")->size() == 0);
  CHECK(root.find("block")->get_string().empty());
}

TEST_CASE("CompactJson::Builder builds from events and is reused", "[compact_json]") {
  CompactJson::Builder b;
  CHECK_FALSE(b.complete());
  b.start_object();
  b.key("name");
  b.string("k1");
  b.key("dims");
  b.start_array();
  b.integer(3);   // non-negative: stored as unsigned, as nlohmann's parser gives it
  b.integer(-1);
  b.number(0.5);
  b.end_array();
  CHECK(b.depth() == 1);
  b.end_object();
  REQUIRE(b.complete());
  const CompactJson first = b.finish();
  CHECK(first.to_json() == json::parse(R"({"name": "k1", "dims": [3, -1, 0.5]})"));
  CHECK(first.root().find("dims")->operator[](0).is_number_unsigned());
  std::string keys;  // members in the order given
  for (const CompactJson::Member m : first.root().members()) keys += std::string(m.key) + ",";
  CHECK(keys == "name,dims,");
  CHECK_FALSE(b.complete());
  b.string("again");
  const CompactJson second = b.finish();
  CHECK(second.root().get_string() == "again");
  // A default value is null, and equal to a built null.
  b.null();
  CHECK(b.finish() == CompactJson());
  CHECK(CompactJson().root().is_null());
  CHECK(CompactJson().heap_bytes() == 0);
}

TEST_CASE("CompactJson::Builder refuses events out of place", "[compact_json]") {
  CompactJson::Builder b;
  CHECK_THROWS_AS(b.key("x"), std::logic_error);
  CHECK_THROWS_AS(b.end_object(), std::logic_error);
  b.start_array();
  CHECK_THROWS_AS(b.key("x"), std::logic_error);
  CHECK_THROWS_AS(b.end_object(), std::logic_error);
  CHECK_THROWS_AS(b.finish(), std::logic_error);
  b.end_array();
  CHECK(b.finish().to_json() == json::array());
  // In an object: a value without its key, two keys in a row, a key with no value.
  b.start_object();
  CHECK_THROWS_AS(b.boolean(true), std::logic_error);
  CHECK_THROWS_AS(b.start_array(), std::logic_error);
  b.key("x");
  CHECK_THROWS_AS(b.key("y"), std::logic_error);
  CHECK_THROWS_AS(b.end_object(), std::logic_error);
  b.unsigned_integer(1);
  b.end_object();
  CHECK(b.finish().to_json() == json{{"x", 1}});
}

TEST_CASE("CompactJson::Builder copies values and rewinds to a mark", "[compact_json]") {
  const nlohmann::json source = {{"kernel", "scale.f32"}, {"grid", {4, 2}}, {"args", {{"n", -3}, {"x", {{"buffer", "b"}}}}}};
  const flowdsl::CompactJson from = flowdsl::CompactJson::from_json(source);
  flowdsl::CompactJson::Builder b;
  b.start_array();
  b.value(from.root());
  b.value(from.root().find("args")->find("n").value());
  // An object replaced by a number, as a reader replaces {"expr": ...} by its value.
  const flowdsl::CompactJson::Builder::Mark mark = b.mark();
  b.start_object();
  b.key("expr");
  b.string("rank + 1");
  b.end_object();
  b.rewind(mark);
  b.unsigned_integer(2);
  b.end_array();
  const flowdsl::CompactJson built = b.finish();
  CHECK(built.to_json() == nlohmann::json::array({source, -3, 2}));
  CHECK(built.root().size() == 3);

  // A mark inside a container: what was added after it goes, the container counts as before.
  b.start_object();
  b.key("a");
  b.null();
  const auto inside = b.mark();
  b.key("b");
  b.start_array();
  b.boolean(true);
  b.rewind(inside);
  CHECK(b.depth() == 1);
  b.end_object();
  CHECK(b.finish().to_json() == nlohmann::json{{"a", nullptr}});

  // A container open at the mark and closed since: refused.
  b.start_array();
  b.start_array();
  const auto deep = b.mark();
  b.end_array();
  b.start_array();
  CHECK_THROWS_AS(b.rewind(deep), std::logic_error);
}

TEST_CASE("CompactJson compares numbers by value across kinds, objects in any order", "[compact_json]") {
  const CompactJson a = CompactJson::from_json(json::parse(R"({"x": 1, "y": [2.0, -3]})"));
  const CompactJson b = CompactJson::from_json(json::parse(R"({"y": [2, -3.0], "x": 1.0})"));
  CHECK(a == b);
  CHECK(a != CompactJson::from_json(json::parse(R"({"x": 1, "y": [2.0, 3]})")));
  CHECK(a != CompactJson::from_json(json::parse(R"({"x": 1})")));
  CHECK(CompactJson::from_json(json(-1)) != CompactJson::from_json(json(std::uint64_t{18446744073709551615u})));
}

TEST_CASE("CompactJson takes a kernel node's members in a fifth of a DOM's memory", "[compact_json]") {
  const json node = json::parse(
      R"({"kernel": "scale.f32", "grid": 1, "block": 256, "args": {"n": 256, "a": 2.0, "x": "in", "y": "b3"}})");
  const CompactJson c = CompactJson::from_json(node);
  // 9 cells (a value for each of the 4 members and 4 arguments, keys among the strings, and the
  // root) and 36 bytes of strings in 3 more; nlohmann's DOM of it takes about 1 KiB in 15
  // allocations.
  CHECK(c.heap_bytes() == 9 * 16 + 48);
}

TEST_CASE("CompactJson finds each member by its key, whatever the value's type", "[compact_json]") {
  // Keys of every length next to values of every type, string values right after their keys.
  CompactJson::Builder b;
  b.start_object();
  const char* keys[] = {"", "s", "str", "null", "bool", "negative", "unsigned", "number", "array", "object"};
  b.key(keys[0]);
  b.string("");
  b.key(keys[1]);
  b.string(std::string("a\0b", 3));
  b.key(keys[2]);
  b.string("longer than its key");
  b.key(keys[3]);
  b.null();
  b.key(keys[4]);
  b.boolean(true);
  b.key(keys[5]);
  b.integer(-7);
  b.key(keys[6]);
  b.unsigned_integer(7);
  b.key(keys[7]);
  b.number(0.25);
  b.key(keys[8]);
  b.start_array();
  b.string("element");
  b.start_object();
  b.key("inner");
  b.string("x");
  b.end_object();
  b.end_array();
  b.key(keys[9]);
  b.start_object();
  b.end_object();
  b.end_object();
  const CompactJson c = b.finish();
  const CompactJson::Ref root = c.root();
  REQUIRE(root.size() == 10);
  std::size_t i = 0;
  for (const CompactJson::Member m : root.members()) {
    REQUIRE(i < 10);
    CHECK(m.key == keys[i]);
    REQUIRE(root.find(keys[i]).has_value());
    CHECK(*root.find(keys[i]) == m.value);
    ++i;
  }
  CHECK(i == 10);
  CHECK(root.find("")->get_string().empty());
  CHECK(root.find("s")->get_string() == std::string_view("a\0b", 3));
  CHECK(root.find("str")->get_string() == "longer than its key");
  CHECK(root.find("null")->is_null());
  CHECK(root.find("negative")->get_integer() == -7);
  CHECK(root.find("unsigned")->get_unsigned() == 7);
  CHECK(root.find("number")->get_number() == 0.25);
  CHECK(root.find("array")->operator[](1).find("inner")->get_string() == "x");
  CHECK(root.find("object")->empty());
  CHECK_FALSE(root.find("nul").has_value());
  // An empty key last, its offset the strings' end (16 bytes: a whole cell): a lookup reads
  // the byte there, which the value keeps (memory checkers run this test).
  b.start_object();
  b.key("0123456789abcdef");
  b.unsigned_integer(1);
  b.key("");
  b.unsigned_integer(2);
  b.end_object();
  const CompactJson tail = b.finish();
  CHECK(tail.root().find("")->get_unsigned() == 2);
  CHECK_FALSE(tail.root().find("x").has_value());
  CHECK(CompactJson(tail) == tail);
  CHECK(c.to_json() == json::parse(R"({"": "", "s": "a\u0000b", "str": "longer than its key", "null": null,
      "bool": true, "negative": -7, "unsigned": 7, "number": 0.25, "array": ["element", {"inner": "x"}], "object": {}})"));
}
