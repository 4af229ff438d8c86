// SPDX-License-Identifier: Apache-2.0
// The serving sample's continuous batcher: admission within slots and pages, prefill by chunks,
// decode, retirement by length or end token, pages freed and reused; and 10 000 random requests
// of which none is lost or duplicated and every token is fed once, in order.
#include <map>
#include <random>
#include <set>

#include "catch.hpp"
#include "llm_batcher.hpp"

namespace {

llm::Request request(std::int64_t id, int prompt, int new_tokens) {
  llm::Request r;
  r.id = id;
  for (int i = 0; i < prompt; ++i) r.prompt.push_back(static_cast<std::int32_t>(1000 * id + i));  // unique a request
  r.max_new_tokens = new_tokens;
  return r;
}

/// The token a fake model makes for sequence `id` after `count` tokens of it: never the end token
/// unless `end_after` says so.
std::int32_t fake_token(std::int64_t id, std::size_t count) { return static_cast<std::int32_t>(10 + (id * 31 + count) % 500); }

}  // namespace

TEST_CASE("A page pool hands out each page once and takes back only held pages", "[llm][batcher]") {
  llm::PagePool pool(3);
  std::set<std::int32_t> got;
  for (int i = 0; i < 3; ++i) got.insert(*pool.allocate());
  CHECK(got == std::set<std::int32_t>{0, 1, 2});
  CHECK_FALSE(pool.allocate().has_value());
  pool.release(1);
  CHECK(pool.free_pages() == 1);
  CHECK_THROWS_AS(pool.release(1), std::logic_error);  // a double free
  CHECK_THROWS_AS(pool.release(7), std::logic_error);
  CHECK(*pool.allocate() == 1);  // reused
}

TEST_CASE("A request is prefilled by chunks, then decodes one token a step until its limit", "[llm][batcher]") {
  llm::Batcher b({/*slots*/ 2, /*pages*/ 8, /*page_size*/ 4, /*pages_per_seq*/ 4, /*max_step_tokens*/ 8, /*chunk*/ 3});
  b.submit(request(1, 7, 3));  // 7 prompt tokens: chunks of 3, 3, 1; 9 positions: 3 pages
  llm::StepPlan p = b.plan();
  CHECK(p.prefill_tokens == 3);
  CHECK(p.positions == std::vector<std::int32_t>{0, 1, 2});
  CHECK(p.sample.empty());
  CHECK(b.pool().free_pages() == 5);
  CHECK(b.complete(p, {}).empty());
  p = b.plan();
  CHECK(p.positions == std::vector<std::int32_t>{3, 4, 5});
  CHECK(b.complete(p, {}).empty());
  p = b.plan();
  CHECK(p.positions == std::vector<std::int32_t>{6});
  REQUIRE(p.sample == std::vector<std::int32_t>{0});  // the last prompt token picks the first new one
  CHECK(b.complete(p, {50}).empty());
  p = b.plan();
  CHECK(p.decode_tokens == 1);
  CHECK(p.tokens == std::vector<std::int32_t>{50});
  CHECK(p.positions == std::vector<std::int32_t>{7});
  CHECK(b.complete(p, {51}).empty());
  p = b.plan();
  CHECK(p.positions == std::vector<std::int32_t>{8});
  const auto done = b.complete(p, {52});
  REQUIRE(done.size() == 1);
  CHECK(done[0].generated == std::vector<std::int32_t>{50, 51, 52});
  CHECK_FALSE(done[0].ended_by_token);
  CHECK(b.pool().free_pages() == 8);
  CHECK(b.running() == 0);
  for (const std::int32_t e : b.block_table()) CHECK(e == -1);
  CHECK(b.plan().empty());
}

TEST_CASE("The end token retires a sequence early", "[llm][batcher]") {
  llm::Batcher b({1, 4, 16, 4, 16, 16}, /*end_token*/ 2);
  b.submit(request(5, 4, 50));
  llm::StepPlan p = b.plan();
  CHECK(b.complete(p, {9}).empty());
  p = b.plan();
  const auto done = b.complete(p, {2});
  REQUIRE(done.size() == 1);
  CHECK(done[0].generated == std::vector<std::int32_t>{9, 2});
  CHECK(done[0].ended_by_token);
}

