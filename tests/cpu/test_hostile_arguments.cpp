// SPDX-License-Identifier: Apache-2.0
// Arguments a hostile graph file (or a careless caller) gives registered kernels and library
// calls: negative sizes, enumerations out of range, an output overlapping an input, sizes whose
// byte counts overflow. Each is refused at validation with its message at its JSON pointer, the
// same check for graph files, C++ and Python (flowdsl/argument_checks.hpp). No GPU.
#include <cstdint>
#include <string>

#include "builtin_registry.hpp"
#include "catch.hpp"
#include "flowdsl/argument_checks.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernels.hpp"

using flowdsl_test::contains;
namespace fk = flowdsl::kernels;

namespace {

const flowdsl::KernelRegistry& builtins() { return flowdsl_test::builtin_registry(); }

const std::string buffers = R"("buffers": [
    {"name": "a", "type": "bf16", "count": 4096}, {"name": "b", "type": "bf16", "count": 4096},
    {"name": "c", "type": "bf16", "count": 4096}, {"name": "d", "type": "bf16", "count": 4096},
    {"name": "f", "type": "f32", "count": 4096},
    {"name": "g", "type": "f32", "count": 4096}, {"name": "i", "type": "i32", "count": 64},
    {"name": "m", "type": "u8", "count": 4096}])";

std::string file(const std::string& nodes) {
  return R"({"version": 1, "name": "hostile", )" + buffers + R"(, "nodes": [)" + nodes + "]}";
}

std::string node(const std::string& kernel, const std::string& args, const std::string& kind = "kernel") {
  return R"({"name": "n", "kind": ")" + kind + R"(", ")" + (kind == "kernel" ? "kernel" : "call") + R"(": ")" +
         kernel + R"(", "args": {)" + args + "}}";
}

flowdsl::JsonError error_of(const std::string& text, flowdsl::JsonRanks ranks = {}) {
  try {
    flowdsl::check_graph(flowdsl::parse_graph(text, "hostile.json", {}, ranks), builtins(), {}, "hostile.json");
  } catch (const flowdsl::JsonError& e) {
    return e;
  }
  FAIL("no JsonError for: " << text);
  throw;
}

const std::string matmul_args = R"("m": 8, "n": 8, "k": 8, "a": "a", "b": "b", "bias": "d", "epilogue": "bias", "c": "c")";

std::string with(std::string args, const std::string& member, const std::string& value) {
  const std::string key = "\"" + member + "\": ";
  const std::size_t at = args.find(key) + key.size();
  const std::size_t end = args.find_first_of(",}", at);
  return args.replace(at, (end == std::string::npos ? args.size() : end) - at, value);
}

}  // namespace

