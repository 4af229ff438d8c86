// SPDX-License-Identifier: Apache-2.0
// CompactJson: cells in document order; an object's members are their values' subtrees, each
// value's cell pointing at its key among the strings; a container's cell holds the index past
// its subtree, so lookups and iteration never recurse.
#include "flowdsl/compact_json.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>

namespace flowdsl {
CompactJson::CompactJson(const CompactJson& other)
    : cell_count_(other.cell_count_), string_bytes_(other.string_bytes_) {
  if (!other.data_) return;
  data_.reset(new Cell[other.allocated_cells()]);
  std::memcpy(data_.get(), other.data_.get(), other.allocated_cells() * cell_bytes);
}

CompactJson& CompactJson::operator=(const CompactJson& other) {
  if (this != &other) *this = CompactJson(other);
  return *this;
}

CompactJson::Ref CompactJson::root() const { return Ref(this, 0); }

CompactJson CompactJson::object() {
  // One cell, as a Builder writes {} (every node's fields start as this), and the zero byte
  // after the (empty) strings.
  CompactJson out;
  out.data_.reset(new Cell[2]{Cell{1, 1, static_cast<std::uint32_t>(Type::object) << type_shift}, Cell{0, 0, 0}});
  out.cell_count_ = 1;
  return out;
}

bool operator==(const CompactJson& a, const CompactJson& b) { return a.root() == b.root(); }

// --- Ref ---------------------------------------------------------------------------------------

CompactJson::Ref CompactJson::Ref::operator[](std::size_t i) const noexcept {
  auto it = elements().begin();
  for (std::size_t k = 0; k < i; ++k) ++it;
  return *it;
}

std::int64_t CompactJson::Ref::get_integer() const noexcept {
  if (type() == Type::number) return static_cast<std::int64_t>(get_number());
  std::int64_t v;
  std::memcpy(&v, &cell().payload, sizeof v);
  return v;
}

double CompactJson::Ref::get_number() const noexcept {
  switch (type()) {
    case Type::integer: return static_cast<double>(get_integer());
    case Type::unsigned_integer: return static_cast<double>(cell().payload);
    case Type::number: {
      double d;
      std::memcpy(&d, &cell().payload, sizeof d);
      return d;
    }
    default: return 0;
  }
}

nlohmann::json CompactJson::Ref::to_json() const {
  switch (type()) {
    case Type::null: return nullptr;
    case Type::boolean: return get_bool();
    case Type::integer: return get_integer();
    case Type::unsigned_integer: return get_unsigned();
    case Type::number: return get_number();
    case Type::string: return std::string(get_string());
    case Type::array: {
      nlohmann::json out = nlohmann::json::array();
      for (const Ref e : elements()) out.push_back(e.to_json());
      return out;
    }
    case Type::object: {
      nlohmann::json out = nlohmann::json::object();
      for (const Member m : members()) out[std::string(m.key)] = m.value.to_json();
      return out;
    }
  }
  return nullptr;
}

bool operator==(const CompactJson::Ref& a, const CompactJson::Ref& b) noexcept {
  using Type = CompactJson::Type;
  if (a.type() != b.type()) {
    // As nlohmann compares numbers: by value across kinds.
    if (a.is_number() && b.is_number()) {
      if (a.is_number_integer() && b.is_number_integer()) {
        const bool a_negative = a.type() == Type::integer && a.get_integer() < 0;
        const bool b_negative = b.type() == Type::integer && b.get_integer() < 0;
        return a_negative == b_negative && a.get_unsigned() == b.get_unsigned();
      }
      return a.get_number() == b.get_number();
    }
    return false;
  }
  switch (a.type()) {
    case Type::null: return true;
    case Type::boolean: return a.get_bool() == b.get_bool();
    case Type::integer:
    case Type::unsigned_integer: return a.get_unsigned() == b.get_unsigned();
    case Type::number: return a.get_number() == b.get_number();
    case Type::string: return a.get_string() == b.get_string();
    case Type::array: {
      if (a.size() != b.size()) return false;
      auto i = a.elements().begin();
      for (const CompactJson::Ref e : b.elements()) {
        if (!(*i == e)) return false;
        ++i;
      }
      return true;
    }
    case Type::object: {
      // Members in any order, as objects compare.
      if (a.size() != b.size()) return false;
      for (const CompactJson::Member m : a.members()) {
        const std::optional<CompactJson::Ref> other = b.find(m.key);
        if (!other || !(m.value == *other)) return false;
      }
      return true;
    }
  }
  return false;
}

// --- conversion --------------------------------------------------------------------------------

namespace {

void build(const nlohmann::json& v, CompactJson::Builder& b) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded: b.null(); break;
    case nlohmann::json::value_t::boolean: b.boolean(v.get<bool>()); break;
    case nlohmann::json::value_t::number_integer: b.integer(v.get<std::int64_t>()); break;
    case nlohmann::json::value_t::number_unsigned: b.unsigned_integer(v.get<std::uint64_t>()); break;
    case nlohmann::json::value_t::number_float: b.number(v.get<double>()); break;
    case nlohmann::json::value_t::string: b.string(v.get_ref<const std::string&>()); break;
    case nlohmann::json::value_t::binary: b.null(); break;  // never in JSON text
    case nlohmann::json::value_t::array:
      b.start_array();
      for (const nlohmann::json& e : v) build(e, b);
      b.end_array();
      break;
    case nlohmann::json::value_t::object:
      b.start_object();
      for (auto it = v.begin(); it != v.end(); ++it) {
        b.key(it.key());
        build(it.value(), b);
      }
      b.end_object();
      break;
  }
}

}  // namespace

