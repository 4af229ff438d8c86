// SPDX-License-Identifier: Apache-2.0
// ChunkedList: the sequence descriptions keep nodes and edges in. Elements never move, indexing
// finds the right chunk at every boundary, copies are deep, and every element made is destroyed.
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "flowdsl/chunked_list.hpp"
#include "flowdsl/description.hpp"

namespace {

/// Counts live instances, and throws from its constructor when asked to.
struct Counted {
  static int live;
  int value;
  std::string text;  // not trivially copyable, as nodes and edges are not
  explicit Counted(int v, bool fail = false) : value(v), text(std::to_string(v)) {
    if (fail) throw std::runtime_error("construction failed");
    ++live;
  }
  Counted(const Counted& other) : value(other.value), text(other.text) { ++live; }
  Counted(Counted&& other) noexcept : value(other.value), text(std::move(other.text)) { ++live; }
  Counted& operator=(const Counted&) = default;
  ~Counted() { --live; }
};
int Counted::live = 0;

}  // namespace

TEST_CASE("A chunked list keeps every element where it was made, across chunk boundaries", "[chunked_list]") {
  flowdsl::ChunkedList<Counted> list;
  std::vector<const Counted*> where;
  const int count = 5000;  // chunks of 32, 32, 64, ..., 4096
  for (int i = 0; i < count; ++i) where.push_back(&list.emplace_back(i));
  REQUIRE(list.size() == static_cast<std::size_t>(count));
  CHECK(list.capacity() >= list.size());
  for (int i = 0; i < count; ++i) {
    REQUIRE(&list[static_cast<std::size_t>(i)] == where[static_cast<std::size_t>(i)]);
    REQUIRE(list[static_cast<std::size_t>(i)].value == i);
    REQUIRE(list[static_cast<std::size_t>(i)].text == std::to_string(i));
  }
  CHECK(list.front().value == 0);
  CHECK(list.back().value == count - 1);
  CHECK(Counted::live == count);
}

TEST_CASE("A chunked list iterates in order and works with the standard algorithms", "[chunked_list]") {
  flowdsl::ChunkedList<int> list;
  for (int i = 0; i < 1000; ++i) list.push_back(i * 3);
  int expected = 0;
  for (int v : list) {
    REQUIRE(v == expected);
    expected += 3;
  }
  CHECK(std::accumulate(list.begin(), list.end(), 0L) == 3L * 999 * 1000 / 2);
  const auto it = std::find(list.begin(), list.end(), 300);
  REQUIRE(it != list.end());
  CHECK(it - list.begin() == 100);
  CHECK(*(it + 500) == 1800);
  CHECK(std::lower_bound(list.begin(), list.end(), 2997) == list.end() - 1);
  const flowdsl::ChunkedList<int>& constant = list;
  CHECK(std::count_if(constant.begin(), constant.end(), [](int v) { return v % 2 == 0; }) == 500);
  CHECK(list.at(999) == 2997);
  // Backwards and by jumps, across every chunk boundary.
  int at = 999;
  for (auto back = list.end(); back != list.begin();) {
    --back;
    REQUIRE(*back == at * 3);
    --at;
  }
  for (std::size_t step : {1u, 31u, 32u, 33u, 63u, 64u, 65u, 127u, 500u}) {
    std::size_t i = 0;
    for (auto jump = list.begin(); jump < list.end(); jump += static_cast<std::ptrdiff_t>(step), i += step) {
      REQUIRE(*jump == static_cast<int>(i) * 3);
      REQUIRE(&*jump == &list[i]);
    }
  }
  CHECK_THROWS_AS(list.at(1000), std::out_of_range);
}

