// SPDX-License-Identifier: Apache-2.0
// Safetensors files: a valid file read back byte for byte, and hostile headers each refused with
// its message at its JSON pointer, before anything they claim is allocated or read.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "catch.hpp"
#include "flowdsl/safetensors.hpp"

using flowdsl_test::contains;

namespace {

// A folder of its own under the system's temporary folder, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static int made = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("flowdsl_test_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(made++));
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string little_endian(std::uint64_t n) {
  std::string out(8, '\0');
  for (char& c : out) {
    c = static_cast<char>(n & 0xff);
    n >>= 8;
  }
  return out;
}

// A file's bytes: the header's length (or `length`, where a test makes it lie), the header, the data.
std::string file_of(const std::string& header, const std::string& data = {},
                    std::optional<std::uint64_t> length = std::nullopt) {
  return little_endian(length.value_or(header.size())) + header + data;
}

std::string written(const TempDir& dir, const std::string& bytes, const std::string& name = "t.safetensors") {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

flowdsl::JsonError error_of(const std::string& bytes, const flowdsl::SafetensorsLimits& limits = {}) {
  const TempDir dir;
  const std::string path = written(dir, bytes);
  try {
    (void)flowdsl::SafetensorsFile::open(path, limits);
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.source() == path);
    return e;
  }
  FAIL("no JsonError");
  throw;  // not reached: FAIL throws
}

// The error of a header whose data section is `data_bytes` zero bytes.
flowdsl::JsonError header_error(const std::string& header, std::size_t data_bytes = 0,
                                const flowdsl::SafetensorsLimits& limits = {}) {
  return error_of(file_of(header, std::string(data_bytes, '\0')), limits);
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(random() & 0xff);
  return out;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + R"(": {"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}";
}

}  // namespace

TEST_CASE("A valid file is read back byte for byte and its tensors found by name", "[safetensors]") {
  const TempDir dir;
  // Written out of name order, with an empty tensor and a hole before the last.
  std::string header = "{" + entry("w.f32", "F32", "[4]", "[12, 28]") + ", " + entry("a.bf16", "BF16", "[2, 3]", "[0, 12]") +
                       ", " + entry("z.i64", "I64", "[2]", "[32, 48]") + ", " + entry("empty", "F16", "[0, 5]", "[28, 28]") +
                       R"(, "__metadata__": {"format": "pt", "note": "random"}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section at a multiple of 8, as writers pad
  const std::string data = random_bytes(48, 7);
  const std::string path = written(dir, file_of(header, data));
  const std::uint64_t data_start = 8 + header.size();

  const flowdsl::SafetensorsFile file = flowdsl::SafetensorsFile::open(path);
  CHECK(file.path() == path);
  CHECK(file.file_bytes() == data_start + data.size());
  REQUIRE(file.tensors().size() == 4);
  CHECK(file.tensors()[0].name == "a.bf16");  // sorted by name
  CHECK(file.tensors()[3].name == "z.i64");
  CHECK(file.metadata() == std::map<std::string, std::string, std::less<>>{{"format", "pt"}, {"note", "random"}});
  CHECK(file.find("missing") == nullptr);

  struct Expected {
    const char* name;
    flowdsl::ScalarType type;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin, end;
  };
  for (const Expected& want : {Expected{"a.bf16", flowdsl::ScalarType::bf16, {2, 3}, 0, 12},
                               Expected{"w.f32", flowdsl::ScalarType::f32, {4}, 12, 28},
                               Expected{"z.i64", flowdsl::ScalarType::i64, {2}, 32, 48},
                               Expected{"empty", flowdsl::ScalarType::f16, {0, 5}, 28, 28}}) {
    INFO(want.name);
    const flowdsl::SafetensorsTensor* t = file.find(want.name);
    REQUIRE(t != nullptr);
    CHECK(t->type == want.type);
    CHECK(t->shape == want.shape);
    CHECK(t->offset == data_start + want.begin);
    CHECK(t->bytes == want.end - want.begin);
    CHECK(t->elements() * flowdsl::size_of(t->type) == t->bytes);
    std::string read(t->bytes, '\0');
    file.read(*t, read.data());
    CHECK(read == data.substr(want.begin, want.end - want.begin));
  }
}

TEST_CASE("A file moved keeps its tensors and its open file", "[safetensors]") {
  const TempDir dir;
  const std::string path = written(dir, file_of("{" + entry("b", "BOOL", "[3]", "[0, 3]") + "}", std::string("\1\0\1", 3)));
  flowdsl::SafetensorsFile first = flowdsl::SafetensorsFile::open(path);
  const flowdsl::SafetensorsFile moved = std::move(first);
  const flowdsl::SafetensorsTensor* b = moved.find("b");
  REQUIRE(b != nullptr);
  CHECK(b->type == flowdsl::ScalarType::u8);  // BOOL is read as bytes
  unsigned char bytes[3] = {};
  moved.read(*b, bytes);
  CHECK(bytes[0] == 1);
  CHECK(bytes[1] == 0);
  CHECK(bytes[2] == 1);
  CHECK(moved.metadata().empty());
}

TEST_CASE("Metadata must be an object of strings", "[safetensors]") {
  CHECK_THAT(header_error(R"({"__metadata__": [1]})").what(),
             contains("/__metadata__: expected an object of strings, found an array"));
  const flowdsl::JsonError e = header_error(R"({"__metadata__": {"ok": "yes", "n": 1, "o": {"deep": [1]}}})");
  REQUIRE(e.problems().size() == 2);
  CHECK(e.problems()[0].pointer == "/__metadata__/n");
  CHECK(e.problems()[0].message == "expected a string, found an integer");
  CHECK(e.problems()[1].pointer == "/__metadata__/o");
}

TEST_CASE("A header length beyond the file is refused", "[safetensors]") {
  const flowdsl::JsonError e = error_of(file_of("{}", {}, 1000));
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "");
  CHECK_THAT(e.what(), contains("/: the header length is 1000 bytes, but only 2 bytes follow it in the file"));
}

