// SPDX-License-Identifier: Apache-2.0
// Safetensors files: the header's length checked against the file's before it is allocated, the
// header read in one pass (a SAX handler that keeps only what it checks), then every tensor's
// range checked against the data section and against the others.
#include "flowdsl/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "json_support.hpp"

namespace flowdsl {

using json_detail::token;
using nlohmann::json;

namespace {

constexpr std::uint64_t length_bytes = 8;  // the little-endian header length opening the file

struct Dtype {
  std::string_view name;
  ScalarType type;
};

// The dtypes of safetensors that flowdsl has an element type for.
constexpr std::array<Dtype, 13> dtypes{{{"BOOL", ScalarType::u8},
                                        {"U8", ScalarType::u8},
                                        {"I8", ScalarType::i8},
                                        {"U16", ScalarType::u16},
                                        {"I16", ScalarType::i16},
                                        {"F16", ScalarType::f16},
                                        {"BF16", ScalarType::bf16},
                                        {"U32", ScalarType::u32},
                                        {"I32", ScalarType::i32},
                                        {"F32", ScalarType::f32},
                                        {"U64", ScalarType::u64},
                                        {"I64", ScalarType::i64},
                                        {"F64", ScalarType::f64}}};

const Dtype* find_dtype(std::string_view name) {
  const auto it = std::find_if(dtypes.begin(), dtypes.end(), [&](const Dtype& d) { return d.name == name; });
  return it == dtypes.end() ? nullptr : &*it;
}

std::string known_dtypes() {
  std::string out;
  for (const Dtype& d : dtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (const std::uint64_t d : shape) out += (out.size() > 1 ? ", " : "") + std::to_string(d);
  return out + "]";
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// The problems of a header: the first JsonError::max_problems kept, the others counted, so that
// a header of a million bad entries makes a bounded list (JsonError reads the count line).
class Problems {
 public:
  void add(std::string pointer, std::string message) {
    ++count_;
    if (kept_.size() < JsonError::max_problems) kept_.push_back({std::move(pointer), std::move(message)});
  }
  std::size_t count() const noexcept { return count_; }

  [[noreturn]] void raise(const std::string& source) {
    if (count_ > kept_.size()) kept_.push_back({"", "... and " + std::to_string(count_ - kept_.size()) + " more problems"});
    throw JsonError(std::move(kept_), source);
  }

 private:
  std::vector<JsonProblem> kept_;
  std::size_t count_ = 0;
};

// A JSON value as the header reader meets it: enough to check it and to name it in a message.
struct Value {
  enum class Kind : std::uint8_t { null, boolean, unsigned_integer, negative_integer, fraction, string, object, array };
  Kind kind;
  std::uint64_t number = 0;   ///< unsigned_integer
  std::string_view text = {}; ///< string; the number's text for negative_integer and fraction

  bool container() const noexcept { return kind == Kind::object || kind == Kind::array; }

  std::string described() const {
    switch (kind) {
      case Kind::null: return "null";
      case Kind::boolean: return "a boolean";
      case Kind::unsigned_integer: return "an integer";
      case Kind::negative_integer: return "the negative integer " + std::string(text);
      case Kind::fraction: {
        // Also an integer beyond 64 bits, which the parser reads as a double: shown as written.
        constexpr std::size_t shown = 40;
        return "the number " + std::string(text.substr(0, shown)) + (text.size() > shown ? "..." : "");
      }
      case Kind::string: return "a string";
      case Kind::object: return "an object";
      case Kind::array: break;
    }
    return "an array";
  }
};

// A tensor entry of the header as read so far; checked when its object closes.
struct Entry {
  std::string name;
  std::string pointer;  ///< "/" + its name as a JSON pointer token
  std::size_t problems_before = 0;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  const Dtype* dtype = nullptr;  ///< when known
  bool shape_ok = true, offsets_ok = true;  ///< arrays whose elements are all non-negative integers
  std::vector<std::uint64_t> shape, offsets;  ///< their first elements (up to max_dims, and 2)
  std::size_t dims = 0, offset_count = 0;     ///< their elements, counted to the end
};

// Reads the header's JSON through nlohmann's SAX interface: what is not checked (members of an
// entry other than dtype, shape and data_offsets, entries beyond max_tensors, values already
// found wrong) is skipped by counting its nesting, never stored.
class HeaderReader {
 public:
  HeaderReader(const SafetensorsLimits& limits, std::uint64_t data_start, std::uint64_t data_bytes, Problems& problems)
      : limits_(limits), data_start_(data_start), data_bytes_(data_bytes), problems_(problems) {}

  bool null() { return value({Value::Kind::null}); }
  bool boolean(bool /*v*/) { return value({Value::Kind::boolean}); }
  bool number_integer(json::number_integer_t v) {  // only negative ones: the others come unsigned
    const std::string text = std::to_string(v);
    return value({Value::Kind::negative_integer, 0, text});
  }
  bool number_unsigned(json::number_unsigned_t v) { return value({Value::Kind::unsigned_integer, v}); }
  bool number_float(json::number_float_t /*v*/, const json::string_t& text) {
    return value({Value::Kind::fraction, 0, text});
  }
  bool string(json::string_t& v) { return value({Value::Kind::string, 0, v}); }
  bool binary(json::binary_t& /*v*/) { return value({Value::Kind::null}); }  // never in JSON text
  bool key(json::string_t& k) {
    if (skip_ == 0) key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t /*elements*/) { return value({Value::Kind::object}); }
  bool start_array(std::size_t /*elements*/) { return value({Value::Kind::array}); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const Exception& e) {
    malformed_ = malformed_message(e.what());
    return false;
  }

  /// Why the text is not JSON, or "".
  const std::string& malformed() const noexcept { return malformed_; }
  /// The entries that passed every check of their own, and the count of all entries.
  std::vector<SafetensorsTensor>& tensors() noexcept { return tensors_; }
  std::size_t entries() const noexcept { return entries_; }
  std::map<std::string, std::string, std::less<>>& metadata() noexcept { return metadata_; }

 private:
  enum class Where : std::uint8_t { root, metadata, entry, shape, offsets };

  // nlohmann's text "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
  // without its prefix, and with its echo of the text read cut short.
  static std::string malformed_message(std::string what) {
    const std::size_t tag = what.find("] ");
    if (tag != std::string::npos) what.erase(0, tag + 2);
    const std::string_view parse_error = "parse error ";
    const bool placed = what.compare(0, parse_error.size(), parse_error) == 0;
    if (placed) what.erase(0, parse_error.size());
    constexpr std::size_t shown = 300;
    if (what.size() > shown) what = what.substr(0, shown) + "...";
    return (placed ? "malformed JSON " : "malformed JSON: ") + what;
  }

  // A value begins (a scalar, or an object or array opening): checked where it stands.
  bool value(const Value& v) {
    if (skip_ > 0) {
      if (v.container()) ++skip_;
      return true;
    }
    if (where_.empty()) {
      if (v.kind == Value::Kind::object) return enter(Where::root);
      problems_.add("", "expected the header to be an object of tensors, found " + v.described());
      return skip(v);
    }
    switch (where_.back()) {
      case Where::root: return root_member(v);
      case Where::metadata: return metadata_member(v);
      case Where::entry: return entry_member(v);
      case Where::shape: return element(v, entry_.shape, entry_.dims, limits_.max_dims, entry_.shape_ok, "/shape");
      case Where::offsets: break;
    }
    return element(v, entry_.offsets, entry_.offset_count, 2, entry_.offsets_ok, "/data_offsets");
  }

  bool enter(Where where) {
    where_.push_back(where);
    return true;
  }
  bool skip(const Value& v) {
    if (v.container()) skip_ = 1;
    return true;
  }

  bool close() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    const Where closed = where_.back();
    where_.pop_back();
    if (closed == Where::entry) finish_entry();
    return true;
  }

  bool root_member(const Value& v) {
    if (key_ == "__metadata__") {
      if (v.kind == Value::Kind::object) return enter(Where::metadata);
      problems_.add("/__metadata__", "expected an object of strings, found " + v.described());
      return skip(v);
    }
    if (++entries_ > limits_.max_tensors) return skip(v);  // counted, not read
    if (v.kind != Value::Kind::object) {
      problems_.add(token(key_), "expected an object with dtype, shape and data_offsets, found " + v.described());
      return skip(v);
    }
    entry_ = Entry{};
    entry_.pointer = token(key_);
    entry_.name = std::move(key_);
    entry_.problems_before = problems_.count();
    return enter(Where::entry);
  }

  bool metadata_member(const Value& v) {
    if (v.kind == Value::Kind::string) {
      metadata_.insert_or_assign(std::move(key_), std::string(v.text));
      return true;
    }
    problems_.add("/__metadata__" + token(key_), "expected a string, found " + v.described());
    return skip(v);
  }

  bool entry_member(const Value& v) {
    if (key_ == "dtype") return dtype_member(v);
    if (key_ == "shape") {
      return array_member(v, entry_.has_shape, entry_.shape_ok, Where::shape, "an array of dimensions");
    }
    if (key_ == "data_offsets") {
      return array_member(v, entry_.has_offsets, entry_.offsets_ok, Where::offsets, "an array of two offsets [begin, end]");
    }
    return skip(v);  // another member: ignored
  }

  // Whether the member key_ of the entry is met for the first time (else a problem).
  bool first_time(bool& seen) {
    if (!seen) {
      seen = true;
      return true;
    }
    problems_.add(entry_.pointer + token(key_), "the member " + quoted_name(key_) + " appears more than once");
    return false;
  }

  bool dtype_member(const Value& v) {
    if (first_time(entry_.has_dtype)) {
      const std::string at = entry_.pointer + "/dtype";
      if (v.kind != Value::Kind::string) {
        problems_.add(at, "expected a string naming the dtype, found " + v.described());
      } else if ((entry_.dtype = find_dtype(v.text)) == nullptr) {
        problems_.add(at, "unknown dtype " + quoted_name(v.text) + " (known: " + known_dtypes() + ")");
      }
    }
    return skip(v);
  }

  bool array_member(const Value& v, bool& seen, bool& ok, Where where, const char* expected) {
    const bool first = first_time(seen);
    if (first && v.kind == Value::Kind::array) return enter(where);
    if (first) problems_.add(entry_.pointer + token(key_), std::string("expected ") + expected + ", found " + v.described());
    ok = false;
    return skip(v);
  }

  // An element of shape or data_offsets: kept while `kept` holds fewer than `cap`, counted always.
  bool element(const Value& v, std::vector<std::uint64_t>& kept, std::size_t& count, std::size_t cap, bool& ok,
               const char* member) {
    const std::size_t index = count++;
    if (v.kind == Value::Kind::unsigned_integer) {
      if (kept.size() < cap) kept.push_back(v.number);
      return true;
    }
    problems_.add(entry_.pointer + member + token(index), "expected a non-negative integer, found " + v.described());
    ok = false;
    return skip(v);
  }

  // The checks that need the whole entry; the entry becomes a tensor when it has no problem.
  void finish_entry() {
    Entry& e = entry_;
    if (!e.has_dtype) problems_.add(e.pointer + "/dtype", "missing required member 'dtype'");
    if (!e.has_shape) problems_.add(e.pointer + "/shape", "missing required member 'shape'");
    if (!e.has_offsets) problems_.add(e.pointer + "/data_offsets", "missing required member 'data_offsets'");
    const std::optional<std::uint64_t> elements = e.has_shape && e.shape_ok ? elements_of(e) : std::nullopt;
    const bool offsets = e.has_offsets && e.offsets_ok && offsets_fit(e);
    if (elements && offsets && e.dtype != nullptr) check_size(e, *elements);
    if (problems_.count() != e.problems_before) return;
    const std::uint64_t begin = e.offsets[0];
    tensors_.push_back({std::move(e.name), e.dtype->type, std::move(e.shape), data_start_ + begin, e.offsets[1] - begin});
  }

  // The shape's element count, or none (a problem) when it has too many dimensions or elements.
  std::optional<std::uint64_t> elements_of(const Entry& e) {
    if (e.dims > limits_.max_dims) {
      problems_.add(e.pointer + "/shape", std::to_string(e.dims) + " dimensions, over the limit of " +
                                              std::to_string(limits_.max_dims));
      return std::nullopt;
    }
    std::int64_t n = 1;  // signed: 2^63 elements or more do not fit
    for (const std::uint64_t d : e.shape) {
      if (__builtin_mul_overflow(n, d, &n)) {
        problems_.add(e.pointer + "/shape", "the shape " + shape_text(e.shape) + " has 2^63 elements or more");
        return std::nullopt;
      }
    }
    return static_cast<std::uint64_t>(n);
  }

  // Whether data_offsets is [begin, end] with begin <= end inside the data section (else a problem).
  bool offsets_fit(const Entry& e) {
    const std::string at = e.pointer + "/data_offsets";
    if (e.offset_count != 2) {
      problems_.add(at, "expected two offsets [begin, end], found " + std::to_string(e.offset_count));
      return false;
    }
    const std::uint64_t begin = e.offsets[0], end = e.offsets[1];
    if (begin > end) {
      problems_.add(at, "begin " + std::to_string(begin) + " is after end " + std::to_string(end));
      return false;
    }
    if (end > data_bytes_) {
      problems_.add(at, "the range " + range_text(begin, end) + " ends beyond the data section, which holds " +
                            std::to_string(data_bytes_) + " bytes");
      return false;
    }
    return true;
  }

  void check_size(const Entry& e, std::uint64_t elements) {
    const std::size_t element_bytes = size_of(e.dtype->type);
    std::uint64_t need = 0;
    const bool overflow = __builtin_mul_overflow(elements, element_bytes, &need);
    const std::uint64_t have = e.offsets[1] - e.offsets[0];
    if (!overflow && need == have) return;
    problems_.add(e.pointer + "/data_offsets",
                  "the range " + range_text(e.offsets[0], e.offsets[1]) + " holds " + std::to_string(have) +
                      " bytes, but shape " + shape_text(e.shape) + " of " + std::string(e.dtype->name) + " takes " +
                      (overflow ? std::string("2^64 or more") : std::to_string(need)) + " (" + std::to_string(elements) +
                      " elements of " + std::to_string(element_bytes) + (element_bytes == 1 ? " byte)" : " bytes)"));
  }

  const SafetensorsLimits& limits_;
  const std::uint64_t data_start_, data_bytes_;
  Problems& problems_;
  std::vector<Where> where_;  ///< containers open and read, innermost last
  std::size_t skip_ = 0;      ///< nesting of the value being skipped (0: none)
  std::string key_;           ///< the member whose value comes next
  Entry entry_;               ///< the entry being read
  std::size_t entries_ = 0;
  std::string malformed_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

// Reads exactly `bytes` at `offset`: "" when done, else why not.
std::string read_at(int fd, char* to, std::uint64_t bytes, std::uint64_t offset) {
  std::uint64_t done = 0;
  while (done < bytes) {
    const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, std::uint64_t{1} << 30));
    const ssize_t n = ::pread(fd, to + done, chunk, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::error_code(errno, std::generic_category()).message();
    if (n == 0) return "the file ends after " + std::to_string(offset + done) + " bytes";
    done += static_cast<std::uint64_t>(n);
  }
  return {};
}

// Names declared twice (a JSON reader keeps one of them, and readers disagree on which) and
// tensors whose bytes overlap, for tensors sorted by name.
void check_tensor_set(const std::vector<SafetensorsTensor>& tensors, std::uint64_t data_start, Problems& problems) {
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].name == tensors[i - 1].name) {
      problems.add(token(tensors[i].name), "the tensor " + quoted_name(tensors[i].name) + " is declared more than once");
    }
  }
  // By begin: a range overlaps an earlier one when it begins before the furthest end so far.
  // Empty ranges hold no byte, so overlap nothing.
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : tensors) {
    if (t.bytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  const SafetensorsTensor* furthest = nullptr;
  for (const SafetensorsTensor* t : by_offset) {
    if (furthest != nullptr && t->offset < furthest->offset + furthest->bytes) {
      const auto relative = [&](const SafetensorsTensor& u) {
        return range_text(u.offset - data_start, u.offset - data_start + u.bytes);
      };
      problems.add(token(t->name) + "/data_offsets", "the range " + relative(*t) + " overlaps the range " +
                                                          relative(*furthest) + " of the tensor " +
                                                          quoted_name(furthest->name));
    }
    if (furthest == nullptr || t->offset + t->bytes > furthest->offset + furthest->bytes) furthest = t;
  }
}

}  // namespace

