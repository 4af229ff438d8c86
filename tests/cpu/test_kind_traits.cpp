// SPDX-License-Identifier: Apache-2.0
// The traits generic code asks of node kinds (kind_traits.hpp): each kind's answers, and the
// defaults a kind that states nothing gets.
#include <string>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

void scale(float*, float, int) {}
void host_fn(void*) {}
void decide(flowdsl::Condition) {}
float x[64];

// A kind that states no trait (not in the list: traits are asked of any operation type).
struct PlainOp {
  static constexpr std::string_view kind = "plain";
  static constexpr std::uint32_t body_count = 0;
};

static_assert(flowdsl::allowed_in_conditional_body<PlainOp>, "default: allowed in conditional bodies");
static_assert(!flowdsl::is_graph_memory<PlainOp>, "default: executables shared between Graphs");
static_assert(!flowdsl::allocates_graph_memory<PlainOp>, "default: allocates nothing");
static_assert(!flowdsl::conditional_kind<PlainOp>, "default: not conditional");
static_assert(flowdsl::allocates_graph_memory<flowdsl::AllocOp> && !flowdsl::allocates_graph_memory<flowdsl::FreeOp>,
              "alloc allocates, free does not");
static_assert(!flowdsl::allowed_in_conditional_body<flowdsl::HostOp>, "CUDA allows no host node in a conditional body");

}  // namespace

TEST_CASE("Each kind answers the traits generic code asks", "[traits]") {
  flowdsl::Graph g;
  auto k = g.kernel("k", scale).launch(1, 32).args(x, 2.0f, 8);
  auto tmp = g.alloc("tmp", 256).after(k);
  auto f = g.free("free_tmp", tmp).after(tmp);
  auto c = g.child("c");
  c.body().empty("inside");
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1});
  loop.body().kernel("step", scale).launch(1, 32).args(x, 1.0f, 8);
  auto pick = g.if_then("pick", flowdsl::ConditionDefault{0});
  auto h = g.host("h", host_fn, nullptr).after(f);
  const flowdsl::Description& d = g.description();
  const auto op = [&](const flowdsl::NodeHandle& n) -> const flowdsl::Operation& { return d.nodes[n.id()].op; };

  SECTION("graph memory: what an alloc allocates and what a free frees") {
    REQUIRE(flowdsl::allocated_bytes(op(tmp)) == std::optional<std::size_t>(256));
    CHECK_FALSE(flowdsl::allocated_bytes(op(f)).has_value());
    CHECK_FALSE(flowdsl::allocated_bytes(op(k)).has_value());
    const auto freed = flowdsl::freed_memory(op(f));
    REQUIRE(freed.has_value());
    CHECK(*freed == reinterpret_cast<std::uintptr_t>(tmp.ptr()));
    CHECK(flowdsl::allocation_of(d, *freed) == tmp.id());
    CHECK(flowdsl::allocation_of(d, *freed + 16) == tmp.id());  // an address inside the allocation
    CHECK(flowdsl::allocation_of(d, reinterpret_cast<std::uintptr_t>(x)) == flowdsl::no_node);
    CHECK_FALSE(flowdsl::freed_memory(op(tmp)).has_value());
    CHECK(flowdsl::is_graph_memory_op(op(tmp)));
    CHECK(flowdsl::is_graph_memory_op(op(f)));
    CHECK_FALSE(flowdsl::is_graph_memory_op(op(k)));
  }
  SECTION("kernel launches: only kernel nodes have launch fields") {
    const flowdsl::LaunchFields* launch = flowdsl::launch_fields(op(k));
    REQUIRE(launch != nullptr);
    CHECK(launch->function == reinterpret_cast<const void*>(&scale));
    CHECK(launch->args.size() == 3);
    CHECK(launch->launch.block.x == 32);
    CHECK(flowdsl::launch_fields(op(tmp)) == nullptr);
    CHECK(flowdsl::launch_fields(op(h)) == nullptr);
    CHECK(flowdsl::launch_fields(op(loop)) == nullptr);
  }
  SECTION("bodies: child graphs, loops and conditionals") {
    CHECK(flowdsl::is_child_graph(op(c)));
    CHECK_FALSE(flowdsl::is_child_graph(op(loop)));
    CHECK(flowdsl::repeats_body(op(loop)));
    CHECK_FALSE(flowdsl::repeats_body(op(pick)));
    CHECK_FALSE(flowdsl::repeats_body(op(c)));
    CHECK(flowdsl::is_conditional(op(loop)));
    CHECK(flowdsl::is_conditional(op(pick)));
    CHECK_FALSE(flowdsl::is_conditional(op(c)));
    REQUIRE(flowdsl::conditional_fields(op(pick)) != nullptr);
    CHECK(flowdsl::conditional_fields(op(pick))->default_value == 0u);
    CHECK(flowdsl::body_count(op(c)) == 1);
    CHECK(flowdsl::body_count(op(k)) == 0);
  }
}

TEST_CASE("Validation's conditional-body rule lists the kinds the traits allow", "[traits][conditional]") {
  flowdsl::Graph g;
  auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1});
  loop.body().kernel("step", decide).launch(1, 32).args(loop.condition());
  loop.body().host("h", host_fn, nullptr);
  std::string all;
  for (const auto& problem : flowdsl::validate(g.description())) all += problem.message + "\n";
  CHECK(all.find("node 'loop/h' (host): cannot run inside conditional node 'loop'") != std::string::npos);
  // The list is made from the kinds' allowed_in_conditional_body: every allowed kind, no other
  // (IF, WHILE and SWITCH as "conditional").
  for (const char* kind : {"kernel", "memcpy", "memset", "empty", "child", "library", "conditional nodes"}) {
    CAPTURE(kind);
    CHECK(all.find(kind) != std::string::npos);
  }
  CHECK(all.find("alloc") == std::string::npos);
  CHECK(all.find("event") == std::string::npos);
}
