// SPDX-License-Identifier: Apache-2.0
// Topology hash: equal for equal topology whatever the parameters; different for any
// structural change.
#include <algorithm>
#include <cstring>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

void scale(float*, float, int) {}
void other_kernel(float*, float, int) {}
void host_a(void*) {}
void host_b(void*) {}

float buf_a[64];
float buf_b[64];
int data_a = 1;
int data_b = 2;

/// The structure of a small pipeline holding every node kind.
struct Shape {
  void (*k1)(float*, float, int) = scale;
  flowdsl::Dim3 k2_grid = 4;
  flowdsl::Dim3 k2_block = 128;
  std::uint32_t k2_shared = 0;
  std::uint32_t fill_element = 4;
  bool fill_is_empty = false;
  bool fill_after_upload = false;
  bool extra_node = false;
  bool extra_edge = false;
};

/// Builds the pipeline; `other_parameters` binds other arguments, pointers, sizes, values,
/// host data and names.
std::uint64_t pipeline_hash(const Shape& s, bool other_parameters = false) {
  const bool o = other_parameters;
  const std::string prefix = o ? "other_" : "";
  flowdsl::Graph g;
  g.check_hazards(false);  // upload and fill race on purpose: only the hash matters here
  auto up = g.memcpy(prefix + "upload", o ? buf_b : buf_a, o ? buf_a : buf_b, o ? 32 : 64);
  auto k1 = g.kernel(prefix + "k1", s.k1).launch(4, 128).args(o ? buf_b : buf_a, o ? 5.0f : 2.0f, o ? 7 : 64).after(up);
  auto k2 = g.kernel(prefix + "k2", scale)
                .launch(s.k2_grid, s.k2_block, s.k2_shared)
                .args(buf_a, o ? -1.0f : 3.0f, 64)
                .after(up);
  const flowdsl::NodeHandle fill =
      s.fill_is_empty ? g.empty(prefix + "fill")
                      : flowdsl::NodeHandle(g.memset(prefix + "fill", o ? buf_a : buf_b, o ? 0xdeadbeefu : 0u,
                                                     o ? 3 : 16, s.fill_element));
  if (s.fill_after_upload) flowdsl::NodeHandle(fill).after(up);
  auto join = g.empty(prefix + "join").after(k1, k2, fill);
  g.host(prefix + "done", o ? host_b : host_a, o ? &data_b : &data_a).after(join);
  if (s.extra_node) g.empty(prefix + "extra");
  if (s.extra_edge) k2.after(k1);
  return g.topology_hash();
}

}  // namespace

TEST_CASE("Equal topology with other parameters and names hashes equal", "[hash]") {
  const std::uint64_t base = pipeline_hash({});
  CHECK(pipeline_hash({}) == base);
  CHECK(pipeline_hash({}, /*other_parameters=*/true) == base);
}

TEST_CASE("Changing parameters through handles keeps the hash", "[hash]") {
  flowdsl::Graph g;
  g.check_hazards(false);  // fill writes what upload reads, unordered: only the hash matters here
  auto up = g.memcpy("upload", buf_a, buf_b, 64).writes(buf_a, 64);
  auto k = g.kernel("k", scale).launch(4, 128).args(buf_a, 2.0f, 64).after(up).reads(buf_a);
  auto fill = g.memset("fill", buf_b, 0, 16, 4);
  auto done = g.host("done", host_a, &data_a).after(k, fill);
  const std::uint64_t base = g.topology_hash();
  up.set(buf_b, buf_a, 32);
  k.args(buf_b, 5.0f, 7);
  fill.set(buf_a, 7, 3);
  done.set(host_b, &data_b);
  CHECK(g.topology_hash() == base);
  CHECK(flowdsl::lower(g.description()).topology_hash == base);
}