TEST_CASE("A header claiming 100 GB in a tiny file is refused before it is allocated", "[safetensors]") {
  const std::uint64_t claimed = std::uint64_t{100} << 30;
  const flowdsl::JsonError e = error_of(file_of("{}", "12345678", claimed));
  REQUIRE(e.problems().size() == 2);
  CHECK(e.problems()[0].message == "the header length is 107374182400 bytes, but only 10 bytes follow it in the file");
  CHECK(e.problems()[1].message == "the header length is 107374182400 bytes, over the limit of 104857600");
  // Lengths near 2^64 must not wrap when the data section's start is worked out.
  CHECK_THAT(error_of(file_of("{}", {}, ~std::uint64_t{0})).what(),
             contains("the header length is 18446744073709551615 bytes, but only 2 bytes follow it"));
}

TEST_CASE("A header over the limit is refused even when the file holds it", "[safetensors]") {
  flowdsl::SafetensorsLimits limits;
  limits.max_header_bytes = 16;
  CHECK_THAT(error_of(file_of("{" + entry("a", "U8", "[1]", "[0, 1]") + "}", "x"), limits).what(),
             contains("bytes, over the limit of 16"));
}

TEST_CASE("Files too short, missing, or not regular are refused", "[safetensors]") {
  CHECK_THAT(error_of("abc").what(), contains("the file is 3 bytes, too short for the 8-byte header length"));
  const TempDir dir;
  try {
    (void)flowdsl::SafetensorsFile::open(dir.file("absent.safetensors"));
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK_THAT(e.what(), contains("absent.safetensors: /: cannot open the file: No such file or directory"));
  }
  try {
    (void)flowdsl::SafetensorsFile::open(dir.file(""));
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK_THAT(e.what(), contains("the path is a directory, not a regular file"));
  }
  try {
    (void)flowdsl::SafetensorsFile::open("/dev/zero");
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK_THAT(e.what(), contains("/dev/zero: /: not a regular file"));
  }
}

TEST_CASE("Malformed JSON is refused with its place", "[safetensors]") {
  const flowdsl::JsonError e = header_error(R"({"a": {"dtype": "F32",)");
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "");
  CHECK_THAT(e.what(), contains("malformed JSON at line 1, column"));
  CHECK_THAT(header_error("{} trailing").what(), contains("malformed JSON at line 1, column"));
  CHECK_THAT(header_error("").what(), contains("malformed JSON"));
  CHECK_THAT(header_error(R"({"a": 1e999})").what(), contains("malformed JSON"));
  // What the parser echoes of the text is cut short.
  const std::string long_token = "{\"" + std::string(100000, 'x');
  CHECK(std::string(header_error(long_token).what()).size() < 1000);
}

