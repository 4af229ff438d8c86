// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file chunked_list.hpp
/// \brief ChunkedList: the sequence a description keeps its nodes and edges in. Elements live in
/// chunks that never move, so declaring the n-th node costs the same at any n (no
/// relocation of the nodes before it), and a reference to an element stays valid until the
/// element is removed. Chunks released by one list are kept, up to a bound, for the next one
/// (detail::acquire_chunk): a server that declares a graph per request reuses memory it has
/// already touched rather than asking the system for new pages each time.

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowdsl {
namespace detail {

/// Memory for one chunk of `bytes` bytes (aligned for any type new aligns for): a recycled one
/// of that size when one is kept, else a new allocation. \throws std::bad_alloc
void* acquire_chunk(std::size_t bytes);
/// Gives a chunk back: kept for reuse while the chunks kept by the process stay within
/// chunk_cache_bytes, freed otherwise.
void release_chunk(void* chunk, std::size_t bytes) noexcept;
/// The bound on the memory kept for reuse by the whole process.
inline constexpr std::size_t chunk_cache_bytes = std::size_t{64} << 20;
/// Frees every chunk kept for reuse.
void trim_chunk_cache() noexcept;

}  // namespace detail

namespace detail {
/// floor(log2(x)) for x > 0.
inline unsigned log2_floor(std::uint64_t x) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return 63u - static_cast<unsigned>(__builtin_clzll(x));
#else
  unsigned n = 0;
  while (x >>= 1) ++n;
  return n;
#endif
}
}  // namespace detail