TEST_CASE("Every kind of structural change changes the hash", "[hash]") {
  const std::vector<std::pair<const char*, Shape>> changes = {
      {"added node", [] { Shape s; s.extra_node = true; return s; }()},
      {"added edge", [] { Shape s; s.extra_edge = true; return s; }()},
      {"other kernel function", [] { Shape s; s.k1 = other_kernel; return s; }()},
      {"grid", [] { Shape s; s.k2_grid = 5; return s; }()},
      {"block", [] { Shape s; s.k2_block = {64, 2}; return s; }()},
      {"dynamic shared memory", [] { Shape s; s.k2_shared = 1024; return s; }()},
      {"memset element size", [] { Shape s; s.fill_element = 1; return s; }()},
      {"node kind", [] { Shape s; s.fill_is_empty = true; return s; }()},
      {"edge moved", [] { Shape s; s.fill_after_upload = true; return s; }()},
  };
  std::vector<std::uint64_t> seen{pipeline_hash({})};
  for (const auto& [what, shape] : changes) {
    INFO(what);
    const std::uint64_t hash = pipeline_hash(shape);
    CHECK(std::find(seen.begin(), seen.end(), hash) == seen.end());
    seen.push_back(hash);
  }
}

TEST_CASE("Chains of different lengths and widths all hash differently", "[hash]") {
  std::vector<std::uint64_t> hashes;
  for (int width = 1; width <= 8; width *= 2) {
    for (int length = 1; length <= 64; length *= 2) {
      flowdsl::Graph g;
      for (int w = 0; w < width; ++w) {
        std::string prev;
        for (int i = 0; i < length; ++i) {
          auto n = g.kernel("k" + std::to_string(w) + "_" + std::to_string(i), scale).launch(1, 1).args(buf_a, 1.0f, 1);
          if (!prev.empty()) n.after(prev);
          prev = n.name();
        }
      }
      hashes.push_back(g.topology_hash());
    }
  }
  std::sort(hashes.begin(), hashes.end());
  CHECK(std::adjacent_find(hashes.begin(), hashes.end()) == hashes.end());
}

namespace {
struct Extra {
  float value;
};
void with_extra(float*, float, int, Extra) {}
// The same function without its derived parameter hashes as another function: compare through
// `scale`'s hash only the presence, and through two derive functions their identity.
void derive_a(const void* const*, void* out) { std::memset(out, 0, sizeof(Extra)); }
void derive_b(const void* const*, void* out) { std::memset(out, 1, sizeof(Extra)); }
}  // namespace

TEST_CASE("Derived parameters are structure: their presence and their function change the hash", "[hash]") {
  auto hash_of = [](flowdsl::DerivedParameters derived) {
    flowdsl::Graph g;
    if (derived) {
      g.kernel("k", with_extra, derived).launch(1, 32).args(buf_a, 1.0f, 8);
    } else {
      g.kernel("k", scale).launch(1, 32).args(buf_a, 1.0f, 8);
    }
    return g.topology_hash();
  };
  const std::uint64_t none = hash_of({});
  const std::uint64_t a = hash_of({derive_a, sizeof(Extra), alignof(Extra)});
  CHECK(a != none);
  CHECK(hash_of({derive_b, sizeof(Extra), alignof(Extra)}) != a);
  CHECK(hash_of({derive_a, sizeof(Extra), alignof(Extra)}) == a);
}

TEST_CASE("topology_hash of a description and its plan is the hash lowering gave the plan", "[hash]") {
  flowdsl::Graph flat;
  auto a = flat.kernel("a", scale).launch(1, 32).args(buf_a, 1.0f, 8);
  auto b = flat.kernel("b", scale).launch(2, 32).args(buf_a, 1.0f, 8).after(a, flowdsl::programmatic);
  flat.memset("fill", buf_b, 0, 16, 4).after(a, b);

  flowdsl::Graph nested;
  auto up = nested.memcpy("upload", buf_a, buf_b, 64);
  auto outer = nested.child("outer").after(up);
  auto inner = outer.body().child("inner");
  inner.body().kernel("k", scale).launch(1, 32).args(buf_a, 1.0f, 8);
  outer.body().empty("join").after(inner);
  nested.empty("done").after(outer);

  for (const flowdsl::Graph* g : {&flat, &nested}) {
    const flowdsl::Plan plan = flowdsl::lower(g->description());
    CHECK(flowdsl::topology_hash(g->description(), plan) == plan.topology_hash);
    CHECK(plan.topology_hash == g->topology_hash());
  }
}
