// SPDX-License-Identifier: Apache-2.0
// The `flowdsl run` host side without a GPU: the device memory check, initial contents produced
// in chunks, and .npy headers checked against their buffers before any data is read.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "buffers.hpp"
#include "catch.hpp"
#include "npy.hpp"

using flowdsl_test::contains;

namespace {

flowdsl::BufferSpec buffer(std::string name, flowdsl::ScalarType type, std::uint64_t count) {
  flowdsl::BufferSpec b;
  b.name = std::move(name);
  b.type = type;
  b.count = count;
  return b;
}

/// Every chunk of `b`'s contents concatenated, checking offsets and sizes on the way.
std::vector<unsigned char> concatenated(const flowdsl::BufferSpec& b, std::size_t chunk_bytes, int& chunks,
                                        const std::string& base_dir = {}) {
  std::vector<unsigned char> out;
  chunks = 0;
  flowdsl::cli::produce_initial_contents(b, base_dir, chunk_bytes,
                                         [&](const unsigned char* data, std::size_t bytes, std::uint64_t offset) {
                                           REQUIRE(offset == out.size());
                                           REQUIRE(bytes <= std::max(chunk_bytes, flowdsl::size_of(b.type)));
                                           REQUIRE(bytes % flowdsl::size_of(b.type) == 0);
                                           out.insert(out.end(), data, data + bytes);
                                           ++chunks;
                                         });
  return out;
}

std::filesystem::path scratch_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("flowdsl_test_cli_buffers_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("A graph whose buffers exceed the free device memory is refused with the sizes", "[cli][memory]") {
  flowdsl::GraphSpec spec;
  spec.buffers.push_back(buffer("huge", flowdsl::ScalarType::f32, 137438953472ull));  // 512 GiB
  const std::uint64_t free_bytes = 149470085939ull;                                  // 139.2 GiB
  const auto refusal = flowdsl::cli::memory_refusal(spec, free_bytes, 0);
  REQUIRE(refusal.has_value());
  CHECK(*refusal == "the buffers need 512 GiB but device 0 has 139.2 GiB free");
}

TEST_CASE("The memory check adds up every buffer and accepts what fits exactly", "[cli][memory]") {
  flowdsl::GraphSpec spec;
  spec.buffers.push_back(buffer("a", flowdsl::ScalarType::f64, 1000));  // 8000 bytes
  spec.buffers.push_back(buffer("b", flowdsl::ScalarType::i8, 192));    // 192 bytes
  CHECK_FALSE(flowdsl::cli::memory_refusal(spec, 8192, 1).has_value());
  const auto refusal = flowdsl::cli::memory_refusal(spec, 8000, 1);
  REQUIRE(refusal.has_value());
  CHECK(*refusal == "the buffers need 8 KiB but device 1 has 7.8 KiB free");
  CHECK(flowdsl::cli::memory_refusal(spec, 8191, 1).has_value());
  CHECK_FALSE(flowdsl::cli::memory_refusal(flowdsl::GraphSpec{}, 0, 0).has_value());
}

TEST_CASE("The memory check does not wrap around when sizes add up past 2^64", "[cli][memory]") {
  flowdsl::GraphSpec spec;
  for (int i = 0; i < 3; ++i) spec.buffers.push_back(buffer("b" + std::to_string(i), flowdsl::ScalarType::f64, 1ull << 60));  // 2^63 bytes each
  CHECK(flowdsl::cli::memory_refusal(spec, ~0ull - 1, 0).has_value());
}

TEST_CASE("Sizes are written in binary units with one decimal when not whole", "[cli][memory]") {
  CHECK(flowdsl::cli::format_bytes(0) == "0 B");
  CHECK(flowdsl::cli::format_bytes(1023) == "1023 B");
  CHECK(flowdsl::cli::format_bytes(1536) == "1.5 KiB");
  CHECK(flowdsl::cli::format_bytes(64ull << 20) == "64 MiB");
  CHECK(flowdsl::cli::format_bytes(512ull << 30) == "512 GiB");
}

TEST_CASE("Seeded initial contents are the same in chunks as whole and as the element-by-element sequence",
          "[cli][buffers]") {
  auto b = buffer("x", flowdsl::ScalarType::f32, 1001);
  b.init.seed = 42;
  std::vector<float> expected(b.count);
  SECTION("uniform") {
    b.init.kind = flowdsl::BufferInit::Kind::uniform;
    b.init.low = -2;
    b.init.high = 3;
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> dist(-2, 3);
    for (float& v : expected) v = static_cast<float>(dist(rng));
  }
  SECTION("normal") {
    b.init.kind = flowdsl::BufferInit::Kind::normal;
    b.init.mean = 1;
    b.init.stddev = 0.5;
    std::mt19937_64 rng(42);
    std::normal_distribution<double> dist(1, 0.5);
    for (float& v : expected) v = static_cast<float>(dist(rng));
  }
  const std::vector<unsigned char> whole = flowdsl::cli::initial_contents(b, {});
  REQUIRE(whole.size() == b.bytes());
  CHECK(std::memcmp(whole.data(), expected.data(), whole.size()) == 0);
  for (std::size_t chunk_bytes : {std::size_t{1}, std::size_t{4}, std::size_t{30}, std::size_t{4096}, std::size_t{1} << 20}) {
    int chunks = 0;
    CAPTURE(chunk_bytes);
    CHECK(concatenated(b, chunk_bytes, chunks) == whole);
    CHECK(chunks == static_cast<int>((b.count + std::max<std::size_t>(1, chunk_bytes / 4) - 1) /
                                     std::max<std::size_t>(1, chunk_bytes / 4)));
  }
}

TEST_CASE("Zeros and constants come in chunks of whole elements", "[cli][buffers]") {
  auto b = buffer("c", flowdsl::ScalarType::i16, 37);
  b.init.kind = flowdsl::BufferInit::Kind::constant;
  b.init.value = -7.5;  // integers round down
  int chunks = 0;
  const auto bytes = concatenated(b, 9, chunks);  // 4 elements per chunk
  CHECK(chunks == 10);
  std::vector<std::int16_t> values(b.count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  CHECK(values == std::vector<std::int16_t>(b.count, -8));
  b.init.kind = flowdsl::BufferInit::Kind::zeros;
  CHECK(concatenated(b, 16, chunks) == std::vector<unsigned char>(b.bytes(), 0));
  CHECK(chunks == 5);
}

TEST_CASE(".npy inputs are checked against the buffer before any data is read, then read in chunks", "[cli][npy]") {
  const auto dir = scratch_dir();
  std::vector<float> values(100);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f;
  flowdsl::cli::write_npy((dir / "x.npy").string(), flowdsl::ScalarType::f32, values.size(), values.data());

  auto b = buffer("x", flowdsl::ScalarType::f32, values.size());
  b.init.kind = flowdsl::BufferInit::Kind::npy;
  b.init.file = "x.npy";
  CHECK_NOTHROW(flowdsl::cli::check_initial_contents(b, dir.string()));
  int chunks = 0;
  const auto bytes = concatenated(b, 64, chunks, dir.string());
  CHECK(chunks == 7);
  REQUIRE(bytes.size() == values.size() * 4);
  CHECK(std::memcmp(bytes.data(), values.data(), bytes.size()) == 0);

  SECTION("a shape that declares more elements than the buffer") {
    b.count = 137438953472ull;
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()),
                      contains("holds 100 elements, the buffer 137438953472"));
  }
  SECTION("another dtype") {
    b.type = flowdsl::ScalarType::f64;
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()),
                      contains("dtype '<f4' does not match the buffer's f64"));
  }
  SECTION("a file shorter than its header says") {
    flowdsl::cli::NpyWriter((dir / "short.npy").string(), flowdsl::ScalarType::f32, 1000).write(values.data(), 400);
    b.count = 1000;
    b.init.file = (dir / "short.npy").string();  // absolute
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, "/elsewhere"), contains("truncated data: 400 bytes for 4000"));
  }
  SECTION("a missing file") {
    b.init.file = "missing.npy";
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()), contains("cannot open the file"));
  }
  SECTION("a directory, a device or a pipe, never opened") {
    b.init.file = dir.string();
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, ""), contains(": a directory, not a regular file"));
    b.init.file = "/dev/zero";
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, ""),
                      contains("/dev/zero: not a regular file (a device, a pipe or a socket)"));
  }
  SECTION("a header that claims 2^60 elements, refused before anything is allocated") {
    const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1152921504606846976,), }\n";
    std::ofstream out(dir / "huge.npy", std::ios::binary);
    out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size()) << '\x00' << header << "tiny";
    out.close();
    b.init.file = "huge.npy";
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()), contains("huge.npy: shape too large"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("A buffer takes one tensor of a .safetensors file, checked by type and count, read in chunks",
          "[cli][safetensors]") {
  const auto dir = scratch_dir();
  // Two tensors: "w" (100 f32) then "b" (8 bf16, as raw bits), 8-byte aligned after the header.
  std::vector<float> w(100);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const std::uint16_t bits[8] = {0x3f80, 0x4000, 0x4040, 0x4080, 0xbf80, 0, 0x7f80, 0x3f00};
  std::string header = R"({"w": {"dtype": "F32", "shape": [10, 10], "data_offsets": [0, 400]},
                           "b": {"dtype": "BF16", "shape": [8], "data_offsets": [400, 416]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  {
    std::ofstream out(dir / "weights.safetensors", std::ios::binary);
    const std::uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(w.data()), 400);
    out.write(reinterpret_cast<const char*>(bits), 16);
  }
  auto b = buffer("w", flowdsl::ScalarType::f32, w.size());
  b.init.kind = flowdsl::BufferInit::Kind::safetensors;
  b.init.file = "weights.safetensors";
  b.init.tensors = {"w"};
  CHECK_NOTHROW(flowdsl::cli::check_initial_contents(b, dir.string()));
  int chunks = 0;
  auto bytes = concatenated(b, 64, chunks, dir.string());
  CHECK(chunks == 7);
  REQUIRE(bytes.size() == 400);
  CHECK(std::memcmp(bytes.data(), w.data(), 400) == 0);

  auto h = buffer("h", flowdsl::ScalarType::bf16, 8);
  h.init = b.init;
  h.init.tensors = {"b"};
  bytes = concatenated(h, 6, chunks, dir.string());
  REQUIRE(bytes.size() == 16);
  CHECK(std::memcmp(bytes.data(), bits, 16) == 0);

  SECTION("several tensors fill one buffer one after another") {
    auto fused = buffer("fused", flowdsl::ScalarType::bf16, 24);
    fused.init = h.init;
    fused.init.tensors = {"b", "b", "b"};
    bytes = concatenated(fused, 5, chunks, dir.string());
    REQUIRE(bytes.size() == 48);
    for (int i = 0; i < 3; ++i) CHECK(std::memcmp(bytes.data() + 16 * i, bits, 16) == 0);
    fused.count = 23;
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(fused, dir.string()),
                      contains("the tensors hold more than 23 elements, the buffer 23"));
    fused.count = 25;
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(fused, dir.string()),
                      contains("the tensors hold 24 elements, the buffer 25"));
  }
  SECTION("a tensor the file does not hold, or of another type or size, is refused naming it") {
    b.init.tensors = {"missing"};
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()), contains("the tensor 'missing'"));
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()), contains("is not in the file"));
    b.init.tensors = {"b"};
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(b, dir.string()), contains("holds bf16 elements, the buffer f32"));
    h.count = 9;
    CHECK_THROWS_WITH(flowdsl::cli::check_initial_contents(h, dir.string()), contains("holds 8 elements, the buffer 9"));
  }
  SECTION("a hostile header is refused before any tensor is read") {
    std::ofstream out(dir / "bad.safetensors", std::ios::binary);
    const std::uint64_t length = std::uint64_t{100} << 30;  // claims 100 GiB
    out.write(reinterpret_cast<const char*>(&length), 8);
    out.close();
    b.init.file = "bad.safetensors";
    CHECK_THROWS(flowdsl::cli::check_initial_contents(b, dir.string()));
  }
  std::filesystem::remove_all(dir);
}