TEST_CASE("Copies of a chunked list are deep; moves and swaps hand the chunks over", "[chunked_list]") {
  {
    flowdsl::ChunkedList<Counted> a;
    for (int i = 0; i < 300; ++i) a.emplace_back(i);
    flowdsl::ChunkedList<Counted> b = a;
    REQUIRE(b.size() == 300);
    CHECK(Counted::live == 600);
    b[7].value = -1;
    CHECK(a[7].value == 7);
    const Counted* first = &a[0];
    flowdsl::ChunkedList<Counted> c = std::move(a);
    CHECK(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
    CHECK(&c[0] == first);
    CHECK(Counted::live == 600);
    c.swap(b);
    CHECK(c[7].value == -1);
    CHECK(b[7].value == 7);
    b = c;  // copy assignment drops b's elements first
    CHECK(Counted::live == 600);
    CHECK(b[7].value == -1);
    a = std::move(b);  // a moved-from list takes new elements
    CHECK(a.size() == 300);
    a.pop_back();
    CHECK(Counted::live == 599);
    a.clear();
    CHECK(a.empty());
    CHECK(Counted::live == 300);
    a.emplace_back(42);  // after clear, the chunks are used again
    CHECK(a.front().value == 42);
  }
  CHECK(Counted::live == 0);
}

TEST_CASE("A chunked list is unchanged by an element whose construction throws", "[chunked_list]") {
  flowdsl::ChunkedList<Counted> list;
  for (int i = 0; i < 32; ++i) list.emplace_back(i);  // the first chunk is full
  CHECK_THROWS_AS(list.emplace_back(32, true), std::runtime_error);
  CHECK(list.size() == 32);
  CHECK(Counted::live == 32);
  list.emplace_back(33);
  CHECK(list.back().value == 33);
  list.clear();
  CHECK(Counted::live == 0);
}

TEST_CASE("emplace_back_default makes elements as their members' initializers say", "[chunked_list]") {
  flowdsl::ChunkedList<flowdsl::Edge> edges;
  for (int i = 0; i < 100; ++i) {
    flowdsl::Edge& e = edges.emplace_back_default();
    CHECK(e.from.id == flowdsl::no_node);
    CHECK(e.to.name == 0);
    CHECK(e.kind == flowdsl::EdgeKind::full);
    e.from.id = static_cast<flowdsl::NodeId>(i);
  }
  CHECK(edges[99].from.id == 99);
  flowdsl::ChunkedList<flowdsl::Node> nodes;
  const flowdsl::Node& n = nodes.emplace_back_default();
  CHECK(n.parent == flowdsl::no_node);
  CHECK(n.body == 0);
  CHECK(n.accesses.empty());
  CHECK(std::holds_alternative<flowdsl::KernelOp>(n.op));
  CHECK(std::get<flowdsl::KernelOp>(n.op).function == nullptr);
  CHECK(std::get<flowdsl::KernelOp>(n.op).args.size() == 0);
}

TEST_CASE("reserve makes room for a count of elements without moving those there", "[chunked_list]") {
  flowdsl::ChunkedList<Counted> list;
  list.emplace_back(0);
  const Counted* first = &list[0];
  list.reserve(10000);
  CHECK(list.capacity() >= 10000);
  CHECK(&list[0] == first);
  CHECK(list.size() == 1);
}

TEST_CASE("Chunks released by one list serve the next, and the cache can be emptied", "[chunked_list]") {
  // Lists of descriptions made and dropped one after another, as a server rebuilds a graph:
  // each reads back exactly what it was given, whichever memory it got.
  for (int round = 0; round < 4; ++round) {
    flowdsl::Description d;
    for (int i = 0; i < 2000 + round; ++i) {
      flowdsl::Node& n = d.nodes.emplace_back();
      n.name = "n" + std::to_string(i);
    }
    for (int i = 0; i < 2000 + round; ++i) REQUIRE(d.nodes[static_cast<std::size_t>(i)].name == "n" + std::to_string(i));
  }
  flowdsl::detail::trim_chunk_cache();
  flowdsl::ChunkedList<int> after;
  for (int i = 0; i < 100; ++i) after.push_back(i);
  CHECK(after[99] == 99);
}
