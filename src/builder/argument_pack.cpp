// ArgumentPack: kernel arguments stored by value, laid out once, overwritten in place.
#include <algorithm>
#include <cstring>
#include <string>

#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"

namespace flowdsl {

void ArgumentPack::append(const void* value, std::size_t size, std::size_t align, bool bound) {
  if (align == 0 || align > alignof(Chunk) || (align & (align - 1)) != 0) {
    throw UsageError("flowdsl: kernel argument alignment " + std::to_string(align) +
                     " is not a power of two of at most 16");
  }
  const std::size_t offset = (used_ + align - 1) & ~(align - 1);
  const std::size_t end = offset + size;
  storage_.resize((end + sizeof(Chunk) - 1) / sizeof(Chunk));
  std::memcpy(bytes() + offset, value, size);
  slots_.push_back(Slot{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(size), bound});
  used_ = static_cast<std::uint32_t>(end);
}

void ArgumentPack::set(std::size_t index, const void* value, std::size_t size) {
  if (index >= slots_.size()) {
    throw UsageError("flowdsl: kernel argument " + std::to_string(index) + " does not exist (the kernel takes " +
                     std::to_string(slots_.size()) + ")");
  }
  Slot& slot = slots_[index];
  if (size != slot.size) {
    throw UsageError("flowdsl: kernel argument " + std::to_string(index) + " takes " + std::to_string(slot.size) +
                     " bytes, not " + std::to_string(size));
  }
  std::memcpy(bytes() + slot.offset, value, size);
  slot.bound = true;
}

void ArgumentPack::pointers(std::vector<void*>& out) const {
  out.resize(slots_.size());
  auto* base = const_cast<unsigned char*>(bytes());
  std::transform(slots_.begin(), slots_.end(), out.begin(), [base](const Slot& s) { return base + s.offset; });
}

bool operator==(const ArgumentPack& a, const ArgumentPack& b) {
  if (a.slots_.size() != b.slots_.size()) return false;
  for (std::size_t i = 0; i < a.slots_.size(); ++i) {
    const auto& sa = a.slots_[i];
    const auto& sb = b.slots_[i];
    if (sa.size != sb.size || sa.bound != sb.bound || std::memcmp(a.data(i), b.data(i), sa.size) != 0) return false;
  }
  return true;
}

std::string_view kind_name(const Operation& op) noexcept {
  return std::visit([](const auto& o) { return std::decay_t<decltype(o)>::kind; }, op);
}

}  // namespace flowdsl