TEST_CASE("Negative sizes are refused at their pointer, before anything multiplies them", "[hostile][extent]") {
  auto e = error_of(file(node("scale.f32", R"("n": -1, "a": 2.0, "x": "f", "y": "g")")));
  CHECK(e.pointer() == "/nodes/0/args/n");
  CHECK_THAT(e.what(), contains("argument 'n' is -1: it sizes the extent of 'x' (n) and must not be negative"));
  // m = n = k = -8: every product of two is a positive 64, so only the sign check sees it.
  e = error_of(file(node("cublaslt.matmul.bf16", R"("m": -8, "n": -8, "k": -8, "a": "a", "b": "b", "bias": "c",
                         "epilogue": "bias", "c": "c")", "library")));
  CHECK(e.pointer() == "/nodes/0/args/m");
  CHECK_THAT(e.what(), contains("argument 'm' is -8"));
  CHECK_THAT(e.what(), contains("argument 'k' is -8"));
  e = error_of(file(node("cublaslt.matmul.bf16", with(matmul_args, "n", "-64"), "library")));
  CHECK(e.pointer() == "/nodes/0/args/n");
  e = error_of(file(node("pad.f32", R"("batch": -4, "width": 16, "pad_value": 0.0, "values": "f", "offsets": "i",
                         "out": "g", "mask": "m")")));
  CHECK(e.pointer() == "/nodes/0/args/batch");
  CHECK_THAT(e.what(), contains("argument 'batch' is -4"));
  e = error_of(file(node("gather_rows.f32", R"("count": 4, "cols": -16, "index": "i", "src_rows": 4, "in": "f",
                         "out": "g")")));
  CHECK(e.pointer() == "/nodes/0/args/cols");
  CHECK_THAT(e.what(), contains("argument 'cols' is -16"));
  e = error_of(file(node("matmul.bf16", R"("m": -8, "n": 8, "k": 8, "a": "a", "b": "b", "bias": "f",
                         "activation": "none", "c": "g")")));
  CHECK(e.pointer() == "/nodes/0/args/m");
}

TEST_CASE("An enumerated argument given as a number must be one of its values", "[hostile][enum]") {
  for (const char* value : {"4", "-1", "2147483647"}) {
    const auto e = error_of(file(node("cublaslt.matmul.bf16", with(matmul_args, "epilogue", value), "library")));
    CHECK(e.pointer() == "/nodes/0/args/epilogue");
    CHECK_THAT(e.what(), contains(std::string("argument 'epilogue' is ") + value +
                                  ", not one of its values (0 none, 1 bias, 2 bias_gelu, 3 bias_relu)"));
  }
  // An expression is evaluated first, then checked like any number.
  auto e = error_of(file(node("cublaslt.matmul.bf16", with(matmul_args, "epilogue", R"({"expr": "world+3"})"), "library")),
                    flowdsl::JsonRanks{0, 2});
  CHECK_THAT(e.what(), contains("argument 'epilogue' is 5, not one of its values"));
  e = error_of(file(node("matmul.bf16", R"("m": 8, "n": 8, "k": 8, "a": "a", "b": "b", "bias": "f", "activation": 99,
                         "c": "g")")));
  CHECK(e.pointer() == "/nodes/0/args/activation");
  CHECK_THAT(e.what(), contains("argument 'activation' is 99, not one of its values (0 none, 1 relu, 2 gelu, 3 silu)"));
#ifdef FLOWDSL_HAS_NCCL
  e = error_of(file(node("nccl.all_reduce.f32", R"("comm": 0, "count": 64, "op": 5, "send": "f", "recv": "g")", "library")));
  CHECK(e.pointer() == "/nodes/0/args/op");
  CHECK_THAT(e.what(), contains("argument 'op' is 5, not one of its values (0 sum, 1 prod, 2 max, 3 min, 4 avg)"));
  e = error_of(file(node("nccl.all_gather.f32", R"("comm": 0, "count": 64, "ranks": -2, "send": "f", "recv": "g")", "library")));
  CHECK(e.pointer() == "/nodes/0/args/ranks");
  CHECK_THAT(e.what(), contains("argument 'ranks' is -2"));
#endif
}

TEST_CASE("What a library call would refuse when recorded is refused at validation", "[hostile][library]") {
  auto e = error_of(file(node("cublaslt.matmul.bf16", with(matmul_args, "k", "0"), "library")));
  CHECK(e.pointer() == "/nodes/0/args/k");
  CHECK_THAT(e.what(), contains("argument 'k' is 0: cuBLASLt multiplies over at least one element"));
  e = error_of(file(node("cublaslt.matmul.bf16", with(matmul_args, "c", R"("a")"), "library")));
  CHECK(e.pointer() == "/nodes/0/args/c");
  CHECK_THAT(e.what(), contains("argument 'c' overlaps 'a': cuBLASLt reads its inputs while it writes c"));
  e = error_of(file(node("cublaslt.matmul.bf16", with(matmul_args, "c", R"({"buffer": "b", "offset": 32})"), "library")));
  CHECK_THAT(e.what(), contains("argument 'c' overlaps 'b'"));
  // Disjoint: accepted.
  CHECK_NOTHROW(flowdsl::check_graph(flowdsl::parse_graph(file(node("cublaslt.matmul.bf16", matmul_args, "library"))),
                                     builtins()));
}

TEST_CASE("Extent checks compare counts without multiplying them into bytes", "[hostile][extent]") {
  const flowdsl::Extent::Value huge{flowdsl::Extent::Value::Kind::known, std::uint64_t{1} << 62};
  CHECK(flowdsl::elements_beyond(huge, 4, 16384) == (std::uint64_t{1} << 62) - 4096);  // 2^62 x 4 bytes wraps to 0
  const flowdsl::Extent::Value most{flowdsl::Extent::Value::Kind::known, (std::uint64_t{1} << 63) - 1};
  CHECK(flowdsl::elements_beyond(most, 8, UINT64_MAX) > 0);
  CHECK(flowdsl::elements_beyond(flowdsl::Extent::Value{flowdsl::Extent::Value::Kind::known, 4096}, 4, 16384) == 0);
  CHECK(flowdsl::elements_beyond(flowdsl::Extent::Value{flowdsl::Extent::Value::Kind::data_dependent, 0}, 4, 0) == 0);
}

TEST_CASE("C++ graphs of registered entries get the same refusals", "[hostile][registry]") {
  const flowdsl::KernelInfo& scale = *builtins().find("scale.f32");
  flowdsl::Graph g;
  auto* x = reinterpret_cast<float*>(std::uintptr_t{0x100000});
  auto node = g.kernel("s", scale).grid(1).block(256);
  const std::int64_t n = -5;
  const float a = 2.0f;
  node.set_bytes("n", &n, sizeof n).set_bytes("a", &a, sizeof a).set_bytes("x", &x, sizeof x).set_bytes("y", &x, sizeof x);
  try {
    (void)g.plan();
    FAIL("a negative size was accepted");
  } catch (const flowdsl::ValidationError& e) {
    CHECK_THAT(e.what(), contains("node 's'"));
    CHECK_THAT(e.what(), contains("argument 'n' is -5: it sizes the extent of 'x' (n) and must not be negative"));
  }
  const std::int64_t fixed = 64;
  node.set_bytes("n", &fixed, sizeof fixed);
  CHECK_NOTHROW(g.plan());  // the graph stays usable
  const auto problems = flowdsl::check_argument_values(scale, std::get<flowdsl::KernelOp>(g.description().nodes[0].op).args);
  CHECK(problems.empty());
}

#ifdef FLOWDSL_HAS_NCCL
TEST_CASE("A collective's recv partly sharing its send is refused; in place is not", "[hostile][nccl]") {
  auto e = error_of(file(node("nccl.all_reduce.f32", R"("comm": 0, "count": 64, "op": "sum", "send": "f",
                              "recv": {"buffer": "f", "offset": 4})", "library")));
  CHECK(e.pointer() == "/nodes/0/args/recv");
  CHECK_THAT(e.what(), contains("argument 'recv' overlaps 'send' without being the same memory (in place)"));
  CHECK_NOTHROW(flowdsl::check_graph(
      flowdsl::parse_graph(file(node("nccl.all_reduce.f32", R"("comm": 0, "count": 64, "op": "sum", "send": "f", "recv": "f")",
                                     "library"))),
      builtins()));
}
#endif

TEST_CASE("Reader messages point at the member and quote at most a few hundred bytes", "[hostile][json]") {
  const std::string long_name(5000, 'x');
  auto e = error_of(file(R"({"name": ")" + long_name + R"(", "kind": "empty"})"));
  CHECK(e.pointer() == "/nodes/0/name");
  CHECK_THAT(e.what(), contains("a string of 5000 bytes, over the limit of 4096"));
  // An expression where the format takes none: a launch shape, the version, a condition's default.
  e = error_of(file(node("scale.f32", R"("n": 64, "a": 2.0, "x": "f", "y": "g")").insert(1, R"("grid": {"expr": "world"}, )")));
  CHECK(e.pointer() == "/nodes/0/grid");
  CHECK_THAT(e.what(), contains("an expression ({\"expr\": ...}) is not allowed here"));
  e = error_of(R"({"version": {"expr": "1"}, "name": "t", "nodes": []})");
  CHECK(e.pointer() == "/version");
  // A 4 KB unknown value is quoted by its start and its length.
  const std::string value(4000, 'g');
  e = error_of(file(node("matmul.bf16", R"("m": 8, "n": 8, "k": 8, "a": "a", "b": "b", "bias": "f", "activation": ")" + value +
                                            R"(", "c": "g")")));
  CHECK(std::string(e.what()).size() < 1000);
  CHECK_THAT(e.what(), contains("...' (4000 bytes)"));
}

TEST_CASE("A problem repeated is reported once, with its count", "[hostile][json]") {
  std::string after;
  for (int i = 0; i < 2000; ++i) after += std::string(i == 0 ? "" : ", ") + R"("n")";
  const auto e = error_of(file(R"({"name": "n", "kind": "empty", "after": [)" + after + "]}"));
  CHECK(e.problems().size() == 1);
  CHECK_THAT(e.what(), contains("(found 2000 times)"));
}

TEST_CASE("A programmatic edge's problem points at the after entry declaring it", "[hostile][programmatic]") {
  const auto e = error_of(file(R"({"name": "copy", "kind": "memset", "dst": "f", "value": 0, "count": 64, "element_size": 4},
    {"name": "k", "kind": "kernel", "kernel": "scale.f32", "after": ["copy", {"node": "copy", "programmatic": true}],
     "args": {"n": 64, "a": 2.0, "x": "f", "y": "g"}})"));
  CHECK(e.pointer().rfind("/nodes/1/after/", 0) == 0);
}

TEST_CASE("A condition kernel runs with its rule's one block only", "[hostile][conditional]") {
  const auto e = error_of(file(R"({"name": "loop", "kind": "while", "default": 1, "body": [
    {"name": "c", "kind": "kernel", "kernel": "count.i32", "grid": 8, "args": {"counter": "i"}}]})"));
  CHECK(e.pointer() == "/nodes/0/body/0/grid");
  CHECK_THAT(e.what(), contains("kernel 'count.i32' runs with a grid of 1x1x1 only, found 8x1x1"));
}

TEST_CASE("ensure_builtins registers the built-in kernels once, however often it is called", "[registry]") {
  flowdsl::KernelRegistry registry;
  fk::ensure_builtins(registry);
  const std::size_t count = registry.list().size();
  fk::ensure_builtins(registry);
  CHECK(registry.list().size() == count);
  CHECK(registry.find("scale.f32") != nullptr);
  CHECK_THROWS_AS(fk::register_builtins(registry), flowdsl::UsageError);  // the strict form says so
}