TEST_CASE("Admission waits for a slot and for pages, in arrival order", "[llm][batcher]") {
  llm::Batcher b({2, 4, 4, 4, 64, 64});
  b.submit(request(1, 8, 5));  // 12 positions: 3 pages
  b.submit(request(2, 2, 2));  // 3 positions: 1 page, but behind request 1... which fits
  b.submit(request(3, 4, 1));  // 4 positions: 1 page: no slot, and no page left
  llm::StepPlan p = b.plan();
  CHECK(b.running() == 2);
  CHECK(b.waiting() == 1);
  CHECK(b.pool().free_pages() == 0);
  CHECK(p.prefill_tokens == 10);
  const auto done = b.complete(p, {7, 8});
  CHECK(done.empty());
  // Request 2 ends after its second token; then request 3 takes its slot and page.
  p = b.plan();
  auto finished = b.complete(p, {70, 80});
  REQUIRE(finished.size() == 1);
  CHECK(finished[0].id == 2);
  p = b.plan();
  CHECK(b.running() == 2);
  CHECK(b.waiting() == 0);
  CHECK(b.request_in(0) == 1);
  CHECK(b.request_in(1) == 3);  // request 2's slot, taken by request 3
  CHECK(b.request_in(2) == -1);
  CHECK(b.request_in(-1) == -1);
  CHECK_THROWS_AS(b.complete(p, {}), std::invalid_argument);  // tokens must match the samples
}

TEST_CASE("Requests that can never fit, or ask for nothing, are refused at submission", "[llm][batcher]") {
  llm::Batcher b({2, 4, 4, 2, 8, 4});
  CHECK_THROWS_AS(b.submit(request(1, 8, 2)), std::invalid_argument);  // 9 positions, 8 a sequence
  CHECK_THROWS_AS(b.submit(request(2, 0, 2)), std::invalid_argument);
  CHECK_THROWS_AS(b.submit(request(3, 2, 0)), std::invalid_argument);
  CHECK_NOTHROW(b.submit(request(4, 8, 1)));
  CHECK_THROWS_AS(llm::Batcher({0, 4, 4, 2, 8, 4}), std::invalid_argument);
  CHECK_THROWS_AS(llm::Batcher({4, 4, 4, 2, 2, 4}), std::invalid_argument);  // fewer step tokens than slots
}