/// \brief A sequence whose elements never move: a vector's interface as far as descriptions use
/// it (no insertion or erasure in the middle, no contiguous data()).
///
/// Chunk 0 and chunk 1 hold 32 elements each, and each later chunk twice as many as the one
/// before (chunk k >= 1 holds elements [32 * 2^(k-1), 32 * 2^k)): a small graph takes little
/// memory, a large one few chunks, and finding element i costs a bit scan.
template <class T>
class ChunkedList {
  static constexpr unsigned first_shift = 5;
  static constexpr std::size_t first_size = std::size_t{1} << first_shift;
  static constexpr unsigned max_chunks = 34;  // 2^38 elements: more than a NodeId counts
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "chunks are aligned as operator new aligns");

  static constexpr std::size_t chunk_elements(unsigned k) noexcept {
    return k == 0 ? first_size : first_size << (k - 1);
  }
  static constexpr std::size_t chunk_bytes(unsigned k) noexcept { return chunk_elements(k) * sizeof(T); }
  /// Elements held by chunks 0 .. count - 1.
  static constexpr std::size_t capacity_of(unsigned count) noexcept {
    return count == 0 ? 0 : first_size << (count - 1);
  }

  // Walks its chunk by pointer and finds the next chunk only at its end: a loop over the list
  // costs little more than over an array.
  template <bool Const>
  class Iterator {
    using List = std::conditional_t<Const, const ChunkedList, ChunkedList>;

   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<Const, const T*, T*>;
    using reference = std::conditional_t<Const, const T&, T&>;

    Iterator() = default;
    Iterator(List* list, std::size_t index) : list_(list), index_(index) { settle(); }
    template <bool C = Const, class = std::enable_if_t<C>>
    Iterator(const Iterator<false>& other) : list_(other.list_), index_(other.index_), at_(other.at_), end_(other.end_) {}

    reference operator*() const { return *at_; }
    pointer operator->() const { return at_; }
    reference operator[](difference_type n) const { return (*list_)[index_ + n]; }
    Iterator& operator++() {
      ++index_;
      if (++at_ == end_) settle();
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    Iterator& operator--() { return *this -= 1; }
    Iterator operator--(int) {
      Iterator old = *this;
      --*this;
      return old;
    }
    Iterator& operator+=(difference_type n) {
      index_ += n;
      settle();
      return *this;
    }
    Iterator& operator-=(difference_type n) { return *this += -n; }
    friend Iterator operator+(Iterator it, difference_type n) { return it += n; }
    friend Iterator operator+(difference_type n, Iterator it) { return it += n; }
    friend Iterator operator-(Iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const Iterator& a, const Iterator& b) {
      return static_cast<difference_type>(a.index_) - static_cast<difference_type>(b.index_);
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.index_ == b.index_; }
    friend bool operator!=(const Iterator& a, const Iterator& b) { return a.index_ != b.index_; }
    friend bool operator<(const Iterator& a, const Iterator& b) { return a.index_ < b.index_; }
    friend bool operator>(const Iterator& a, const Iterator& b) { return a.index_ > b.index_; }
    friend bool operator<=(const Iterator& a, const Iterator& b) { return a.index_ <= b.index_; }
    friend bool operator>=(const Iterator& a, const Iterator& b) { return a.index_ >= b.index_; }

   private:
    friend class Iterator<true>;
    // Points at element index_ and the end of its chunk; nothing at or past the list's end.
    void settle() {
      if (list_ == nullptr || index_ >= list_->size_) {
        at_ = end_ = nullptr;
        return;
      }
      at_ = list_->locate(index_);
      end_ = at_ + (chunk_end(index_) - index_);
    }

    List* list_ = nullptr;
    std::size_t index_ = 0;
    pointer at_ = nullptr;
    pointer end_ = nullptr;  ///< one past the last element of at_'s chunk
  };

  /// The index one past the last element of the chunk holding element i.
  static std::size_t chunk_end(std::size_t i) noexcept {
    return i < first_size ? first_size : std::size_t{2} << detail::log2_floor(i);
  }

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using iterator = Iterator<false>;
  using const_iterator = Iterator<true>;

  ChunkedList() = default;
  ChunkedList(const ChunkedList& other) {
    reserve(other.size_);
    for (const T& value : other) push_back(value);
  }
  ChunkedList(ChunkedList&& other) noexcept { take(other); }
  ChunkedList& operator=(const ChunkedList& other) {
    if (this != &other) {
      ChunkedList copy(other);
      swap(copy);
    }
    return *this;
  }
  ChunkedList& operator=(ChunkedList&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~ChunkedList() { release(); }

  void swap(ChunkedList& other) noexcept {
    for (unsigned k = 0; k < max_chunks; ++k) std::swap(chunks_[k], other.chunks_[k]);
    std::swap(count_, other.count_);
    std::swap(size_, other.size_);
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  /// Elements that fit before another chunk is needed.
  std::size_t capacity() const noexcept { return capacity_of(count_); }

  T& operator[](std::size_t i) noexcept { return *locate(i); }
  const T& operator[](std::size_t i) const noexcept { return *locate(i); }
  T& at(std::size_t i) {
    if (i >= size_) throw std::out_of_range("flowdsl::ChunkedList::at");
    return (*this)[i];
  }
  const T& at(std::size_t i) const {
    if (i >= size_) throw std::out_of_range("flowdsl::ChunkedList::at");
    return (*this)[i];
  }
  T& front() noexcept { return (*this)[0]; }
  const T& front() const noexcept { return (*this)[0]; }
  T& back() noexcept { return (*this)[size_ - 1]; }
  const T& back() const noexcept { return (*this)[size_ - 1]; }

  iterator begin() noexcept { return {this, 0}; }
  iterator end() noexcept { return {this, size_}; }
  const_iterator begin() const noexcept { return {this, 0}; }
  const_iterator end() const noexcept { return {this, size_}; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }

  /// Makes an element at the end from `args` and returns it. The others stay where they are.
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity()) add_chunk();
    T* at = locate(size_);
    ::new (static_cast<void*>(at)) T(std::forward<Args>(args)...);
    ++size_;
    return *at;
  }
  /// Makes an element at the end by default-initialization (`new T`, not `new T()`): for a type
  /// whose members all have initializers or constructors, the same element without first filling
  /// it with zeros.
  T& emplace_back_default() {
    if (size_ == capacity()) add_chunk();
    T* at = locate(size_);
    ::new (static_cast<void*>(at)) T;
    ++size_;
    return *at;
  }
  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  void pop_back() noexcept {
    --size_;
    (*this)[size_].~T();
  }
  /// Makes room for `count` elements in all: later ones are made without an allocation.
  void reserve(std::size_t count) {
    while (capacity() < count) add_chunk();
  }
  /// Removes every element; the chunks stay for new ones.
  void clear() noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      // Chunk by chunk, in order: a graph dropped per request pays no lookup per element.
      std::size_t left = size_;
      for (unsigned k = 0; left > 0; ++k) {
        const std::size_t count = left < chunk_elements(k) ? left : chunk_elements(k);
        for (T* at = chunks_[k]; at != chunks_[k] + count; ++at) at->~T();
        left -= count;
      }
    }
    size_ = 0;
  }

 private:
  // Where element i lives: chunk log2(i / 32) + 1 (chunk 0 below 32), at i less the chunk's start.
  T* locate(std::size_t i) const noexcept {
    if (i < first_size) return chunks_[0] + i;
    const unsigned top = detail::log2_floor(i);
    return chunks_[top - first_shift + 1] + (i - (std::size_t{1} << top));
  }
  void add_chunk() {
    if (count_ == max_chunks) throw std::length_error("flowdsl::ChunkedList: too many elements");
    chunks_[count_] = static_cast<T*>(detail::acquire_chunk(chunk_bytes(count_)));
    ++count_;
  }
  void take(ChunkedList& other) noexcept {  // this holds nothing
    for (unsigned k = 0; k < other.count_; ++k) {
      chunks_[k] = other.chunks_[k];
      other.chunks_[k] = nullptr;
    }
    count_ = other.count_;
    size_ = other.size_;
    other.count_ = 0;
    other.size_ = 0;
  }
  void release() noexcept {
    clear();
    // Largest first: those are the ones worth keeping for the next list (see acquire_chunk).
    while (count_ > 0) {
      --count_;
      detail::release_chunk(chunks_[count_], chunk_bytes(count_));
      chunks_[count_] = nullptr;
    }
  }

  T* chunks_[max_chunks] = {};
  unsigned count_ = 0;  ///< chunks allocated
  std::size_t size_ = 0;
};

}  // namespace flowdsl
