// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file compact_json.hpp
/// \brief An immutable JSON value stored compactly: its values in one array of 16-byte cells and
/// its strings in one buffer, together in a single allocation.
///
/// Graph files hold a million nodes; a DOM of `nlohmann::json` spends an allocation and a tree
/// node on every member of every node (about 1 KiB for a kernel node), this spends 16 bytes a
/// value and the bytes of its strings. Values are built in document order by a Builder (from a
/// parser's events) and read through Ref, whose queries follow nlohmann's const API.
///
/// \code
///   flowdsl::CompactJson::Builder b;
///   b.start_object();
///   b.key("kernel"); b.string("scale.f32");
///   b.key("grid");   b.unsigned_integer(4);
///   b.end_object();
///   const flowdsl::CompactJson fields = b.finish();
///   fields.root().find("kernel")->get_string();   // "scale.f32"
/// \endcode

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace flowdsl {

class CompactJson {
  /// One value: its type (top 4 bits of `info`) and size (below: a string's bytes, an object's
  /// members, an array's elements). A scalar's `payload` is its bits (a string's: its offset in
  /// the strings); a container's holds, in its low 32 bits, the index of the cell after its
  /// subtree.
  ///
  /// A member of an object has no cell of its own for its key: the value's `next` is the key's
  /// offset among the strings, and its size is where the value's type leaves room (a
  /// container's payload, high 32 bits; a scalar's size; a string, stored right after its key,
  /// gives it as the distance between the two offsets). Elsewhere `next` is the next cell.
  struct Cell {
    std::uint64_t payload;
    std::uint32_t next;
    std::uint32_t info;
  };
  static_assert(sizeof(Cell) == 16, "a cell is 16 bytes");

 public:
  /// \brief What a value is. Numbers keep the kind the text gave them, as nlohmann's do: a
  /// negative integer, a non-negative one, or one with a fraction or exponent.
  enum class Type : std::uint8_t { null, boolean, integer, unsigned_integer, number, string, array, object };

  class Ref;
  class Builder;

  /// \brief A member of an object: its key and its value.
  struct Member;

  /// \brief The null value.
  CompactJson() = default;
  /// \brief An empty object ({}).
  static CompactJson object();
  CompactJson(const CompactJson& other);
  CompactJson(CompactJson&& other) noexcept = default;
  CompactJson& operator=(const CompactJson& other);
  CompactJson& operator=(CompactJson&& other) noexcept = default;
  ~CompactJson() = default;

  /// \brief The value itself.
  Ref root() const;

  /// \brief The same value, converted (numbers keep their kinds; member order is kept).
  static CompactJson from_json(const nlohmann::json& value);
  /// \brief The value as a nlohmann DOM (members in nlohmann's order).
  nlohmann::json to_json() const;

  /// \brief Bytes this value holds beyond the object itself.
  std::size_t heap_bytes() const noexcept { return data_ ? allocated_cells() * cell_bytes : 0; }

  friend bool operator==(const CompactJson& a, const CompactJson& b);
  friend bool operator!=(const CompactJson& a, const CompactJson& b) { return !(a == b); }

 private:
  static constexpr std::size_t cell_bytes = 16;
  static constexpr std::uint32_t type_shift = 28;  ///< a cell's info: type above, size below
  static constexpr std::uint32_t size_mask = (std::uint32_t{1} << type_shift) - 1;

  static bool structured(const Cell& c) noexcept {
    return (c.info >> type_shift) >= static_cast<std::uint32_t>(Type::array);
  }
  /// The cell after the subtree of the value at `k`.
  static std::uint32_t skip(const Cell* cells, std::uint32_t k) noexcept {
    return structured(cells[k]) ? static_cast<std::uint32_t>(cells[k].payload) : k + 1;
  }
  /// The size of the key of the member whose value is `c` (its offset is c.next).
  static std::size_t key_size(const Cell& c) noexcept {
    if (structured(c)) return static_cast<std::size_t>(c.payload >> 32);
    if ((c.info >> type_shift) == static_cast<std::uint32_t>(Type::string)) return static_cast<std::size_t>(c.payload - c.next);
    return c.info & size_mask;
  }
  static std::string_view key_of(const Cell& c, const char* strings) noexcept {
    return std::string_view(strings + c.next, key_size(c));
  }

  const Cell* cells() const noexcept { return data_.get(); }
  const char* strings() const noexcept { return reinterpret_cast<const char*>(data_.get() + cell_count_); }
  /// The strings and at least one zero byte after them.
  std::size_t allocated_cells() const noexcept { return cell_count_ + (string_bytes_ + cell_bytes) / cell_bytes; }

  /// The cells, then the strings in the cells after them, then a zero byte at least; null: the
  /// null value.
  std::unique_ptr<Cell[]> data_;
  std::uint32_t cell_count_ = 0;
  std::uint32_t string_bytes_ = 0;
};

/// \brief A value inside a CompactJson (valid while it lives, like a reference).
class CompactJson::Ref {
 public:
  Type type() const noexcept;
  bool is_null() const noexcept { return type() == Type::null; }
  bool is_boolean() const noexcept { return type() == Type::boolean; }
  bool is_string() const noexcept { return type() == Type::string; }
  bool is_array() const noexcept { return type() == Type::array; }
  bool is_object() const noexcept { return type() == Type::object; }
  bool is_structured() const noexcept { return is_array() || is_object(); }
  bool is_number() const noexcept { return is_number_integer() || type() == Type::number; }
  /// \brief An integer (signed or not), as nlohmann's is_number_integer.
  bool is_number_integer() const noexcept { return type() == Type::integer || type() == Type::unsigned_integer; }
  bool is_number_unsigned() const noexcept { return type() == Type::unsigned_integer; }
  bool is_number_float() const noexcept { return type() == Type::number; }

  /// \brief Members of an object or elements of an array; 0 for anything else.
  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }

  /// \brief The member `key` of an object (the last, where text repeats a key: the one a DOM
  /// keeps), or nothing (also when this is not an object).
  std::optional<Ref> find(std::string_view key) const noexcept;
  bool contains(std::string_view key) const noexcept { return find(key).has_value(); }
  /// \brief Element `i` of an array (i < size()).
  Ref operator[](std::size_t i) const noexcept;

  /// \brief The cells of an object's members (Item: Member) or of an array's elements (Item: Ref),
  /// walked in order by skipping each subtree.
  template <class Item>
  class Range;
  using Members = Range<Member>;
  using Elements = Range<Ref>;
  /// \brief The members of an object in the order they were written (`for (auto m : ref.members())`).
  Members members() const noexcept;
  /// \brief The elements of an array.
  Elements elements() const noexcept;

  /// \brief The scalar, as the type says (precondition: that type).
  bool get_bool() const noexcept;
  std::int64_t get_integer() const noexcept;    ///< integer or unsigned_integer (as nlohmann's get<int64_t>)
  std::uint64_t get_unsigned() const noexcept;  ///< integer or unsigned_integer (as nlohmann's get<uint64_t>)
  double get_number() const noexcept;           ///< any number
  std::string_view get_string() const noexcept;

  /// \brief This value as a nlohmann DOM.
  nlohmann::json to_json() const;

  friend bool operator==(const Ref& a, const Ref& b) noexcept;

 private:
  friend class CompactJson;
  Ref(const CompactJson* owner, std::uint32_t cell) noexcept : owner_(owner), cell_(cell) {}
  const Cell& cell() const noexcept;

  const CompactJson* owner_;
  std::uint32_t cell_;
};