TEST_CASE("A header that is not an object, or an entry that is not one, is refused", "[safetensors]") {
  CHECK_THAT(header_error("[1, 2]").what(), contains("/: expected the header to be an object of tensors, found an array"));
  const flowdsl::JsonError e = header_error(R"({"a": [1, 2], "b": "F32", "c": {}})");
  REQUIRE(e.problems().size() == 5);
  CHECK(e.problems()[0].pointer == "/a");
  CHECK(e.problems()[0].message == "expected an object with dtype, shape and data_offsets, found an array");
  CHECK(e.problems()[1].pointer == "/b");
  CHECK(e.problems()[1].message == "expected an object with dtype, shape and data_offsets, found a string");
  CHECK(e.problems()[2].pointer == "/c/dtype");
  CHECK(e.problems()[2].message == "missing required member 'dtype'");
  CHECK(e.problems()[3].pointer == "/c/shape");
  CHECK(e.problems()[4].pointer == "/c/data_offsets");
}

TEST_CASE("An unknown dtype is named, with the known ones, and capped", "[safetensors]") {
  const flowdsl::JsonError e = header_error("{" + entry("w", "Q4_K", "[4]", "[0, 4]") + "}", 4);
  CHECK(e.pointer() == "/w/dtype");
  CHECK_THAT(e.what(), contains("unknown dtype 'Q4_K' (known: BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64)"));
  const flowdsl::JsonError long_dtype = header_error("{" + entry("w", std::string(5000, 'D'), "[4]", "[0, 4]") + "}", 4);
  CHECK_THAT(long_dtype.what(), contains("...' (5000 bytes)"));
  CHECK(std::string(long_dtype.what()).size() < 600);
  CHECK_THAT(header_error(R"({"w": {"dtype": 3, "shape": [], "data_offsets": [0, 0]}})").what(),
             contains("/w/dtype: expected a string naming the dtype, found an integer"));
}

TEST_CASE("A 2^60-element shape is refused when its bytes are not in the file", "[safetensors]") {
  const std::string huge = "[1152921504606846976]";  // 2^60
  CHECK_THAT(header_error("{" + entry("w", "U8", huge, "[0, 1152921504606846976]") + "}", 16).what(),
             contains("/w/data_offsets: the range [0, 1152921504606846976) ends beyond the data section, which holds "
                      "16 bytes"));
  CHECK_THAT(header_error("{" + entry("w", "U8", huge, "[0, 16]") + "}", 16).what(),
             contains("/w/data_offsets: the range [0, 16) holds 16 bytes, but shape [1152921504606846976] of U8 "
                      "takes 1152921504606846976 (1152921504606846976 elements of 1 byte)"));
  // 2^62 elements of 8 bytes: the byte count would wrap.
  CHECK_THAT(header_error("{" + entry("w", "F64", "[4611686018427387904]", "[0, 0]") + "}").what(),
             contains("takes 2^64 or more (4611686018427387904 elements of 8 bytes)"));
}

TEST_CASE("An element count that overflows is refused, never wrapped", "[safetensors]") {
  // 2^32 * 2^32 wraps to 0 in 64 bits, which the empty range [0, 0] would match.
  CHECK_THAT(header_error("{" + entry("w", "F32", "[4294967296, 4294967296]", "[0, 0]") + "}").what(),
             contains("/w/shape: the shape [4294967296, 4294967296] has 2^63 elements or more"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4611686018427387904, 2]", "[0, 0]") + "}").what(),  // 2^63
             contains("has 2^63 elements or more"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[18446744073709551615, 3]", "[0, 0]") + "}").what(),
             contains("has 2^63 elements or more"));
}

