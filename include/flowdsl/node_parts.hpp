// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file node_parts.hpp
/// \brief The parts nodes and operations are made of: node ids and references, edges,
/// launch shapes, kernel argument packs and declared accesses. Plain data, no CUDA.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
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

/// \brief "64x1x1": how messages, DOT and the profiler write a grid or a block.
std::string to_string(const Dim3& d);

/// \brief How a kernel is launched. Structure.
struct LaunchShape {
  Dim3 grid;
  Dim3 block;
  std::uint32_t shared_bytes = 0;  ///< dynamic shared memory per block
  /// Thread-block clusters (compute capability 9.0 and later): the blocks of each cluster run
  /// together and share their shared memory. 1x1x1: no clusters. The grid is a multiple of it,
  /// and a cluster holds at most 8 blocks.
  Dim3 cluster = Dim3();
};

/// \brief The most blocks a cluster holds (the portable limit).
inline constexpr std::uint64_t max_cluster_blocks = 8;

/// \brief Symbolic values: stand-ins, in a description, for values CUDA hands out only when the
/// native graph is built (the handle of a conditional node, the address of graph-owned memory).
///
/// A symbol is a 64-bit value whose top byte is `tag`, which no device address or conditional
/// handle has: the next 16 bits index Description::symbols (the node that owns the value) and the
/// low 40 bits are a byte offset, so that `alloc.ptr<float>() + 64` stays a symbol. Kernel
/// arguments of pointer or Condition type, and the pointers of copies and fills, may hold
/// symbols; emission and updates replace them by the native values of the executable at hand.
namespace symbol {
inline constexpr std::uint64_t tag = 0xF1ull << 56;
inline constexpr unsigned index_shift = 40;
inline constexpr std::uint64_t max_offset = (std::uint64_t{1} << index_shift) - 1;
inline constexpr std::uint32_t max_symbols = 1u << 16;
constexpr bool is_symbol(std::uint64_t value) noexcept { return (value & (0xFFull << 56)) == tag; }
constexpr std::uint64_t make(std::uint32_t index, std::uint64_t offset = 0) noexcept {
  return tag | (std::uint64_t{index} << index_shift) | offset;
}
constexpr std::uint32_t index_of(std::uint64_t value) noexcept {
  return static_cast<std::uint32_t>((value >> index_shift) & 0xFFFF);
}
constexpr std::uint64_t offset_of(std::uint64_t value) noexcept { return value & max_offset; }
}  // namespace symbol

/// \brief What a kernel argument slot holds: a plain value, a pointer, or a Condition. Pointer and
/// condition slots may hold symbols (see `symbol`); plain values never are taken for one.
enum class SlotKind : std::uint8_t { value, pointer, condition };

/// \brief A kernel's arguments, by value, one slot per parameter of the kernel.
///
/// Slots are laid out once (append) and then overwritten in place (set), so that changing an
/// argument never reallocates. Arguments must be trivially copyable, as CUDA copies them.
/// Up to 8 slots and 64 bytes live inside the pack itself: a typical kernel's arguments sit
/// next to the rest of its node, which keeps building and updating large graphs cache-friendly.
class ArgumentPack {
  struct Slot {
    std::uint16_t offset;
    std::uint16_t size;
    bool bound;
    SlotKind kind;
  };
  struct alignas(16) Chunk {
    unsigned char bytes[16];
  };
  static constexpr std::size_t inline_slots = 8;
  static constexpr std::size_t inline_chunks = 4;  // 64 bytes

 public:
  /// CUDA's limit on the bytes of one kernel's parameters.
  static constexpr std::size_t max_bytes = 32764;

  /// \brief Appends a slot of `size` bytes aligned to `align` (a power of two, at most 16)
  /// holding a copy of `value`. `bound` says whether that value is the argument (true) or a
  /// placeholder that must be set before the graph is valid (false).
  /// \throws UsageError for a bad alignment or when the arguments would exceed max_bytes.
  void append(const void* value, std::size_t size, std::size_t align, bool bound = true,
              SlotKind kind = SlotKind::value);

  /// \brief Where append would put each of a fixed list of unbound slots (a typed kernel's
  /// parameters), worked out once, at compile time, for a new pack to take in one step (lay_out).
  template <std::size_t N>
  class Layout {
   public:
    struct Spec {
      std::size_t size;
      std::size_t align;
      SlotKind kind;
    };
    constexpr explicit Layout(const Spec (&specs)[N]) {
      std::size_t used = 0;
      for (std::size_t i = 0; i < N; ++i) {
        const Spec& s = specs[i];
        const bool valid = (s.kind == SlotKind::value || s.size == sizeof(std::uint64_t)) && s.align != 0 &&
                           s.align <= alignof(Chunk) && (s.align & (s.align - 1)) == 0;
        const std::size_t offset = (used + s.align - 1) & ~(s.align - 1);
        fits_ = fits_ && valid && i < inline_slots && offset + s.size <= sizeof(Chunk) * inline_chunks;
        slots_[i] = Slot{static_cast<std::uint16_t>(offset), static_cast<std::uint16_t>(s.size), false, s.kind};
        used = offset + s.size;
      }
      used_ = static_cast<std::uint16_t>(fits_ ? used : 0);
    }
    /// Whether lay_out takes it: the slots are valid and fit inside the pack. Others are
    /// appended one by one, which reports what is wrong with them.
    constexpr bool fits() const noexcept { return fits_; }