struct CompactJson::Member {
  std::string_view key;
  Ref value;
};

template <class Item>
class CompactJson::Ref::Range {
 public:
  class iterator {
   public:
    Item operator*() const noexcept;
    iterator& operator++() noexcept;
    bool operator!=(const iterator& other) const noexcept { return cell_ != other.cell_; }
    bool operator==(const iterator& other) const noexcept { return cell_ == other.cell_; }

   private:
    friend class Range;
    iterator(const CompactJson* owner, std::uint32_t cell) noexcept : owner_(owner), cell_(cell) {}
    const CompactJson* owner_;
    std::uint32_t cell_;  ///< the element's cell, or the member's value cell
  };
  iterator begin() const noexcept { return {owner_, first_}; }
  iterator end() const noexcept { return {owner_, last_}; }

 private:
  friend class Ref;
  Range(const CompactJson* owner, std::uint32_t first, std::uint32_t last) noexcept
      : owner_(owner), first_(first), last_(last) {}
  const CompactJson* owner_;
  std::uint32_t first_, last_;
};

// The queries loaders run for every member of every node, inline.

inline const CompactJson::Cell& CompactJson::Ref::cell() const noexcept { return owner_->cells()[cell_]; }

inline CompactJson::Type CompactJson::Ref::type() const noexcept {
  if (!owner_->data_) return Type::null;
  return static_cast<Type>(cell().info >> type_shift);
}

inline std::size_t CompactJson::Ref::size() const noexcept {
  return is_structured() ? cell().info & size_mask : 0;
}

inline std::string_view CompactJson::Ref::get_string() const noexcept {
  if (!is_string()) return {};
  const Cell& c = cell();
  return std::string_view(owner_->strings() + c.payload, c.info & size_mask);
}