TEST_CASE("Shape entries must be non-negative integers, at most max_dims of them", "[safetensors]") {
  const flowdsl::JsonError e = header_error("{" + entry("w", "F32", R"([2, -1, 1.5, "4", [1], 18446744073709551616])", "[0, 0]") + "}");
  REQUIRE(e.problems().size() == 5);
  CHECK(e.problems()[0].pointer == "/w/shape/1");
  CHECK(e.problems()[0].message == "expected a non-negative integer, found the negative integer -1");
  CHECK(e.problems()[1].message == "expected a non-negative integer, found the number 1.5");
  CHECK(e.problems()[2].message == "expected a non-negative integer, found a string");
  CHECK(e.problems()[3].pointer == "/w/shape/4");
  CHECK(e.problems()[3].message == "expected a non-negative integer, found an array");
  CHECK(e.problems()[4].message == "expected a non-negative integer, found the number 18446744073709551616");
  CHECK_THAT(header_error("{" + entry("w", "U8", "[1, 1, 1, 1, 1, 1, 1, 1, 1]", "[0, 1]") + "}", 1).what(),
             contains("/w/shape: 9 dimensions, over the limit of 8"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "{}", "[0, 1]") + "}", 1).what(),
             contains("/w/shape: expected an array of dimensions, found an object"));
}

TEST_CASE("Offsets must be two integers, begin before end, matching the shape", "[safetensors]") {
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4]", "[8, 4]") + "}", 8).what(),
             contains("/w/data_offsets: begin 8 is after end 4"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4]", "[0, 4, 8]") + "}", 8).what(),
             contains("/w/data_offsets: expected two offsets [begin, end], found 3"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4]", "[0]") + "}", 8).what(),
             contains("/w/data_offsets: expected two offsets [begin, end], found 1"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4]", "4") + "}", 8).what(),
             contains("/w/data_offsets: expected an array of two offsets [begin, end], found an integer"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4]", "[-1, 4]") + "}", 8).what(),
             contains("/w/data_offsets/0: expected a non-negative integer, found the negative integer -1"));
  CHECK_THAT(header_error("{" + entry("w", "BF16", "[2, 2]", "[0, 6]") + "}", 8).what(),
             contains("/w/data_offsets: the range [0, 6) holds 6 bytes, but shape [2, 2] of BF16 takes 8 "
                      "(4 elements of 2 bytes)"));
}

TEST_CASE("Offsets out of the data section are refused", "[safetensors]") {
  const flowdsl::JsonError e = header_error("{" + entry("w", "U8", "[4]", "[6, 10]") + "}", 8);
  CHECK(e.pointer() == "/w/data_offsets");
  CHECK_THAT(e.what(), contains("the range [6, 10) ends beyond the data section, which holds 8 bytes"));
  CHECK_THAT(header_error("{" + entry("w", "U8", "[0]", "[18446744073709551615, 18446744073709551615]") + "}", 8).what(),
             contains("ends beyond the data section"));
}

TEST_CASE("Overlapping tensors are refused, each against one it overlaps", "[safetensors]") {
  const flowdsl::JsonError e = header_error("{" + entry("a", "U8", "[16]", "[0, 16]") + ", " + entry("b", "U8", "[16]", "[8, 24]") +
                                            ", " + entry("c", "U8", "[4]", "[24, 28]") + "}", 32);
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "/b/data_offsets");
  CHECK(e.problems()[0].message == "the range [8, 24) overlaps the range [0, 16) of the tensor 'a'");
  // A range inside a larger one and after a smaller one inside it: both found, against the large one.
  const flowdsl::JsonError nested = header_error("{" + entry("big", "U8", "[100]", "[0, 100]") + ", " +
                                                 entry("s1", "U8", "[10]", "[10, 20]") + ", " +
                                                 entry("s2", "U8", "[10]", "[30, 40]") + ", " +
                                                 entry("empty", "U8", "[0]", "[50, 50]") + "}", 100);
  REQUIRE(nested.problems().size() == 2);
  CHECK(nested.problems()[0].message == "the range [10, 20) overlaps the range [0, 100) of the tensor 'big'");
  CHECK(nested.problems()[1].message == "the range [30, 40) overlaps the range [0, 100) of the tensor 'big'");
}

TEST_CASE("Names declared twice and members repeated are refused", "[safetensors]") {
  CHECK_THAT(header_error("{" + entry("w", "U8", "[4]", "[0, 4]") + ", " + entry("w", "U8", "[4]", "[4, 8]") + "}", 8).what(),
             contains("/w: the tensor 'w' is declared more than once"));
  CHECK_THAT(header_error(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "dtype": "F32"}})", 1).what(),
             contains("/w/dtype: the member 'dtype' appears more than once"));
  const flowdsl::JsonError shape =
      header_error(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "shape": "x"}})", 1);
  REQUIRE(shape.problems().size() == 1);
  CHECK(shape.pointer() == "/w/shape");
  CHECK(shape.problems()[0].message == "the member 'shape' appears more than once");
}

