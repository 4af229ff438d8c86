// SPDX-License-Identifier: Apache-2.0
#pragma once
// The state word of a repeated-launch slot (Runtime's fast path): a compare-and-swap state
// machine between launches that run without the runtime's lock and the code that holds it.
//
// States:
//   empty      nothing listed
//   held       a launch is using the slot (claimed without the lock, or listed for it under the lock)
//   withdrawn  held, and taken back under the lock meanwhile: the holder hands it in under the lock
//   listed     any value above `withdrawn`: an address (4-byte aligned) with two flag bits, free to claim
//
// Transitions, and who may make them:
//   listed    -> held       claim()      a launch, without the lock (acquire: it reads what was listed)
//   held      -> listed     give_back()  the launch that claimed it (release: what it wrote is published)
//   held      -> withdrawn  withdraw()   under the lock; the holder's give_back() then fails
//   listed    -> empty      withdraw()   under the lock
//   empty     -> held       hold()       under the lock, for the launch that lists it
//   held      -> listed     publish()    under the lock, by that launch when it ends
//   withdrawn -> empty      release()    under the lock, by the holder of a withdrawn slot
//
// Invariants (asserted): only one launch at a time holds a slot (held and withdrawn have one
// holder); the fields beside the state word are written only while the writer holds the slot or
// holds the lock with the slot empty or withdrawn, and read by a holder after its acquire; a
// withdrawn slot becomes empty only through its holder; nothing leaves `empty` without the lock.
#include <atomic>
#include <cassert>
#include <cstdint>

namespace flowdsl::detail {

class SlotState {
 public:
  static constexpr std::uintptr_t empty = 0, held = 1, withdrawn = 2;
  static constexpr std::uintptr_t mark_bit = 1, direct_bit = 2;  ///< flags of a listed value

  /// \brief Whether `state` lists an executable (rather than empty, held or withdrawn).
  static constexpr bool is_listed(std::uintptr_t state) noexcept { return state > withdrawn; }

  /// \brief The current state (relaxed: a hint, or under the lock).
  std::uintptr_t load() const noexcept { return state_.load(std::memory_order_relaxed); }

  /// \brief Without the lock: takes a listed slot. Returns the value listed, or `empty` when the
  /// slot was not free to claim.
  std::uintptr_t claim() noexcept {
    std::uintptr_t listed = state_.load(std::memory_order_relaxed);
    if (!is_listed(listed)) return empty;
    return state_.compare_exchange_strong(listed, held, std::memory_order_acquire, std::memory_order_relaxed) ? listed
                                                                                                             : empty;
  }

  /// \brief The holder of a claimed slot lists `listed` again. False when the slot was withdrawn
  /// meanwhile: the holder must then release() it under the lock.
  bool give_back(std::uintptr_t listed) noexcept {
    assert(is_listed(listed));
    std::uintptr_t expected = held;
    if (state_.compare_exchange_strong(expected, listed, std::memory_order_release, std::memory_order_relaxed)) {
      return true;
    }
    assert(expected == withdrawn);  // only the lock's side changes a held slot
    return false;
  }

  /// \brief What withdraw() found.
  enum class Withdrawn : std::uint8_t {
    nothing,      ///< empty or already withdrawn
    from_holder,  ///< held: now withdrawn, its holder will release() it
    from_list,    ///< listed: now empty
  };
  /// \brief Under the lock: takes the slot back.
  Withdrawn withdraw() noexcept {
    std::uintptr_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if (state == empty || state == withdrawn) return Withdrawn::nothing;
      const std::uintptr_t next = state == held ? withdrawn : empty;
      if (state_.compare_exchange_weak(state, next, std::memory_order_acquire, std::memory_order_relaxed)) {
        return state == held ? Withdrawn::from_holder : Withdrawn::from_list;
      }
    }
  }

  /// \brief Under the lock: an empty slot becomes held by the launch that lists it.
  void hold() noexcept {
    assert(load() == empty);
    state_.store(held, std::memory_order_relaxed);
  }

  /// \brief Under the lock, by the launch that hold() was for: lists `listed` when the slot is
  /// still held; a slot withdrawn meanwhile becomes empty. Returns whether it was listed.
  bool publish(std::uintptr_t listed) noexcept {
    assert(is_listed(listed));
    const std::uintptr_t state = load();
    assert(state == held || state == withdrawn);
    if (state == held) {
      state_.store(listed, std::memory_order_release);
      return true;
    }
    state_.store(empty, std::memory_order_relaxed);
    return false;
  }

  /// \brief Under the lock, by the holder of a withdrawn slot: empty again.
  void release() noexcept {
    assert(load() == withdrawn);
    state_.store(empty, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uintptr_t> state_{empty};
};

}  // namespace flowdsl::detail