CompactJson CompactJson::from_json(const nlohmann::json& value) {
  Builder b;
  build(value, b);
  return b.finish();
}

nlohmann::json CompactJson::to_json() const { return root().to_json(); }

// --- Builder -----------------------------------------------------------------------------------

void CompactJson::Builder::add(Type type, std::uint64_t payload, std::uint32_t size) {
  if (cells_.size() >= size_mask) throw std::length_error("flowdsl: a value of more than 2^28 cells");
  const auto index = static_cast<std::uint32_t>(cells_.size());
  Cell c{payload, index + 1, (static_cast<std::uint32_t>(type) << type_shift) | size};
  if (!open_.empty()) {
    Cell& container = cells_[open_.back()];
    if ((container.info >> type_shift) == static_cast<std::uint32_t>(Type::object)) {
      // A member: its cell says where its key is (the Cell's comment).
      if (!keyed_) throw std::logic_error("flowdsl: CompactJson::Builder: a value in an object without a key");
      keyed_ = false;
      c.next = key_offset_;
      if (type == Type::array || type == Type::object) {
        c.payload = std::uint64_t{key_size_} << 32;
      } else if (type != Type::string) {
        c.info = (static_cast<std::uint32_t>(type) << type_shift) | key_size_;
      }
    }
    ++container.info;  // one more member or element
  }
  cells_.push_back(c);
}

void CompactJson::Builder::null() { add(Type::null, 0); }
void CompactJson::Builder::boolean(bool value) { add(Type::boolean, value ? 1 : 0); }

void CompactJson::Builder::integer(std::int64_t value) {
  if (value >= 0) {
    unsigned_integer(static_cast<std::uint64_t>(value));
    return;
  }
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  add(Type::integer, bits);
}

void CompactJson::Builder::unsigned_integer(std::uint64_t value) { add(Type::unsigned_integer, value); }

void CompactJson::Builder::number(double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  add(Type::number, bits);
}

void CompactJson::Builder::string(std::string_view value) {
  if (value.size() > size_mask) throw std::length_error("flowdsl: a string of more than 2^28 bytes");
  // Right after its key, if it has one (the key's size is the distance between them).
  const std::uint64_t offset = strings_.size();
  strings_.append(value);
  add(Type::string, offset, static_cast<std::uint32_t>(value.size()));
}

