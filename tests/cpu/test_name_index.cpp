// SPDX-License-Identifier: Apache-2.0
// NameIndex: what the graph-file binder resolves dependencies by name with. Every name finds the
// first position that holds it, whatever the repeats; names not indexed find nothing.
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/name_index.hpp"
#include "catch.hpp"

namespace {

struct NameOf {
  const std::vector<std::string>* names;
  std::string_view operator()(std::size_t i) const { return (*names)[i]; }
};

flowdsl::detail::NameIndex<NameOf> index_of(const std::vector<std::string>& names) {
  return flowdsl::detail::NameIndex<NameOf>(names.size(), NameOf{&names});
}

}  // namespace

TEST_CASE("NameIndex finds the first position of each name", "[name_index]") {
  std::mt19937 rng(7);
  for (const std::size_t count : {0u, 1u, 7u, 16u, 1000u, 50000u}) {
    std::vector<std::string> names;
    // Names from a pool smaller than the count, so that many repeat, of lengths 0 to 20 (the
    // hash's whole words and tails).
    std::uniform_int_distribution<std::size_t> pick(0, count / 2 + 1);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t id = pick(rng);
      names.push_back(std::string(id % 21, 'a' + static_cast<char>(id % 26)) + (id % 3 == 0 ? "" : std::to_string(id)));
    }
    std::unordered_map<std::string, std::uint32_t> first;
    for (std::size_t i = 0; i < names.size(); ++i) first.emplace(names[i], static_cast<std::uint32_t>(i));
    const auto index = index_of(names);
    for (const auto& [name, at] : first) {
      const std::optional<std::uint32_t> found = index.find(name);
      REQUIRE(found.has_value());
      CHECK(*found == at);
    }
    CHECK_FALSE(index.find("not-a-name").has_value());
    CHECK_FALSE(index.find(std::string(64, 'z')).has_value());
  }
}

TEST_CASE("NameIndex tells names apart that share a prefix, a length or a word", "[name_index]") {
  const std::vector<std::string> names = {"",         "n",         "n1",        "n10",      "n01",
                                          "abcdefgh", "abcdefghi", "abcdefgH",  "bbcdefgh", "abcdefgh1",
                                          "a/b~c",    "a/b~d",     "same-name", "same-name"};
  const auto index = index_of(names);
  for (std::size_t i = 0; i + 1 < names.size(); ++i) CHECK(index.find(names[i]) == std::optional<std::uint32_t>(i));
  CHECK(index.find("same-name") == std::optional<std::uint32_t>(12));
  CHECK_FALSE(index.find("n2").has_value());
  CHECK_FALSE(index.find("abcdefg").has_value());
}

TEST_CASE("name_hash depends on every byte and the length", "[name_index]") {
  using flowdsl::detail::name_hash;
  CHECK(name_hash("abcdefgh") != name_hash("abcdefgi"));
  CHECK(name_hash("abcdefgh") != name_hash(std::string_view("abcdefgh\0", 9)));
  CHECK(name_hash(std::string_view("a\0", 2)) != name_hash("a"));
  CHECK(name_hash("node") == name_hash(std::string("node")));
}