   private:
    friend class ArgumentPack;
    Slot slots_[N] = {};
    std::uint16_t used_ = 0;
    bool fits_ = true;
  };

  /// \brief Appends the unbound, zero slots of `layout` to an empty pack, as appending them one
  /// by one would. `layout.fits()` must hold.
  template <std::size_t N>
  void lay_out(const Layout<N>& layout) noexcept {
    static_assert(N <= inline_slots);
    // The bytes are zero already: nothing was ever appended to an empty pack.
    for (std::size_t i = 0; i < N; ++i) slots_[i] = layout.slots_[i];
    count_ = static_cast<std::uint16_t>(N);
    used_ = layout.used_;
  }

  /// \brief Overwrites slot `index` with `size` bytes from `value`.
  /// \throws UsageError if the index is out of range or the size differs from the slot's.
  void set(std::size_t index, const void* value, std::size_t size) {
    if (index >= count_) no_slot(index);
    Slot& s = slot(index);
    if (size != s.size) wrong_size(index, size);
    std::memcpy(bytes() + s.offset, value, size);
    s.bound = true;
  }

  std::size_t size() const noexcept { return count_; }
  /// \brief Address of slot `index` (valid until the next append).
  const void* data(std::size_t index) const { return bytes() + slot(index).offset; }
  std::size_t slot_size(std::size_t index) const { return slot(index).size; }
  /// \brief Whether slot `index` has been set since it was appended as a placeholder.
  bool bound(std::size_t index) const { return slot(index).bound; }
  /// \brief What slot `index` holds (pointer and condition slots may hold symbols).
  SlotKind kind(std::size_t index) const { return slot(index).kind; }
  /// \brief The 8 bytes of a pointer or condition slot as a number (0 for other slots).
  std::uint64_t word(std::size_t index) const;
  /// \brief Whether some pointer or condition slot holds a symbol.
  bool has_symbols() const noexcept;

  /// \brief One pointer per slot, in the form cudaKernelNodeParams::kernelParams wants.
  /// Written into `out` (resized), valid until the next append.
  void pointers(std::vector<void*>& out) const;

  /// \brief Passes each pointer and Condition slot through `f` (the symbols of a copied graph).
  template <class F>
  void remap_symbols(const F& f) {
    for (std::size_t i = 0; i < size(); ++i) {
      if (kind(i) == SlotKind::value) continue;
      const std::uint64_t value = f(word(i));
      if (value != word(i)) set(i, &value, sizeof value);
    }
  }
  /// \brief Calls `visit(value)` for each pointer or Condition slot that holds a symbol.
  template <class Visit>
  void for_each_symbol(Visit&& visit) const {
    for (std::size_t i = 0; i < size(); ++i) {
      if (kind(i) != SlotKind::value && symbol::is_symbol(word(i))) visit(word(i));
    }
  }

  friend bool operator==(const ArgumentPack& a, const ArgumentPack& b);

 private:
  [[noreturn]] void no_slot(std::size_t index) const;
  [[noreturn]] void wrong_size(std::size_t index, std::size_t size) const;

  /// What outgrows the pack. Apart, behind one pointer, made on first need: a pack sits in every
  /// node of a graph, and few kernels need it.
  struct Overflow {
    std::vector<Slot> slots;   ///< slots 8 and up
    std::vector<Chunk> bytes;  ///< all bytes, once more than 64
  };
  /// Owns the Overflow; copies copy it.
  class OverflowPtr {
   public:
    OverflowPtr() = default;
    OverflowPtr(const OverflowPtr& other) : p_(copy(other)) {}
    OverflowPtr& operator=(const OverflowPtr& other) {
      if (this != &other) p_ = copy(other);
      return *this;
    }
    OverflowPtr(OverflowPtr&&) noexcept = default;
    OverflowPtr& operator=(OverflowPtr&&) noexcept = default;
    ~OverflowPtr() = default;

    Overflow* operator->() const noexcept { return p_.get(); }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    Overflow& make() {
      if (!p_) p_ = std::make_unique<Overflow>();
      return *p_;
    }

   private:
    static std::unique_ptr<Overflow> copy(const OverflowPtr& other) {
      return other.p_ ? std::make_unique<Overflow>(*other.p_) : nullptr;
    }
    std::unique_ptr<Overflow> p_;
  };

