// SPDX-License-Identifier: Apache-2.0
// Plans' step and position vectors, kept for reuse: a Graph lowered per request (a server's
// rebuild) would otherwise take a large plan's pages fresh each time, a fault each.
#include "plan_storage.hpp"

#include "flowdsl/chunked_list.hpp"

#include <array>
#include <mutex>
#include <type_traits>
#include <utility>

namespace flowdsl::lowering {
namespace {

// A few vectors of one element type, best fit first. Fixed slots: keeping never allocates.
template <class T>
class Kept {
 public:
  // The slot whose vector holds `count` with the least room to spare, emptied into `out`; none
  // over four times `count`, which a smaller plan would hold on to for its whole life.
  void take(std::size_t count, std::vector<T>& out, std::size_t& kept_bytes) {
    std::vector<T>* best = nullptr;
    for (std::vector<T>& v : slots_) {
      if (v.capacity() < count || v.capacity() / 4 > count) continue;
      if (best == nullptr || v.capacity() < best->capacity()) best = &v;
    }
    if (best == nullptr) return;
    kept_bytes -= best->capacity() * sizeof(T);
    out = std::move(*best);
    *best = std::vector<T>();
  }
  // Keeps `v` (empty) in a free slot if the process's total stays within bounds.
  void keep(std::vector<T>& v, std::size_t& kept_bytes) {
    const std::size_t bytes = v.capacity() * sizeof(T);
    if (kept_bytes + bytes > plan_storage_bytes) return;
    for (std::vector<T>& slot : slots_) {
      if (slot.capacity() != 0) continue;
      slot = std::move(v);
      kept_bytes += bytes;
      return;
    }
  }

 private:
  std::array<std::vector<T>, 4> slots_;
};

class PlanStorage {
 public:
  template <class T>
  std::vector<T> take(std::size_t count) {
    std::vector<T> out;
    if (count >= min_kept_steps) {
      const std::lock_guard<std::mutex> lock(mutex_);
      kept<T>().take(count, out, kept_bytes_);
    }
    out.reserve(count);
    return out;
  }

  void give_back(Plan& plan) noexcept {
    // The steps' own lists go first, outside the lock; what is not kept is freed after it.
    plan.steps.clear();
    plan.position.clear();
    if (plan.steps.capacity() < min_kept_steps) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    kept<PlanStep>().keep(plan.steps, kept_bytes_);
    kept<std::uint32_t>().keep(plan.position, kept_bytes_);
  }

  void trim() noexcept {
    Kept<PlanStep> steps;
    Kept<std::uint32_t> positions;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      std::swap(steps, steps_);
      std::swap(positions, positions_);
      kept_bytes_ = 0;
    }
  }

 private:
  template <class T>
  Kept<T>& kept() {
    if constexpr (std::is_same_v<T, PlanStep>) {
      return steps_;
    } else {
      return positions_;
    }
  }

  std::mutex mutex_;
  Kept<PlanStep> steps_;
  Kept<std::uint32_t> positions_;
  std::size_t kept_bytes_ = 0;
};

// Never destroyed: plans may be dropped by the destructors of other static objects.
PlanStorage& storage() {
  static PlanStorage* const instance = new PlanStorage;
  return *instance;
}

struct GiveBack {
  void operator()(const Plan* plan) const noexcept {
    std::unique_ptr<Plan> owned(const_cast<Plan*>(plan));  // made non-const by share_plan
    storage().give_back(*owned);
  }
};

}  // namespace

std::vector<PlanStep> take_steps(std::size_t count) { return storage().take<PlanStep>(count); }

std::vector<std::uint32_t> take_positions(std::size_t count) { return storage().take<std::uint32_t>(count); }

std::shared_ptr<const Plan> share_plan(Plan&& plan) {
  Plan* owned = new Plan(std::move(plan));
  return std::shared_ptr<const Plan>(owned, GiveBack{});  // should this throw, GiveBack frees `owned`
}

void trim_plan_storage() noexcept { storage().trim(); }

}  // namespace flowdsl::lowering

namespace flowdsl {

void release_cached_memory() noexcept {
  lowering::trim_plan_storage();
  detail::trim_chunk_cache();
}

}  // namespace flowdsl
