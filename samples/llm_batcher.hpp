// SPDX-License-Identifier: Apache-2.0
// Continuous batching for LLM serving, on the host: requests wait in arrival order, are admitted
// into a free sequence slot when the KV cache's page pool can hold their prompt and their longest
// answer, prefill their prompt a chunk at a time, then decode one token a step until they reach
// their length limit or the end token, and are retired between launches, their pages going back
// to the pool for the next request. Each step's plan is what a decode graph of the paged-KV
// kernels reads: every token's id, position and slot, the block table, and which tokens' logits
// pick a sequence's next token.
//
// Host-only and deterministic (no clock): the serving sample drives it with arrival times, the
// cpu tests with 10 000 random requests.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace llm {

/// \brief A fixed pool of KV-cache pages, handed out and taken back one at a time. A page is
/// either free or held by exactly one sequence.
class PagePool {
 public:
  explicit PagePool(int pages);
  /// \brief A free page, or none when every page is held.
  std::optional<std::int32_t> allocate();
  /// \brief Takes `page` back. \throws std::logic_error when it is not held (a double free).
  void release(std::int32_t page);
  int free_pages() const noexcept { return static_cast<int>(free_.size()); }
  int pages() const noexcept { return static_cast<int>(held_.size()); }
  bool held(std::int32_t page) const { return held_.at(static_cast<std::size_t>(page)); }

 private:
  std::vector<std::int32_t> free_;  // a stack: the page released last is reused first
  std::vector<bool> held_;
};

struct Request {
  std::int64_t id = 0;
  std::vector<std::int32_t> prompt;  ///< at least one token
  int max_new_tokens = 1;            ///< at least one
};

/// \brief The sizes a batcher works within: those of the graphs and of the cache it plans for.
struct BatcherLimits {
  int slots = 8;              ///< sequences at once (rows of the block table)
  int pages = 64;             ///< pages of the pool
  int page_size = 16;         ///< tokens a page
  int pages_per_seq = 8;      ///< entries of a row of the block table: the longest sequence
  int max_step_tokens = 256;  ///< tokens a step at most (decode tokens first, then prefill)
  int prefill_chunk = 64;     ///< prompt tokens a sequence a step at most
};

/// \brief One launch's tokens: token t is `tokens[t]` at `positions[t]` of the sequence in slot
/// `slots[t]`; `sample[i]` is the index of the token whose logits pick the next token of the
/// sequence in slot `sample_slots[i]` (a decode token, or the last prompt token of a prefill).
struct StepPlan {
  std::vector<std::int32_t> tokens, positions, slots;
  std::vector<std::int32_t> sample, sample_slots;
  int decode_tokens = 0, prefill_tokens = 0;
  bool empty() const noexcept { return tokens.empty(); }
};

/// \brief A request that has ended, with every token it generated.
struct Finished {
  std::int64_t id = 0;
  std::vector<std::int32_t> generated;
  bool ended_by_token = false;  ///< the end token, rather than the length limit
};

class Batcher {
 public:
  /// \throws std::invalid_argument when a limit is not positive or the pool cannot hold one page
  ///         a slot.
  explicit Batcher(const BatcherLimits& limits, std::int32_t end_token = -1);

  /// \brief Queues a request. \throws std::invalid_argument when it is empty, asks for no token,
  /// or could never fit one sequence's pages (pages_per_seq) or the pool.
  void submit(Request request);

  /// \brief Admits what fits, then plans the next launch: one token of every decoding sequence,
  /// then prompt chunks of prefilling ones, oldest first, within max_step_tokens. Empty when
  /// nothing is running or waiting that can run.
  StepPlan plan();

  /// \brief The launch of `plan` has run and made `next[i]`, the token of plan.sample_slots[i]:
  /// each sampled sequence records it; those at their limit or at the end token are retired,
  /// their pages released and their slots freed.
  /// \throws std::invalid_argument when next does not match the plan's samples.
  std::vector<Finished> complete(const StepPlan& plan, const std::vector<std::int32_t>& next);

  /// \brief [slots, pages_per_seq] page indices (-1 where none), as the kernels read it.
  const std::vector<std::int32_t>& block_table() const noexcept { return block_table_; }
  const PagePool& pool() const noexcept { return pool_; }
  const BatcherLimits& limits() const noexcept { return limits_; }
  std::size_t waiting() const noexcept { return waiting_.size(); }
  int running() const noexcept;
  /// \brief The id of the request in `slot`, or -1 when it holds none (or is not a slot).
  std::int64_t request_in(int slot) const noexcept;

 private:
  struct Sequence {
    Request request;
    int prefilled = 0;  ///< prompt tokens in the cache
    std::vector<std::int32_t> generated;
    std::vector<std::int32_t> pages;
    bool active = false;
    std::uint64_t admitted = 0;  ///< admission order: prefill goes oldest first
  };
  int pages_needed(const Request& r) const noexcept;
  void admit();
  void retire(int slot);

  BatcherLimits limits_;
  std::int32_t end_token_;
  PagePool pool_;
  std::deque<Request> waiting_;
  std::vector<Sequence> slots_;
  std::vector<std::int32_t> block_table_;
  std::uint64_t admissions_ = 0;
};

}  // namespace llm