  const Slot& slot(std::size_t i) const { return i < inline_slots ? slots_[i] : more_->slots[i - inline_slots]; }
  Slot& slot(std::size_t i) { return i < inline_slots ? slots_[i] : more_->slots[i - inline_slots]; }
  // Bytes live inline until they outgrow it; then all of them move to the overflow.
  const unsigned char* bytes() const {
    return reinterpret_cast<const unsigned char*>(more_ && !more_->bytes.empty() ? more_->bytes.data() : inline_);
  }
  unsigned char* bytes() {
    return reinterpret_cast<unsigned char*>(more_ && !more_->bytes.empty() ? more_->bytes.data() : inline_);
  }

  std::uint16_t count_ = 0;
  std::uint16_t used_ = 0;  ///< bytes in use
  Slot slots_[inline_slots] = {};
  OverflowPtr more_;
  Chunk inline_[inline_chunks] = {};
};

/// \brief Kernel parameters computed on the host from a kernel's arguments: values only the host
/// can make, such as the tensor maps of Hopper's copy engine (TMA), which encode a buffer's
/// address and shape.
///
/// A kernel node with derived parameters has one more kernel parameter than it has arguments: its
/// last one, of `bytes` bytes, which `compute` writes each time the arguments reach CUDA (the
/// graph's node is added, the node is updated in an executable, the node is launched eagerly or in
/// debug mode), from the arguments as CUDA will receive them (symbols resolved). The derived bytes
/// are never stored: two nodes with equal arguments derive equal parameters. `compute` must not
/// throw; a kernel whose derived values may be unusable (a misaligned buffer for TMA, say) carries
/// a flag in them and falls back on another path.
struct DerivedParameters {
  /// Writes `bytes` bytes at `out` (aligned to `align`) from `arguments`: one pointer per argument
  /// slot, in the form cudaKernelNodeParams::kernelParams wants.
  void (*compute)(const void* const* arguments, void* out) = nullptr;
  std::uint32_t bytes = 0;
  std::uint32_t align = 1;  ///< a power of two, at most max_align

  static constexpr std::uint32_t max_align = 128;
  static constexpr std::uint32_t max_bytes = 4096;
  explicit operator bool() const noexcept { return compute != nullptr; }
  friend bool operator==(const DerivedParameters& a, const DerivedParameters& b) {
    return a.compute == b.compute && a.bytes == b.bytes && a.align == b.align;
  }
  friend bool operator!=(const DerivedParameters& a, const DerivedParameters& b) { return !(a == b); }
};

/// \brief Whether `d`'s size and alignment are within DerivedParameters' limits.
constexpr bool valid_derived(const DerivedParameters& d) noexcept {
  return d.bytes > 0 && d.bytes <= DerivedParameters::max_bytes && d.align > 0 && d.align <= DerivedParameters::max_align &&
         (d.align & (d.align - 1)) == 0;
}

/// \brief Reference to a node, either by index (handles) or by name (resolved by validation).
struct NodeRef {
  NodeId id = no_node;
  std::string name;  ///< used when id == no_node
};

/// \brief Ordering type of an edge. Structure (hashed).
///
/// - `full`: `to` starts after `from` has completed.
/// - `programmatic`: kernel to kernel only (Hopper and later): `to` may be launched while `from`
///   still runs, as soon as every block of `from` has started or signalled (CUDA's programmatic
///   dependent launch, `cudaGraphDependencyTypeProgrammatic`). `to` must wait for `from`'s results
///   itself before reading them (`griddepcontrol.wait`, cudaGridDependencySynchronize()); every
///   built-in kernel does. A kernel that does not wait may read stale memory.
enum class EdgeKind : std::uint8_t { full, programmatic };

/// \brief Tag asking for a programmatic edge: `k2.after(k1, flowdsl::programmatic)`.
struct Programmatic {};
inline constexpr Programmatic programmatic{};

/// \brief One end of an edge as a description keeps it: the node's id, or, for a node named
/// before it was declared (`after("later")`), no_node and the index of that name in
/// Description::edge_names (validation resolves it; edge_name reads it).
struct EdgeEnd {
  NodeId id = no_node;
  std::uint32_t name = 0;  ///< used when id == no_node
};

/// \brief `to` runs after `from` completes. 20 bytes: a graph holds about as many edges as nodes.
struct Edge {
  EdgeEnd from;
  EdgeEnd to;
  EdgeKind kind = EdgeKind::full;
};
static_assert(sizeof(Edge) == 20, "an edge is two ids, two name indexes and its kind");

/// \brief How a node uses a memory range it declares. Kept for the hazard check; not hashed.
enum class AccessMode : std::uint8_t { read, write, read_write };

/// \brief A memory range a node declares it reads or writes.
struct Access {
  const void* ptr = nullptr;
  std::size_t bytes = 0;  ///< 0: extent unknown (the pointer alone is declared)
  AccessMode mode = AccessMode::read;
};

}  // namespace flowdsl