void CompactJson::Builder::key(std::string_view key) {
  if (open_.empty() || (cells_[open_.back()].info >> type_shift) != static_cast<std::uint32_t>(Type::object)) {
    throw std::logic_error("flowdsl: CompactJson::Builder::key outside an object");
  }
  if (keyed_) throw std::logic_error("flowdsl: CompactJson::Builder::key after a key");
  if (key.size() > size_mask) throw std::length_error("flowdsl: a key of more than 2^28 bytes");
  // Offsets of keys are 32 bits (a value's own strings may go past 4 GiB).
  if (strings_.size() > std::numeric_limits<std::uint32_t>::max() - key.size()) {
    throw std::length_error("flowdsl: a key past 4 GiB of strings");
  }
  key_offset_ = static_cast<std::uint32_t>(strings_.size());
  key_size_ = static_cast<std::uint32_t>(key.size());
  keyed_ = true;
  strings_.append(key);
}

void CompactJson::Builder::start_object() {
  add(Type::object, 0);
  open_.push_back(static_cast<std::uint32_t>(cells_.size() - 1));
}

void CompactJson::Builder::start_array() {
  add(Type::array, 0);
  open_.push_back(static_cast<std::uint32_t>(cells_.size() - 1));
}

void CompactJson::Builder::close(Type type) {
  if (open_.empty() || (cells_[open_.back()].info >> type_shift) != static_cast<std::uint32_t>(type)) {
    throw std::logic_error("flowdsl: CompactJson::Builder: an end that closes nothing open");
  }
  if (keyed_) throw std::logic_error("flowdsl: CompactJson::Builder: an object's end after a key with no value");
  Cell& c = cells_[open_.back()];
  c.payload = (c.payload & ~std::uint64_t{0xFFFFFFFF}) | static_cast<std::uint32_t>(cells_.size());
  open_.pop_back();
}

void CompactJson::Builder::end_object() { close(Type::object); }
void CompactJson::Builder::end_array() { close(Type::array); }

void CompactJson::Builder::value(Ref v) {
  switch (v.type()) {
    case Type::null: null(); return;
    case Type::boolean: boolean(v.get_bool()); return;
    case Type::integer: integer(v.get_integer()); return;
    case Type::unsigned_integer: unsigned_integer(v.get_unsigned()); return;
    case Type::number: number(v.get_number()); return;
    case Type::string: string(v.get_string()); return;
    case Type::array:
      start_array();
      for (const Ref e : v.elements()) value(e);
      end_array();
      return;
    case Type::object:
      start_object();
      for (const Member m : v.members()) {
        key(m.key);
        value(m.value);
      }
      end_object();
      return;
  }
}

CompactJson::Builder::Mark CompactJson::Builder::mark() const noexcept {
  return Mark{static_cast<std::uint32_t>(cells_.size()), static_cast<std::uint32_t>(strings_.size()),
              static_cast<std::uint32_t>(open_.size()), open_.empty() ? 0 : open_.back(),
              open_.empty() ? 0 : cells_[open_.back()].info, key_offset_, key_size_, keyed_};
}

void CompactJson::Builder::rewind(const Mark& at) {
  if (open_.size() < at.open || cells_.size() < at.cells || (at.open > 0 && open_[at.open - 1] != at.container)) {
    throw std::logic_error("flowdsl: CompactJson::Builder::rewind past a container closed after the mark");
  }
  open_.resize(at.open);
  cells_.resize(at.cells);
  strings_.resize(at.strings);
  if (!open_.empty()) cells_[open_.back()].info = at.container_info;  // its count as it was
  key_offset_ = at.key_offset;
  key_size_ = at.key_size;
  keyed_ = at.keyed;
}

CompactJson CompactJson::Builder::finish() {
  if (!complete()) throw std::logic_error("flowdsl: CompactJson::Builder::finish before a whole value");
  CompactJson out;
  out.cell_count_ = static_cast<std::uint32_t>(cells_.size());
  out.string_bytes_ = static_cast<std::uint32_t>(strings_.size());
  out.data_.reset(new Cell[out.allocated_cells()]());  // zeroed: the strings' last cell, and the byte after them
  std::memcpy(out.data_.get(), cells_.data(), cells_.size() * cell_bytes);
  if (!strings_.empty()) std::memcpy(out.data_.get() + cells_.size(), strings_.data(), strings_.size());
  clear();
  return out;
}

void CompactJson::Builder::clear() noexcept {
  cells_.clear();
  strings_.clear();
  open_.clear();
  keyed_ = false;
}

}  // namespace flowdsl
