// SPDX-License-Identifier: Apache-2.0
// The shapes a serving engine gives a decode step, on the built-in kernels, without a GPU: a
// decode loop (decode_loop_begin ahead of a WHILE whose body ends with decode_loop_step) and a
// SWITCH over batch buckets steered by condition_bucket, validated with programmatic edges,
// their extents checked, and written to a graph file and read back.
#include <cstdint>
#include <string>
#include <vector>

#include "builtin_registry.hpp"
#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernels.hpp"

using flowdsl_test::contains;
namespace fk = flowdsl::kernels;
using i32 = std::int32_t;

namespace {

template <class T>
T* fake(std::uintptr_t at) {
  return reinterpret_cast<T*>(at);
}

constexpr i32 sequences = 8, steps = 16, vocab = 1000;

/// Device memory the graphs name, as buffers: where each lies and how large it is.
struct Buffers {
  float* logits = fake<float>(0x1000000);
  i32* tokens = fake<i32>(0x2000000);
  i32* positions = fake<i32>(0x3000000);
  i32* remaining = fake<i32>(0x4000000);
  i32* out = fake<i32>(0x5000000);
  i32* step = fake<i32>(0x6000000);
  i32* count = fake<i32>(0x7000000);

  /// Names every buffer in `g`; `out_count` elements of out.
  void name(flowdsl::Graph& g, std::size_t out_count = std::size_t(sequences) * steps) const {
    g.buffer("logits", logits, std::size_t(sequences) * vocab * sizeof(float));
    g.buffer("tokens", tokens, sequences * sizeof(i32));
    g.buffer("positions", positions, sequences * sizeof(i32));
    g.buffer("remaining", remaining, sequences * sizeof(i32));
    g.buffer("out", out, out_count * sizeof(i32));
    g.buffer("step", step, sizeof(i32));
    g.buffer("count", count, sizeof(i32));
  }

  std::vector<flowdsl::BufferSpec> specs(std::size_t out_count = std::size_t(sequences) * steps) const {
    const auto spec = [](const char* name, flowdsl::ScalarType type, std::size_t elements) {
      flowdsl::BufferSpec b;
      b.name = name;
      b.type = type;
      b.count = elements;
      return b;
    };
    using flowdsl::ScalarType;
    return {spec("logits", ScalarType::f32, std::size_t(sequences) * vocab), spec("tokens", ScalarType::i32, sequences),
            spec("positions", ScalarType::i32, sequences),  spec("remaining", ScalarType::i32, sequences),
            spec("out", ScalarType::i32, out_count),        spec("step", ScalarType::i32, 1),
            spec("count", ScalarType::i32, 1)};
  }
  flowdsl::BufferAddresses addresses() const {
    return {{"logits", logits}, {"tokens", tokens}, {"positions", positions}, {"remaining", remaining},
            {"out", out},       {"step", step},     {"count", count}};
  }
};

/// begin -> WHILE { argmax (the step's end: each sequence's next token over its input) -> loop_step }
flowdsl::Graph decode_loop(const Buffers& b) {
  flowdsl::Graph g;
  auto loop = g.while_loop("decode", flowdsl::ConditionDefault{0});
  auto begin = fk::decode_loop_begin(g, "begin", sequences, steps, static_cast<const i32*>(b.remaining), b.step,
                                     loop.condition());
  loop.after(begin);
  auto argmax = fk::row_argmax(loop.body(), "argmax", sequences, vocab, static_cast<const float*>(b.logits), b.tokens);
  fk::decode_loop_step(loop.body(), "loop_step", sequences, steps, -1, static_cast<const i32*>(b.tokens), b.positions,
                       b.remaining, b.out, b.step, loop.condition())
      .after(argmax);
  g.programmatic_edges(true);
  return g;
}

/// decide (condition_bucket of count[0]) -> SWITCH of 4 buckets, body i an argmax of 2^i rows.
flowdsl::Graph bucket_switch(const Buffers& b) {
  flowdsl::Graph g;
  auto bucket = g.switch_cases("bucket", 4);
  auto decide = fk::condition_bucket(g, "decide", static_cast<const i32*>(b.count), 4, bucket.condition());
  bucket.after(decide);
  for (std::uint32_t i = 0; i < 4; ++i) {
    const i32 rows = i32{1} << i;
    auto argmax = fk::row_argmax(bucket.body(i), "argmax", rows, vocab, static_cast<const float*>(b.logits), b.tokens);
    fk::advance_positions(bucket.body(i), "advance", rows, b.positions).after(argmax);
  }
  g.programmatic_edges(true);
  return g;
}

/// The graph written as a graph file and read back, bound to the same addresses.
flowdsl::Graph round_trip(const flowdsl::Graph& g, const Buffers& b) {
  const flowdsl::GraphSpec spec = flowdsl::describe_graph(g, "t", b.specs(), b.addresses(), flowdsl_test::builtin_registry());
  const flowdsl::GraphSpec read = flowdsl::parse_graph(flowdsl::to_json_text(spec));
  flowdsl::check_graph(read, flowdsl_test::builtin_registry());
  return flowdsl::bind_graph(read, b.addresses(), flowdsl_test::builtin_registry());
}

}  // namespace

TEST_CASE("A decode loop validates with programmatic edges and survives a graph file", "[decode_loop][json]") {
  const Buffers b;
  flowdsl::Graph g = decode_loop(b);
  b.name(g);
  CHECK_NOTHROW(g.plan());
  const flowdsl::Graph read = round_trip(g, b);
  CHECK(read.topology_hash() == g.topology_hash());
  CHECK(read.size() == g.size());
}

TEST_CASE("A decode loop whose out buffer is short of sequences * steps is refused, naming the node",
          "[decode_loop][errors]") {
  fk::ensure_builtins();  // validation reads the extents of kernels the global registry knows
  const Buffers b;
  flowdsl::Graph g = decode_loop(b);
  b.name(g, std::size_t(sequences) * steps - 1);
  CHECK_THROWS_AS(g.plan(), flowdsl::ValidationError);
  CHECK_THROWS_WITH(g.plan(), contains("loop_step") && contains("out"));
}

TEST_CASE("A SWITCH over batch buckets validates with programmatic edges and survives a graph file",
          "[decode_loop][switch][json]") {
  const Buffers b;
  flowdsl::Graph g = bucket_switch(b);
  b.name(g);
  CHECK_NOTHROW(g.plan());
  const flowdsl::Graph read = round_trip(g, b);
  CHECK(read.topology_hash() == g.topology_hash());
}

