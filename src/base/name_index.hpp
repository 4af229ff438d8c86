// SPDX-License-Identifier: Apache-2.0
#pragma once
// The first position of each name in an array of names: what loaders look dependencies up in.
//
// One flat array of 8-byte slots, at most half full, probed linearly: a graph file of a million
// nodes costs 8 MiB and no allocation a name, where a node-based map takes one allocation and
// about 40 bytes a name and walks them all again to free them. The hash is seeded once per
// process, so that the names a file chooses cannot aim at one chain of slots.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace flowdsl::detail {

/// A string's hash, seeded once per process.
std::uint64_t name_hash(std::string_view s) noexcept;

/// NameOf: callable with a position, returning that name (a string_view, or convertible to
/// one); it must give the same names while the index lives (find() reads them again).
template <class NameOf>
class NameIndex {
 public:
  /// Indexes names name_of(0) … name_of(count − 1); where names repeat, the first is the one
  /// found.
  NameIndex(std::size_t count, NameOf name_of);

  /// The first position holding `name`, if any.
  std::optional<std::uint32_t> find(std::string_view name) const noexcept;

 private:
  struct Slot {
    std::uint32_t tag;       ///< the hash's high half
    std::uint32_t position;  ///< position + 1; 0: empty
  };
  std::size_t first_slot(std::uint64_t h) const noexcept { return static_cast<std::size_t>(h) & mask_; }

  NameOf name_of_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

inline std::uint64_t name_hash(std::string_view s) noexcept {
  static const std::uint64_t seed = [] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device() ^ 0x243F6A8885A308D3ull;
  }();
  const auto mix = [](std::uint64_t x) noexcept {
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
  };
  // Each step is a bijection of the state, so names of one length that differ in one word
  // never meet.
  std::uint64_t h = seed ^ (s.size() * 0x9E3779B97F4A7C15ull);
  const char* p = s.data();
  std::size_t left = s.size();
  for (; left >= 8; p += 8, left -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    h = mix(h ^ word) + seed;
  }
  if (left > 0) {
    std::uint64_t word = 0;
    std::memcpy(&word, p, left);
    h = mix(h ^ word) + seed;
  }
  return mix(h);
}

template <class NameOf>
NameIndex<NameOf>::NameIndex(std::size_t count, NameOf name_of) : name_of_(std::move(name_of)) {
  if (count >= 0xFFFFFFFFu) throw std::length_error("NameIndex: more than 2^32 - 2 names");
  std::size_t capacity = 16;
  while (capacity < 2 * count) capacity *= 2;
  slots_.assign(capacity, Slot{0, 0});
  mask_ = capacity - 1;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string_view name = name_of_(i);
    const std::uint64_t h = name_hash(name);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t k = first_slot(h);; k = (k + 1) & mask_) {
      Slot& slot = slots_[k];
      if (slot.position == 0) {
        slot = Slot{tag, static_cast<std::uint32_t>(i + 1)};
        break;
      }
      if (slot.tag == tag && std::string_view(name_of_(slot.position - 1)) == name) break;  // the first stays
    }
  }
}

template <class NameOf>
std::optional<std::uint32_t> NameIndex<NameOf>::find(std::string_view name) const noexcept {
  const std::uint64_t h = name_hash(name);
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  for (std::size_t k = first_slot(h);; k = (k + 1) & mask_) {
    const Slot& slot = slots_[k];
    if (slot.position == 0) return std::nullopt;
    if (slot.tag == tag && std::string_view(name_of_(slot.position - 1)) == name) return slot.position - 1;
  }
}

}  // namespace flowdsl::detail
