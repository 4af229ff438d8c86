// SPDX-License-Identifier: Apache-2.0
// The runtime's executables in pools: which one a launch gets, and what is dropped at capacity.
#include "executable_cache.hpp"

#include <algorithm>

namespace flowdsl::detail {

Choice Pool::choose(std::uint64_t graph_uid, const StreamKey& stream, std::size_t bound) const {
  // First without asking CUDA: what was last launched on this stream runs after that launch anyway.
  const std::shared_ptr<Member>* here = nullptr;
  for (const auto& m : members) {
    if (m->in_flight || m->stream != stream) continue;
    if (m->graph_uid == graph_uid) return {m, Pick::graph};
    if (here == nullptr || m->last_use > (*here)->last_use) here = &m;
  }
  for (const auto& m : members) {
    if (!m->in_flight && m->graph_uid == graph_uid && m->ended()) return {m, Pick::graph};
  }
  if (here != nullptr) return {*here, Pick::stream};
  for (const auto& m : members) {
    if (!m->in_flight && m->graph_uid != graph_uid && m->ended()) return {m, Pick::ended};
  }
  if (members.size() < bound) return {nullptr, Pick::none};
  const std::shared_ptr<Member>* oldest = nullptr;
  for (const auto& m : members) {
    if (!m->in_flight && (oldest == nullptr || m->last_use < (*oldest)->last_use)) oldest = &m;
  }
  return oldest != nullptr ? Choice{*oldest, Pick::busy} : Choice{nullptr, Pick::wait};
}

std::shared_ptr<Member> Pool::least_recent() const {
  const auto oldest = std::min_element(members.begin(), members.end(),
                                       [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
  return oldest == members.end() ? nullptr : *oldest;
}

Pool* ExecutableCache::find(std::uint64_t key) {
  const auto it = pools_.find(key);
  return it == pools_.end() ? nullptr : &it->second;
}

const Pool* ExecutableCache::find(std::uint64_t key) const {
  const auto it = pools_.find(key);
  return it == pools_.end() ? nullptr : &it->second;
}

std::vector<std::uint64_t> ExecutableCache::add(Pool& pool, std::shared_ptr<Member> member) {
  const Member* added = member.get();
  pool.members.push_back(std::move(member));
  ++size_;
  std::vector<std::uint64_t> dropped;
  while (size_ > capacity_) {
    // O(executables cached), on misses only.
    std::uint64_t victim_key = 0;
    Pool* victim_pool = nullptr;
    std::size_t victim = 0;
    for (auto& [key, p] : pools_) {
      for (std::size_t i = 0; i < p.members.size(); ++i) {
        const Member* m = p.members[i].get();
        if (m == added) continue;
        if (victim_pool == nullptr || m->last_use < victim_pool->members[victim]->last_use) {
          victim_key = key;
          victim_pool = &p;
          victim = i;
        }
      }
    }
    if (victim_pool == nullptr) break;  // capacity 1: the added one stays
    victim_pool->members.erase(victim_pool->members.begin() + static_cast<std::ptrdiff_t>(victim));
    --size_;
    dropped.push_back(victim_key);
    if (victim_pool->members.empty()) pools_.erase(victim_key);
  }
  return dropped;
}

void ExecutableCache::erase(std::uint64_t key) {
  const auto it = pools_.find(key);
  if (it == pools_.end()) return;
  size_ -= it->second.members.size();
  pools_.erase(it);
}

void ExecutableCache::clear() {
  pools_.clear();
  size_ = 0;
}

}  // namespace flowdsl::detail
