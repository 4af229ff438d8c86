// SPDX-License-Identifier: Apache-2.0
// ArgumentPack: kernel arguments stored by value, laid out once, overwritten in place.
#include <algorithm>
#include <cstring>
#include <string>

#include "flowdsl/node_parts.hpp"
#include "flowdsl/error.hpp"

namespace flowdsl {

std::string to_string(const Dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}


void ArgumentPack::append(const void* value, std::size_t size, std::size_t align, bool bound, SlotKind kind) {
  if (kind != SlotKind::value && size != sizeof(std::uint64_t)) {
    throw UsageError("flowdsl: a pointer or condition argument takes 8 bytes, not " + std::to_string(size));
  }
  if (align == 0 || align > alignof(Chunk) || (align & (align - 1)) != 0) {
    throw UsageError("flowdsl: kernel argument alignment " + std::to_string(align) +
                     " is not a power of two of at most 16");
  }
  const std::size_t offset = (std::size_t{used_} + align - 1) & ~(align - 1);
  const std::size_t end = offset + size;
  if (end > max_bytes) {
    throw UsageError("flowdsl: kernel arguments of " + std::to_string(end) + " bytes exceed CUDA's limit of " +
                     std::to_string(max_bytes));
  }
  const std::size_t chunks = (end + sizeof(Chunk) - 1) / sizeof(Chunk);
  if (chunks > inline_chunks) {
    std::vector<Chunk>& heap = more_.make().bytes;
    if (heap.empty()) {
      heap.resize(chunks);
      std::memcpy(heap.data(), inline_, used_);
    } else {
      heap.resize(chunks);
    }
  }
  std::memcpy(bytes() + offset, value, size);
  const Slot s{static_cast<std::uint16_t>(offset), static_cast<std::uint16_t>(size), bound, kind};
  if (count_ < inline_slots) {
    slots_[count_] = s;
  } else {
    more_.make().slots.push_back(s);
  }
  ++count_;
  used_ = static_cast<std::uint16_t>(end);
}

void ArgumentPack::no_slot(std::size_t index) const {
  throw UsageError("flowdsl: kernel argument " + std::to_string(index) + " does not exist (the kernel takes " +
                   std::to_string(count_) + ")");
}

void ArgumentPack::wrong_size(std::size_t index, std::size_t size) const {
  throw UsageError("flowdsl: kernel argument " + std::to_string(index) + " takes " + std::to_string(slot(index).size) +
                   " bytes, not " + std::to_string(size));
}

void ArgumentPack::pointers(std::vector<void*>& out) const {
  out.resize(count_);
  auto* base = const_cast<unsigned char*>(bytes());
  for (std::size_t i = 0; i < count_; ++i) out[i] = base + slot(i).offset;
}

std::uint64_t ArgumentPack::word(std::size_t index) const {
  const Slot& s = slot(index);
  if (s.kind == SlotKind::value) return 0;
  std::uint64_t w = 0;
  std::memcpy(&w, bytes() + s.offset, sizeof w);
  return w;
}

bool ArgumentPack::has_symbols() const noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    if (slot(i).kind != SlotKind::value && symbol::is_symbol(word(i))) return true;
  }
  return false;
}

bool operator==(const ArgumentPack& a, const ArgumentPack& b) {
  if (a.count_ != b.count_) return false;
  for (std::size_t i = 0; i < a.count_; ++i) {
    const auto& sa = a.slot(i);
    const auto& sb = b.slot(i);
    if (sa.size != sb.size || sa.bound != sb.bound || std::memcmp(a.data(i), b.data(i), sa.size) != 0) return false;
  }
  return true;
}

}  // namespace flowdsl
