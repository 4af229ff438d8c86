#pragma once
/// \file node_parts.hpp
/// \brief The parts nodes and operations are made of: node ids and references, edges,
/// launch shapes, kernel argument packs and declared accesses. Plain data, no CUDA.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flowdsl {

/// \brief Index of a node in its description, in order of declaration.
using NodeId = std::uint32_t;
inline constexpr NodeId no_node = ~NodeId{0};

/// \brief A 3-D extent (grid or block), CUDA's dim3 without the CUDA header.
struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;

  constexpr Dim3() = default;
  constexpr Dim3(std::uint32_t x_, std::uint32_t y_ = 1, std::uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr std::uint64_t volume() const { return std::uint64_t{x} * y * z; }
  friend constexpr bool operator==(const Dim3& a, const Dim3& b) { return a.x == b.x && a.y == b.y && a.z == b.z; }
  friend constexpr bool operator!=(const Dim3& a, const Dim3& b) { return !(a == b); }
};

/// \brief How a kernel is launched. Structure.
struct LaunchShape {
  Dim3 grid;
  Dim3 block;
  std::uint32_t shared_bytes = 0;  ///< dynamic shared memory per block
};

/// \brief A kernel's arguments, by value, one slot per parameter of the kernel.
///
/// Slots are laid out once (append) and then overwritten in place (set), so that changing an
/// argument never reallocates. Arguments must be trivially copyable, as CUDA copies them.
/// Up to 8 slots and 64 bytes live inside the pack itself: a typical kernel's arguments sit
/// next to the rest of its node, which keeps building and updating large graphs cache-friendly.
class ArgumentPack {
 public:
  /// CUDA's limit on the bytes of one kernel's parameters.
  static constexpr std::size_t max_bytes = 32764;

  /// \brief Appends a slot of `size` bytes aligned to `align` (a power of two, at most 16)
  /// holding a copy of `value`. `bound` says whether that value is the argument (true) or a
  /// placeholder that must be set before the graph is valid (false).
  /// \throws UsageError for a bad alignment or when the arguments would exceed max_bytes.
  void append(const void* value, std::size_t size, std::size_t align, bool bound = true);

  /// \brief Overwrites slot `index` with `size` bytes from `value`.
  /// \throws UsageError if the index is out of range or the size differs from the slot's.
  void set(std::size_t index, const void* value, std::size_t size);

  std::size_t size() const noexcept { return count_; }
  /// \brief Address of slot `index` (valid until the next append).
  const void* data(std::size_t index) const { return bytes() + slot(index).offset; }
  std::size_t slot_size(std::size_t index) const { return slot(index).size; }
  /// \brief Whether slot `index` has been set since it was appended as a placeholder.
  bool bound(std::size_t index) const { return slot(index).bound; }

  /// \brief One pointer per slot, in the form cudaKernelNodeParams::kernelParams wants.
  /// Written into `out` (resized), valid until the next append.
  void pointers(std::vector<void*>& out) const;

  friend bool operator==(const ArgumentPack& a, const ArgumentPack& b);

 private:
  struct Slot {
    std::uint16_t offset;
    std::uint16_t size;
    bool bound;
  };
  struct alignas(16) Chunk {
    unsigned char bytes[16];
  };
  static constexpr std::size_t inline_slots = 8;
  static constexpr std::size_t inline_chunks = 4;  // 64 bytes

  const Slot& slot(std::size_t i) const { return i < inline_slots ? slots_[i] : more_slots_[i - inline_slots]; }
  Slot& slot(std::size_t i) { return i < inline_slots ? slots_[i] : more_slots_[i - inline_slots]; }
  // Bytes live inline until they outgrow it; then all of them move to heap_.
  const unsigned char* bytes() const {
    return reinterpret_cast<const unsigned char*>(heap_.empty() ? inline_ : heap_.data());
  }
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(heap_.empty() ? inline_ : heap_.data()); }

  std::uint16_t count_ = 0;
  std::uint16_t used_ = 0;  ///< bytes in use
  Slot slots_[inline_slots] = {};
  Chunk inline_[inline_chunks] = {};
  std::vector<Slot> more_slots_;  ///< slots 8 and up
  std::vector<Chunk> heap_;       ///< all bytes, once more than 64
};

/// \brief Reference to a node, either by index (handles) or by name (resolved by validation).
struct NodeRef {
  NodeId id = no_node;
  std::string name;  ///< used when id == no_node
};

/// \brief Ordering type of an edge. Only full dependencies exist today; programmatic-launch
/// edges will add a kind here without changing the rest of the description.
enum class EdgeKind : std::uint8_t { full };

/// \brief `to` runs after `from` completes.
struct Edge {
  NodeRef from;
  NodeRef to;
  EdgeKind kind = EdgeKind::full;
};

/// \brief How a node uses a memory range it declares. Kept for the hazard check; not hashed.
enum class AccessMode : std::uint8_t { read, write, read_write };

/// \brief A memory range a node declares it reads or writes.
struct Access {
  const void* ptr = nullptr;
  std::size_t bytes = 0;  ///< 0: extent unknown (the pointer alone is declared)
  AccessMode mode = AccessMode::read;
};

}  // namespace flowdsl