TEST_CASE("Members other than dtype, shape and data_offsets are ignored", "[safetensors]") {
  const TempDir dir;
  const std::string header = R"({"w": {"extra": {"deep": [[{}]]}, "dtype": "U8", "shape": [2], "data_offsets": [0, 2], "x": 1}})";
  const flowdsl::SafetensorsFile file = flowdsl::SafetensorsFile::open(written(dir, file_of(header, "ab")));
  REQUIRE(file.find("w") != nullptr);
  CHECK(file.find("w")->bytes == 2);
}

TEST_CASE("Names are escaped in pointers and quoted in messages", "[safetensors]") {
  const flowdsl::JsonError e = header_error("{" + entry("a/b~c", "U8", "[4]", "[0, 3]") + "}", 4);
  CHECK(e.pointer() == "/a~1b~0c/data_offsets");
  CHECK_THAT(header_error("{" + entry("a\\nb", "U8", "[4]", "[0, 4]") + ", " + entry("a\\nb", "U8", "[4]", "[4, 8]") + "}", 8)
                 .what(),
             contains("the tensor 'a\\nb' is declared more than once"));
}

TEST_CASE("Every problem of a header is reported at once, the list bounded", "[safetensors]") {
  const flowdsl::JsonError e = header_error("{" + entry("a", "Q", "[4]", "[0, 4]") + ", " + entry("b", "U8", "[9]", "[0, 4]") +
                                            ", " + entry("c", "U8", "[4]", "[5, 1]") + "}", 8);
  REQUIRE(e.problems().size() == 3);
  CHECK(e.problems()[0].pointer == "/a/dtype");
  CHECK(e.problems()[1].pointer == "/b/data_offsets");
  CHECK(e.problems()[2].pointer == "/c/data_offsets");
  CHECK_THAT(e.what(), contains("3 problems:"));

  std::string many = "{";
  for (int i = 0; i < 10000; ++i) many += (i == 0 ? "" : ", ") + entry("t" + std::to_string(i), "Q", "[1]", "[0, 1]");
  const flowdsl::JsonError bounded = header_error(many + "}", 1);
  CHECK(bounded.problems().size() == flowdsl::JsonError::max_problems + 1);
  CHECK(bounded.problems().back().message == "... and 9900 more problems");
  CHECK_THAT(bounded.what(), contains("10000 problems:"));
}

TEST_CASE("Too many tensors are counted, not read", "[safetensors]") {
  flowdsl::SafetensorsLimits limits;
  limits.max_tensors = 2;
  std::string header = "{";
  for (int i = 0; i < 5; ++i) header += (i == 0 ? "" : ", ") + entry("t" + std::to_string(i), "U8", "[1]", "[" + std::to_string(i) + ", " + std::to_string(i + 1) + "]");
  const flowdsl::JsonError e = header_error(header + "}", 5, limits);
  REQUIRE(e.problems().size() == 1);
  CHECK(e.pointer() == "");
  CHECK(e.problems()[0].message == "5 tensors exceed the limit of 2");
}

TEST_CASE("Reading refuses a tensor of another file and a file that has shrunk", "[safetensors]") {
  const TempDir dir;
  const std::string path = written(dir, file_of("{" + entry("w", "U8", "[64]", "[0, 64]") + "}", std::string(64, 'x')));
  const flowdsl::SafetensorsFile file = flowdsl::SafetensorsFile::open(path);
  flowdsl::SafetensorsTensor other = *file.find("w");
  other.offset = file.file_bytes() - 8;
  std::string bytes(64, '\0');
  CHECK_THROWS_AS(file.read(other, bytes.data()), flowdsl::UsageError);
  std::filesystem::resize_file(path, file.file_bytes() - 10);
  try {
    file.read(*file.find("w"), bytes.data());
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/w");
    CHECK_THAT(e.what(), contains("cannot read the tensor's 64 bytes at offset"));
    CHECK_THAT(e.what(), contains("the file ends after"));
  }
}
