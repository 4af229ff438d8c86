// SPDX-License-Identifier: Apache-2.0
// The chunks of ChunkedLists: those released are kept, up to chunk_cache_bytes for the process,
// for the next list that needs one of their size.
#include "flowdsl/chunked_list.hpp"

#include <cstdlib>
#include <mutex>

namespace flowdsl::detail {
namespace {

class ChunkCache {
 public:
  void* take(std::size_t bytes) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (Stack& stack : stacks_) {
      if (stack.bytes != bytes || stack.chunks.empty()) continue;
      void* chunk = stack.chunks.back();
      stack.chunks.pop_back();
      kept_ -= bytes;
      return chunk;
    }
    return nullptr;
  }

  bool keep(void* chunk, std::size_t bytes) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (kept_ + bytes > chunk_cache_bytes) return false;
    try {
      Stack* stack = nullptr;
      for (Stack& s : stacks_) {
        if (s.bytes == bytes) stack = &s;
      }
      if (stack == nullptr) stack = &stacks_.emplace_back(Stack{bytes, {}});
      stack->chunks.push_back(chunk);
    } catch (...) {  // no memory for the bookkeeping: the chunk is freed instead
      return false;
    }
    kept_ += bytes;
    return true;
  }

  void trim() noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (Stack& stack : stacks_) {
      for (void* chunk : stack.chunks) ::operator delete(chunk);
      stack.chunks.clear();
    }
    kept_ = 0;
  }

 private:
  struct Stack {
    std::size_t bytes;
    std::vector<void*> chunks;
  };
  std::mutex mutex_;
  std::vector<Stack> stacks_;  // one per chunk size: a handful
  std::size_t kept_ = 0;
};

// Never destroyed: lists may be released by the destructors of other static objects.
ChunkCache& cache() {
  static ChunkCache* const instance = new ChunkCache;
  return *instance;
}

}  // namespace

void* acquire_chunk(std::size_t bytes) {
  if (void* chunk = cache().take(bytes)) return chunk;
  return ::operator new(bytes);
}

void release_chunk(void* chunk, std::size_t bytes) noexcept {
  if (chunk == nullptr) return;
  if (!cache().keep(chunk, bytes)) ::operator delete(chunk);
}

void trim_chunk_cache() noexcept { cache().trim(); }

}  // namespace flowdsl::detail
