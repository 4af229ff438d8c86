// SPDX-License-Identifier: Apache-2.0
// The repeated-launch slot's state machine (src/runtime/recent_slot.hpp): each transition alone,
// then launches claiming and handing back one slot from several threads while another thread
// withdraws and relists it under a lock, the data beside the state word written by whoever holds
// the slot. CI runs it under ThreadSanitizer, which reports any access the machine leaves
// unordered.
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "runtime/recent_slot.hpp"

using flowdsl::detail::SlotState;

namespace {
constexpr std::uintptr_t listed_a = 0x1000, listed_b = 0x2000 | SlotState::mark_bit;
}

TEST_CASE("Each transition of a slot, alone", "[runtime][recent]") {
  SlotState s;
  CHECK(s.load() == SlotState::empty);
  CHECK(s.claim() == SlotState::empty);  // nothing listed
  CHECK(s.withdraw() == SlotState::Withdrawn::nothing);

  s.hold();  // under the lock, for the launch that lists it
  CHECK(s.claim() == SlotState::empty);  // held: not free
  CHECK(s.publish(listed_a));
  CHECK(s.load() == listed_a);

  CHECK(s.claim() == listed_a);  // a repeated launch
  CHECK(s.load() == SlotState::held);
  CHECK(s.claim() == SlotState::empty);  // one holder at a time
  CHECK(s.give_back(listed_b));
  CHECK(s.load() == listed_b);

  CHECK(s.withdraw() == SlotState::Withdrawn::from_list);
  CHECK(s.load() == SlotState::empty);

  // Withdrawn while a launch holds it: its hand-back fails and it releases the slot.
  s.hold();
  CHECK(s.publish(listed_a));
  REQUIRE(s.claim() == listed_a);
  CHECK(s.withdraw() == SlotState::Withdrawn::from_holder);
  CHECK(s.withdraw() == SlotState::Withdrawn::nothing);  // once
  CHECK_FALSE(s.give_back(listed_a));
  s.release();
  CHECK(s.load() == SlotState::empty);

  // Withdrawn while the launch that listed it under the lock still runs: publish empties it.
  s.hold();
  CHECK(s.withdraw() == SlotState::Withdrawn::from_holder);
  CHECK_FALSE(s.publish(listed_a));
  CHECK(s.load() == SlotState::empty);
  CHECK(SlotState::is_listed(listed_a));
  CHECK_FALSE(SlotState::is_listed(SlotState::withdrawn));
}

TEST_CASE("Launches claim a slot from several threads while the lock's side withdraws and relists it",
          "[runtime][recent][threads]") {
  SlotState slot;
  std::mutex lock;
  // What the runtime keeps beside the state word (the executable, the plan, the stream...): plain
  // data, ordered only by the machine.
  struct Fields {
    std::uint64_t a = 0, b = 0;
  } fields;
  std::atomic<int> holders{0};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> claimed{0}, handed_in{0}, relisted{0};
  std::atomic<int> overlaps{0}, torn{0};

  auto enter = [&] {
    if (holders.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1, std::memory_order_relaxed);
  };
  auto leave = [&] { holders.fetch_sub(1, std::memory_order_relaxed); };

  std::vector<std::thread> launches;
  for (int t = 0; t < 3; ++t) {
    launches.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const std::uintptr_t listed = slot.claim();
        if (listed == SlotState::empty) continue;
        enter();
        if (fields.a != fields.b) torn.fetch_add(1, std::memory_order_relaxed);
        ++fields.a;  // the launch's own writes (the slot's tick, its launch count)
        ++fields.b;
        leave();
        claimed.fetch_add(1, std::memory_order_relaxed);
        if (!slot.give_back(listed)) {
          // Withdrawn meanwhile: handed in under the lock.
          std::lock_guard guard(lock);
          slot.release();
          handed_in.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  std::thread lock_side([&] {
    for (int i = 0; i < 20000; ++i) {
      std::lock_guard guard(lock);
      (void)slot.withdraw();
      if (slot.load() != SlotState::empty) continue;  // a launch holds it: it hands it in
      // An empty slot is the lock's to fill: its fields rewritten, then listed.
      slot.hold();
      enter();
      if (fields.a != fields.b) torn.fetch_add(1, std::memory_order_relaxed);
      fields.a = fields.b = static_cast<std::uint64_t>(i) * 1000;
      leave();
      // Catch's assertions are for the main thread: counted here, checked after the join.
      if (slot.publish(i % 2 == 0 ? listed_a : listed_b)) relisted.fetch_add(1, std::memory_order_relaxed);
    }
    stop.store(true, std::memory_order_relaxed);
  });
  lock_side.join();
  for (auto& t : launches) t.join();

  CHECK(overlaps.load() == 0);
  CHECK(torn.load() == 0);
  CHECK(relisted.load() > 0);
  INFO("claimed " << claimed.load() << ", handed in " << handed_in.load());
  // Whatever the interleaving, the slot ends listed, empty or withdrawn-and-released: never held.
  const std::uintptr_t end = slot.load();
  CHECK((SlotState::is_listed(end) || end == SlotState::empty));
}