struct SafetensorsFile::State {
  std::string path;
  int fd = -1;
  std::uint64_t file_bytes = 0;
  std::vector<SafetensorsTensor> tensors;  ///< sorted by name
  std::map<std::string, std::string, std::less<>> metadata;

  explicit State(std::string path_) : path(std::move(path_)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (fd >= 0) ::close(fd);
  }

  [[noreturn]] void fail(std::string message) const { throw JsonError({{"", std::move(message)}}, path); }
};

SafetensorsFile::SafetensorsFile(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::string& path, const SafetensorsLimits& limits) {
  auto state = std::make_unique<State>(path);
  State& s = *state;
  s.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (s.fd < 0) s.fail("cannot open the file: " + std::error_code(errno, std::generic_category()).message());
  struct stat status {};
  if (::fstat(s.fd, &status) != 0) s.fail("cannot read the file's status: " + std::error_code(errno, std::generic_category()).message());
  // A device (/dev/zero) or a pipe has no length to check the header against.
  if (S_ISDIR(status.st_mode)) s.fail("the path is a directory, not a regular file");
  if (!S_ISREG(status.st_mode)) s.fail("not a regular file (a device, a pipe or a socket)");
  s.file_bytes = static_cast<std::uint64_t>(status.st_size);
  if (s.file_bytes < length_bytes) {
    s.fail("the file is " + std::to_string(s.file_bytes) + " bytes, too short for the 8-byte header length");
  }

  unsigned char length[length_bytes];
  if (std::string why = read_at(s.fd, reinterpret_cast<char*>(length), length_bytes, 0); !why.empty()) s.fail(why);
  std::uint64_t header_bytes = 0;
  for (std::size_t i = length_bytes; i-- > 0;) header_bytes = header_bytes << 8 | length[i];

  // Both bounds before the header is allocated: its length comes from the file.
  Problems problems;
  const std::uint64_t after_length = s.file_bytes - length_bytes;
  if (header_bytes > after_length) {
    problems.add("", "the header length is " + std::to_string(header_bytes) + " bytes, but only " +
                         std::to_string(after_length) + " bytes follow it in the file");
  }
  if (header_bytes > limits.max_header_bytes) {
    problems.add("", "the header length is " + std::to_string(header_bytes) + " bytes, over the limit of " +
                         std::to_string(limits.max_header_bytes));
  }
  if (problems.count() > 0) problems.raise(path);

  std::string header(static_cast<std::size_t>(header_bytes), '\0');
  if (std::string why = read_at(s.fd, header.data(), header_bytes, length_bytes); !why.empty()) s.fail(why);
  const std::uint64_t data_start = length_bytes + header_bytes;
  HeaderReader reader(limits, data_start, s.file_bytes - data_start, problems);
  (void)json::sax_parse(header.begin(), header.end(), &reader);
  if (!reader.malformed().empty()) s.fail(reader.malformed());

  if (reader.entries() > limits.max_tensors) {
    problems.add("", std::to_string(reader.entries()) + " tensors exceed the limit of " + std::to_string(limits.max_tensors));
  }
  s.tensors = std::move(reader.tensors());
  std::sort(s.tensors.begin(), s.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  check_tensor_set(s.tensors, data_start, problems);
  if (problems.count() > 0) problems.raise(path);
  s.metadata = std::move(reader.metadata());
  return SafetensorsFile(std::move(state));
}

const std::vector<SafetensorsTensor>& SafetensorsFile::tensors() const noexcept { return state_->tensors; }

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const noexcept {
  const std::vector<SafetensorsTensor>& all = state_->tensors;
  const auto it = std::lower_bound(all.begin(), all.end(), name,
                                   [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return it != all.end() && it->name == name ? &*it : nullptr;
}

const std::map<std::string, std::string, std::less<>>& SafetensorsFile::metadata() const noexcept {
  return state_->metadata;
}

void SafetensorsFile::read(const SafetensorsTensor& tensor, void* host_destination) const {
  read(tensor, 0, tensor.bytes, host_destination);
}

void SafetensorsFile::read(const SafetensorsTensor& tensor, std::uint64_t offset, std::uint64_t bytes,
                           void* host_destination) const {
  const State& s = *state_;
  if (offset > tensor.bytes || bytes > tensor.bytes - offset) {
    throw UsageError("flowdsl: " + quoted_name(s.path) + ": bytes " + range_text(offset, offset + bytes) + " of the tensor " +
                     quoted_name(tensor.name) + " lie outside its " + std::to_string(tensor.bytes) + " bytes");
  }
  if (tensor.bytes > s.file_bytes || tensor.offset > s.file_bytes - tensor.bytes) {
    throw UsageError("flowdsl: " + quoted_name(s.path) + ": the tensor " + quoted_name(tensor.name) + " at bytes " +
                     range_text(tensor.offset, tensor.offset + tensor.bytes) + " lies outside the file's " +
                     std::to_string(s.file_bytes) + " bytes (a tensor of another file?)");
  }
  const std::string why = read_at(s.fd, static_cast<char*>(host_destination), bytes, tensor.offset + offset);
  if (!why.empty()) {
    throw JsonError({{token(tensor.name), "cannot read the tensor's " + std::to_string(bytes) + " bytes at offset " +
                                              std::to_string(tensor.offset + offset) + ": " + why}},
                    s.path);
  }
}

const std::string& SafetensorsFile::path() const noexcept { return state_->path; }

std::uint64_t SafetensorsFile::file_bytes() const noexcept { return state_->file_bytes; }

}  // namespace flowdsl
