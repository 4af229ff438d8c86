// SPDX-License-Identifier: Apache-2.0
// Continuous batching: see llm_batcher.hpp.
#include "llm_batcher.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace llm {

PagePool::PagePool(int pages) : held_(static_cast<std::size_t>(std::max(pages, 0)), false) {
  free_.resize(held_.size());
  // Page 0 on top: a fresh pool hands pages out in order.
  std::iota(free_.rbegin(), free_.rend(), 0);
}

std::optional<std::int32_t> PagePool::allocate() {
  if (free_.empty()) return std::nullopt;
  const std::int32_t page = free_.back();
  free_.pop_back();
  held_[static_cast<std::size_t>(page)] = true;
  return page;
}

void PagePool::release(std::int32_t page) {
  if (page < 0 || page >= pages() || !held_[static_cast<std::size_t>(page)]) {
    throw std::logic_error("llm::PagePool: page " + std::to_string(page) + " is not held");
  }
  held_[static_cast<std::size_t>(page)] = false;
  free_.push_back(page);
}

Batcher::Batcher(const BatcherLimits& limits, std::int32_t end_token)
    : limits_(limits), end_token_(end_token), pool_(limits.pages) {
  if (limits.slots <= 0 || limits.pages <= 0 || limits.page_size <= 0 || limits.pages_per_seq <= 0 ||
      limits.max_step_tokens <= 0 || limits.prefill_chunk <= 0) {
    throw std::invalid_argument("llm::Batcher: every limit must be positive");
  }
  if (limits.max_step_tokens < limits.slots) {
    throw std::invalid_argument("llm::Batcher: max_step_tokens must hold one decode token a slot");
  }
  slots_.resize(static_cast<std::size_t>(limits.slots));
  block_table_.assign(static_cast<std::size_t>(limits.slots) * static_cast<std::size_t>(limits.pages_per_seq), -1);
}

int Batcher::pages_needed(const Request& r) const noexcept {
  // The prompt and every generated token but the last are written to the cache.
  const std::int64_t tokens = static_cast<std::int64_t>(r.prompt.size()) + r.max_new_tokens - 1;
  return static_cast<int>((tokens + limits_.page_size - 1) / limits_.page_size);
}

void Batcher::submit(Request request) {
  if (request.prompt.empty() || request.max_new_tokens < 1) {
    throw std::invalid_argument("llm::Batcher: request " + std::to_string(request.id) +
                                " needs a prompt and at least one new token");
  }
  const std::int64_t tokens = static_cast<std::int64_t>(request.prompt.size()) + request.max_new_tokens - 1;
  const std::int64_t most = std::int64_t{limits_.page_size} * std::min(limits_.pages_per_seq, limits_.pages);
  if (tokens > most) {
    throw std::invalid_argument("llm::Batcher: request " + std::to_string(request.id) + " needs " +
                                std::to_string(tokens) + " positions, a sequence holds at most " + std::to_string(most));
  }
  waiting_.push_back(std::move(request));
}

int Batcher::running() const noexcept {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const Sequence& s) { return s.active; }));
}

std::int64_t Batcher::request_in(int slot) const noexcept {
  if (slot < 0 || slot >= limits_.slots) return -1;
  const Sequence& s = slots_[static_cast<std::size_t>(slot)];
  return s.active ? s.request.id : -1;
}

void Batcher::admit() {
  // In arrival order: the first request that does not fit waits, and so do those behind it (no
  // overtaking, so a long prompt is not starved by short ones).
  while (!waiting_.empty()) {
    const Request& next = waiting_.front();
    const auto slot = std::find_if(slots_.begin(), slots_.end(), [](const Sequence& s) { return !s.active; });
    const int needed = pages_needed(next);
    if (slot == slots_.end() || needed > pool_.free_pages()) return;
    Sequence& s = *slot;
    s = Sequence{};
    s.request = std::move(waiting_.front());
    waiting_.pop_front();
    s.active = true;
    s.admitted = admissions_++;
    const std::size_t row = static_cast<std::size_t>(slot - slots_.begin()) * static_cast<std::size_t>(limits_.pages_per_seq);
    for (int p = 0; p < needed; ++p) {
      const std::int32_t page = *pool_.allocate();  // enough are free: checked above
      s.pages.push_back(page);
      block_table_[row + static_cast<std::size_t>(p)] = page;
    }
  }
}