TEST_CASE("10 000 random requests: none lost or duplicated, every token fed once in order, pages reused",
          "[llm][batcher]") {
  const llm::BatcherLimits limits{/*slots*/ 32, /*pages*/ 320, /*page_size*/ 16, /*pages_per_seq*/ 16,
                                  /*max_step_tokens*/ 256, /*chunk*/ 48};
  constexpr std::int32_t end_token = 3;
  llm::Batcher b(limits, end_token);
  std::mt19937 rng(7);
  constexpr int total = 10000;
  std::map<std::int64_t, llm::Request> submitted;
  std::map<std::int64_t, llm::Finished> finished;
  // What each running sequence has been fed: prompt tokens, then its generated ones.
  std::map<int, std::int64_t> slot_owner;
  std::map<std::int64_t, std::vector<std::int32_t>> fed;
  std::map<std::int64_t, std::vector<std::int32_t>> made;
  std::int64_t next_id = 0;
  int steps = 0;
  std::size_t max_running = 0;
  std::uint64_t pages_handed = 0;
  while (static_cast<int>(finished.size()) < total) {
    // Arrivals: up to 3 a step until all are in.
    const int arrivals = std::uniform_int_distribution<int>(0, 3)(rng);
    for (int i = 0; i < arrivals && next_id < total; ++i) {
      llm::Request r = request(next_id, std::uniform_int_distribution<int>(1, 120)(rng),
                               std::uniform_int_distribution<int>(1, 100)(rng));
      submitted[r.id] = r;
      b.submit(r);
      ++next_id;
    }
    const int free_before = b.pool().free_pages();
    const llm::StepPlan p = b.plan();
    pages_handed += static_cast<std::uint64_t>(std::max(0, free_before - b.pool().free_pages()));
    REQUIRE(static_cast<int>(p.tokens.size()) <= limits.max_step_tokens);
    REQUIRE(p.tokens.size() == p.positions.size());
    REQUIRE(p.tokens.size() == p.slots.size());
    if (p.empty()) {
      REQUIRE(b.running() == 0);  // nothing runs: only waiting for arrivals
      continue;
    }
    max_running = std::max(max_running, static_cast<std::size_t>(b.running()));
    // Pages: every entry of the block table held, none in two places.
    std::set<std::int32_t> pages_seen;
    for (const std::int32_t page : b.block_table()) {
      if (page < 0) continue;
      REQUIRE(b.pool().held(page));
      REQUIRE(pages_seen.insert(page).second);
    }
    REQUIRE(static_cast<int>(pages_seen.size()) + b.pool().free_pages() == limits.pages);
    // Each token is the next one its sequence must be fed, at the next position, within a page
    // of the sequence's row.
    std::map<int, int> prefill_this_step;
    for (std::size_t t = 0; t < p.tokens.size(); ++t) {
      const int slot = p.slots[t];
      REQUIRE(slot >= 0);
      REQUIRE(slot < limits.slots);
      std::int64_t id = -1;
      if (p.positions[t] == 0) {
        // A new sequence in this slot: its first prompt token names it (request() makes them unique).
        id = p.tokens[t] / 1000;
        REQUIRE(submitted.count(id) == 1);
        REQUIRE(fed.count(id) == 0);  // fed from the start once
        slot_owner[slot] = id;
        fed[id] = {};
      } else {
        REQUIRE(slot_owner.count(slot) == 1);
        id = slot_owner[slot];
      }
      auto& f = fed[id];
      const llm::Request& r = submitted.at(id);
      REQUIRE(p.positions[t] == static_cast<std::int32_t>(f.size()));
      const std::int32_t expected = f.size() < r.prompt.size() ? r.prompt[f.size()] : made[id][f.size() - r.prompt.size()];
      REQUIRE(p.tokens[t] == expected);
      if (f.size() < r.prompt.size()) ++prefill_this_step[slot];
      f.push_back(p.tokens[t]);
      const std::int32_t page = b.block_table()[static_cast<std::size_t>(slot) * limits.pages_per_seq +
                                                static_cast<std::size_t>(p.positions[t] / limits.page_size)];
      REQUIRE(page >= 0);
    }
    for (const auto& [slot, count] : prefill_this_step) REQUIRE(count <= limits.prefill_chunk);
    // The fake model: a token for each sample, the end token now and then.
    std::vector<std::int32_t> next;
    for (std::size_t i = 0; i < p.sample.size(); ++i) {
      const std::int64_t id = slot_owner.at(p.sample_slots[i]);
      const bool end = std::uniform_int_distribution<int>(0, 99)(rng) == 0;
      next.push_back(end ? end_token : fake_token(id, made[id].size()));
      made[id].push_back(next.back());
    }
    for (llm::Finished& f : b.complete(p, next)) {
      REQUIRE(finished.count(f.id) == 0);  // never twice
      const llm::Request& r = submitted.at(f.id);
      REQUIRE(f.generated == made[f.id]);
      REQUIRE(static_cast<int>(f.generated.size()) <= r.max_new_tokens);
      REQUIRE(f.ended_by_token == (f.generated.back() == end_token));
      if (!f.ended_by_token) REQUIRE(static_cast<int>(f.generated.size()) == r.max_new_tokens);
      for (std::size_t i = 0; i + 1 < f.generated.size(); ++i) REQUIRE(f.generated[i] != end_token);
      finished[f.id] = std::move(f);
    }
    ++steps;
    REQUIRE(steps < 2'000'000);  // progress
  }
  CHECK(static_cast<int>(submitted.size()) == total);
  CHECK(b.waiting() == 0);
  CHECK(b.running() == 0);
  CHECK(b.pool().free_pages() == limits.pages);
  for (const std::int32_t e : b.block_table()) CHECK(e == -1);
  CHECK(max_running == static_cast<std::size_t>(limits.slots));  // the batch filled up
  CHECK(pages_handed > 10 * static_cast<std::uint64_t>(limits.pages));  // pages were reused many times
}