inline std::optional<CompactJson::Ref> CompactJson::Ref::find(std::string_view key) const noexcept {
  if (!is_object()) return std::nullopt;
  const Cell* cells = owner_->cells();
  const char* strings = owner_->strings();
  const auto end = static_cast<std::uint32_t>(cells[cell_].payload);
  std::uint32_t found = 0;  // a member's cell is never 0 (its object's comes first)
  if (key.empty()) {
    for (std::uint32_t k = cell_ + 1; k != end; k = skip(cells, k)) {
      if (key_size(cells[k]) == 0) found = k;
    }
    return found != 0 ? std::optional<Ref>(Ref(owner_, found)) : std::nullopt;
  }
  const char first = key[0];
  const char* rest = key.data() + 1;
  const std::size_t rest_size = key.size() - 1;
  for (std::uint32_t k = cell_ + 1; k != end; k = skip(cells, k)) {
    const Cell& c = cells[k];
    // The first byte (readable even for an empty key: a zero byte follows the strings), then
    // the size, then the other bytes: a node's keys are short and most differ in their first.
    const char* s = strings + c.next;
    if (*s != first || key_size(c) != key.size()) continue;
    std::size_t i = 0;
    while (i < rest_size && s[1 + i] == rest[i]) ++i;
    if (i == rest_size) found = k;  // the last of a repeated key, as a DOM keeps
  }
  return found != 0 ? std::optional<Ref>(Ref(owner_, found)) : std::nullopt;
}

inline CompactJson::Ref::Members CompactJson::Ref::members() const noexcept {
  if (!is_object()) return Members(owner_, 0, 0);
  return Members(owner_, cell_ + 1, static_cast<std::uint32_t>(cell().payload));
}

inline CompactJson::Ref::Elements CompactJson::Ref::elements() const noexcept {
  if (!is_array()) return Elements(owner_, 0, 0);
  return Elements(owner_, cell_ + 1, static_cast<std::uint32_t>(cell().payload));
}

template <>
inline CompactJson::Member CompactJson::Ref::Members::iterator::operator*() const noexcept {
  return Member{key_of(owner_->cells()[cell_], owner_->strings()), Ref(owner_, cell_)};
}

template <>
inline CompactJson::Ref::Members::iterator& CompactJson::Ref::Members::iterator::operator++() noexcept {
  cell_ = skip(owner_->cells(), cell_);
  return *this;
}

template <>
inline CompactJson::Ref CompactJson::Ref::Elements::iterator::operator*() const noexcept {
  return Ref(owner_, cell_);
}

template <>
inline CompactJson::Ref::Elements::iterator& CompactJson::Ref::Elements::iterator::operator++() noexcept {
  cell_ = skip(owner_->cells(), cell_);
  return *this;
}

inline bool CompactJson::Ref::get_bool() const noexcept { return cell().payload != 0; }

inline std::uint64_t CompactJson::Ref::get_unsigned() const noexcept {
  if (type() == Type::number) return static_cast<std::uint64_t>(get_number());
  return cell().payload;
}

/// \brief Builds one value from events in document order (a SAX parser's): scalars, keys (in
/// objects, before each value) and the starts and ends of arrays and objects. Reusable: finish()
/// returns the value and leaves the builder empty, keeping its buffers for the next.
class CompactJson::Builder {
 public:
  void null();
  void boolean(bool value);
  void integer(std::int64_t value);  ///< any integer; a non-negative one is stored as unsigned
  void unsigned_integer(std::uint64_t value);
  void number(double value);
  void string(std::string_view value);
  void key(std::string_view key);
  void start_object();
  void end_object();
  void start_array();
  void end_array();

  /// \brief A copy of `value` (of any CompactJson), as if its events were given one by one.
  void value(Ref value);

  /// \brief Where the builder stands. rewind() drops every event given after it, as if none had
  /// been (the container open at the mark counts its members or elements as it did then).
  struct Mark {
    std::uint32_t cells;
    std::uint32_t strings;
    std::uint32_t open;
    std::uint32_t container;       ///< the innermost open container's cell
    std::uint32_t container_info;  ///< its type and count
    std::uint32_t key_offset, key_size;  ///< the key given for the next value, if `keyed`
    bool keyed;
  };
  Mark mark() const noexcept;
  /// \throws std::logic_error when a container open at the mark has been closed since
  void rewind(const Mark& at);

  /// \brief Whether a whole value has been given (every array and object closed).
  bool complete() const noexcept { return !cells_.empty() && open_.empty(); }
  /// \brief Containers open, innermost last (0: none).
  std::size_t depth() const noexcept { return open_.size(); }

  /// \brief The value built (precondition: complete()).
  /// \throws std::logic_error when it is not complete
  CompactJson finish();
  /// \brief Drops what was given so far.
  void clear() noexcept;

 private:
  void add(Type type, std::uint64_t payload, std::uint32_t size = 0);
  void close(Type type);

  std::vector<CompactJson::Cell> cells_;
  std::string strings_;
  std::vector<std::uint32_t> open_;  ///< cells of the open containers
  /// The key given for the next value (key() then a value event, inside an object).
  std::uint32_t key_offset_ = 0, key_size_ = 0;
  bool keyed_ = false;
};

}  // namespace flowdsl