StepPlan Batcher::plan() {
  admit();
  StepPlan plan;
  auto add = [&](int slot, std::int32_t token, int position) {
    plan.tokens.push_back(token);
    plan.positions.push_back(position);
    plan.slots.push_back(slot);
  };
  // Decode first: one token of every sequence whose prompt is in the cache.
  for (int slot = 0; slot < limits_.slots; ++slot) {
    const Sequence& s = slots_[static_cast<std::size_t>(slot)];
    if (!s.active || s.prefilled < static_cast<int>(s.request.prompt.size())) continue;
    const int position = static_cast<int>(s.request.prompt.size() + s.generated.size()) - 1;
    plan.sample.push_back(static_cast<std::int32_t>(plan.tokens.size()));
    plan.sample_slots.push_back(slot);
    add(slot, s.generated.back(), position);
    ++plan.decode_tokens;
  }
  // Then prompt chunks, the longest-admitted sequence first, within the step's budget.
  std::vector<int> prefilling;
  for (int slot = 0; slot < limits_.slots; ++slot) {
    const Sequence& s = slots_[static_cast<std::size_t>(slot)];
    if (s.active && s.prefilled < static_cast<int>(s.request.prompt.size())) prefilling.push_back(slot);
  }
  std::sort(prefilling.begin(), prefilling.end(), [&](int a, int b) {
    return slots_[static_cast<std::size_t>(a)].admitted < slots_[static_cast<std::size_t>(b)].admitted;
  });
  for (const int slot : prefilling) {
    const Sequence& s = slots_[static_cast<std::size_t>(slot)];
    const int left = limits_.max_step_tokens - static_cast<int>(plan.tokens.size());
    const int remaining = static_cast<int>(s.request.prompt.size()) - s.prefilled;
    const int count = std::min({left, remaining, limits_.prefill_chunk});
    if (count <= 0) break;
    for (int i = 0; i < count; ++i) add(slot, s.request.prompt[static_cast<std::size_t>(s.prefilled + i)], s.prefilled + i);
    plan.prefill_tokens += count;
    if (count == remaining) {  // the prompt's last token: its logits pick the first new token
      plan.sample.push_back(static_cast<std::int32_t>(plan.tokens.size()) - 1);
      plan.sample_slots.push_back(slot);
    }
  }
  return plan;
}

void Batcher::retire(int slot) {
  Sequence& s = slots_[static_cast<std::size_t>(slot)];
  for (const std::int32_t page : s.pages) pool_.release(page);
  const std::size_t row = static_cast<std::size_t>(slot) * static_cast<std::size_t>(limits_.pages_per_seq);
  std::fill_n(block_table_.begin() + static_cast<std::ptrdiff_t>(row), limits_.pages_per_seq, -1);
  s = Sequence{};
}

std::vector<Finished> Batcher::complete(const StepPlan& plan, const std::vector<std::int32_t>& next) {
  if (next.size() != plan.sample_slots.size()) {
    throw std::invalid_argument("llm::Batcher: " + std::to_string(next.size()) + " tokens for " +
                                std::to_string(plan.sample_slots.size()) + " sampled sequences");
  }
  // The prompt tokens of the plan are in the cache now.
  for (std::size_t t = 0; t < plan.tokens.size(); ++t) {
    Sequence& s = slots_[static_cast<std::size_t>(plan.slots[t])];
    if (s.active && plan.positions[t] == s.prefilled && s.prefilled < static_cast<int>(s.request.prompt.size())) {
      ++s.prefilled;
    }
  }
  std::vector<Finished> finished;
  for (std::size_t i = 0; i < next.size(); ++i) {
    const int slot = plan.sample_slots[i];
    Sequence& s = slots_[static_cast<std::size_t>(slot)];
    if (!s.active) throw std::invalid_argument("llm::Batcher: slot " + std::to_string(slot) + " holds no sequence");
    s.generated.push_back(next[i]);
    const bool ended = next[i] == end_token_;
    if (ended || static_cast<int>(s.generated.size()) >= s.request.max_new_tokens) {
      finished.push_back({s.request.id, std::move(s.generated), ended});
      retire(slot);
    }
  }
  return finished;
}

}  // namespace llm
