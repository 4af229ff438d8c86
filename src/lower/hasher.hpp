// SPDX-License-Identifier: Apache-2.0
// Hasher: a 64-bit streaming hash of 64-bit words, for topology hashes; StructureWords: the words
// of one node's structure, hashed on demand.
#pragma once

#include <cstdint>

namespace flowdsl::lowering {

/// Streaming 64-bit hash: each word is mixed with a multiply-rotate step into a state that
/// rotates and multiplies between words (MurmurHash3's 64-bit block step: the state's step makes
/// the position of every word count), and the result, with the word count, goes through the
/// MurmurHash3 finaliser, so single-bit changes anywhere spread over all 64 bits.
/// Not cryptographic; collisions are guarded against by the runtime's node-count check.
class Hasher {
 public:
  void add(std::uint64_t word) noexcept {
    state_ ^= mix(word);
    state_ = rotl(state_, 27) * 0x9fb21c651e98df25ULL + 0x52dce729ULL;
    ++count_;
  }
  std::uint64_t finish() const noexcept { return fmix(state_ ^ count_); }

 private:
  static std::uint64_t rotl(std::uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }
  static std::uint64_t mix(std::uint64_t x) noexcept { return rotl(x * 0x87c37b91114253d5ULL, 31) * 0x4cf5ad432745937fULL; }
  static std::uint64_t fmix(std::uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
  }

  std::uint64_t state_ = 0x243f6a8885a308d3ULL;
  std::uint64_t count_ = 0;
};

/// The words of a node's structure, as its kind's hash_structure adds them, kept rather than
/// hashed at once: a walk over a graph's nodes compares them with the last node's and hashes only
/// structures it has not just hashed (a chain of one kernel hashes once). Hashing them gives what
/// a Hasher given the same words gives, for up to `capacity` words (no kind adds more; words past
/// it are folded into the last one, which still hashes every word).
class StructureWords {
 public:
  static constexpr std::uint32_t capacity = 8;
  void add(std::uint64_t word) noexcept {
    if (count_ < capacity) {
      words_[count_++] = word;
    } else {
      words_[capacity - 1] = (words_[capacity - 1] ^ word) * 0x9e3779b97f4a7c15ULL + ++folded_;
    }
  }
  std::uint64_t hash() const noexcept {
    Hasher h;
    for (std::uint32_t i = 0; i < count_; ++i) h.add(words_[i]);
    return h.finish();
  }
  friend bool operator==(const StructureWords& a, const StructureWords& b) noexcept {
    if (a.count_ != b.count_ || a.folded_ != b.folded_) return false;
    for (std::uint32_t i = 0; i < a.count_; ++i) {
      if (a.words_[i] != b.words_[i]) return false;
    }
    return true;
  }

 private:
  std::uint32_t count_ = 0;
  std::uint32_t folded_ = 0;  ///< words past capacity
  std::uint64_t words_[capacity];
};

}  // namespace flowdsl::lowering
