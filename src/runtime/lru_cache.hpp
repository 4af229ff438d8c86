// LruCache: a bounded map from 64-bit keys to values, dropping the least recently used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <utility>

namespace flowdsl::detail {

/// find() and insert() are O(1); find() makes the entry the most recently used, peek() does not.
template <class Value>
class LruCache {
 public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  /// The value under `key`, now the most recently used; null when absent.
  Value* find(std::uint64_t key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  /// The value under `key`, leaving the order as it is; null when absent.
  const Value* peek(std::uint64_t key) const {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &it->second->second;
  }

  /// Calls `visit(value)` for every value, most recently used first, leaving the order as it is.
  template <class Visit>
  void for_each(Visit visit) const {
    for (const Entry& entry : order_) visit(entry.second);
  }

  /// Stores `value` under `key` (which must be absent) as the most recently used. When that
  /// exceeds the capacity, drops the least recently used entry and returns its key.
  std::optional<std::uint64_t> insert(std::uint64_t key, Value value) {
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    if (order_.size() <= capacity_) return std::nullopt;
    const std::uint64_t evicted = order_.back().first;
    index_.erase(evicted);
    order_.pop_back();
    return evicted;
  }

  /// The most recently used value (after insert: the one inserted).
  Value& front() { return order_.front().second; }

  void erase(std::uint64_t key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return;
    order_.erase(it->second);
    index_.erase(it);
  }

  void clear() {
    index_.clear();
    order_.clear();
  }
  std::size_t size() const noexcept { return order_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  using Entry = std::pair<std::uint64_t, Value>;
  std::size_t capacity_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::uint64_t, typename std::list<Entry>::iterator> index_;
};

}  // namespace flowdsl::detail
