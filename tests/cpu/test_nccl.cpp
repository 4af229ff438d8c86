// SPDX-License-Identifier: Apache-2.0
// NCCL collectives without a GPU or NCCL: the launcher's variables, the id shared by file and
// by TCP (ranks as threads), the registered calls, graph files with collectives (counts checked
// against buffers, rank and world expressions), hashes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/nccl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;
namespace nccl = flowdsl::nccl;

namespace {

nccl::Environment environment(std::map<std::string, std::string> values) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(values));
  return [held](const char* name) -> const char* {
    const auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

nccl::UniqueId id_of(char fill) {
  nccl::UniqueId id;
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(fill + static_cast<char>(i % 7));
  return id;
}

// Each of `world` threads calls share_unique_id as one rank with its own id; returns what each got.
std::vector<nccl::UniqueId> share_among(nccl::Bootstrap base, int world) {
  std::vector<nccl::UniqueId> got(static_cast<std::size_t>(world));
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = world - 1; r >= 0; --r) {  // the others start first: they must wait for rank 0
    ranks.emplace_back([&, r] {
      nccl::Bootstrap b = base;
      b.rank = r;
      b.world = world;
      try {
        got[static_cast<std::size_t>(r)] = nccl::share_unique_id(b, id_of(static_cast<char>('a' + r)));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& e : errors) REQUIRE(e.empty());
  return got;
}

// A TCP port nothing listens on now (the kernel's pick for port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))).string();
}

flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry r;
  static const bool once = [] {
    nccl::register_calls(r);
    return true;
  }();
  (void)once;
  return r;
}

const char* all_reduce_file = R"({"version": 1, "name": "tp",
  "buffers": [{"name": "partial", "type": "f32", "count": {"expr": "4096 / world"}},
              {"name": "gathered", "type": "f32", "count": 4096}],
  "nodes": [
    {"name": "sum", "kind": "library", "call": "nccl.all_reduce.f32",
     "args": {"comm": 0, "count": {"expr": "4096 / world"}, "op": "sum", "send": "partial", "recv": "partial"}},
    {"name": "gather", "kind": "library", "call": "nccl.all_gather.f32", "after": ["sum"],
     "args": {"comm": 0, "count": {"expr": "4096 / world"}, "ranks": {"expr": "world"}, "send": "partial",
              "recv": "gathered"}}]})";

flowdsl::BufferAddresses addresses_for(const flowdsl::GraphSpec& spec, std::vector<std::vector<char>>& memory) {
  flowdsl::BufferAddresses at;
  for (const flowdsl::BufferSpec& b : spec.buffers) {
    memory.emplace_back(b.bytes());
    at[b.name] = memory.back().data();
  }
  return at;
}

}  // namespace

TEST_CASE("The launcher's variables give rank, world and local rank", "[nccl][bootstrap]") {
  SECTION("no launcher: one rank, nothing to share") {
    const nccl::Bootstrap b = nccl::bootstrap_from(environment({}));
    CHECK(b.rank == 0);
    CHECK(b.world == 1);
    CHECK(b.id_file.empty());
    CHECK(b.address.empty());
  }
  SECTION("Open MPI's, with the id file named after the job") {
    const nccl::Bootstrap b = nccl::bootstrap_from(environment({{"OMPI_COMM_WORLD_RANK", "3"},
                                                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                                {"OMPI_MCA_ess_base_jobid", "1234/5"}}));
    CHECK(b.rank == 3);
    CHECK(b.world == 4);
    CHECK(b.local_rank == 1);
    CHECK_THAT(b.id_file, contains("flowdsl-nccl-1234_5.id"));
    CHECK_THAT(b.source, contains("OMPI_COMM_WORLD_RANK"));
  }
  SECTION("flowdsl's own variables come before a launcher's; the local rank defaults to the rank") {
    const nccl::Bootstrap b = nccl::bootstrap_from(environment({{"FLOWDSL_RANK", "1"},
                                                                {"FLOWDSL_WORLD_SIZE", "2"},
                                                                {"OMPI_COMM_WORLD_RANK", "0"},
                                                                {"OMPI_COMM_WORLD_SIZE", "8"},
                                                                {"FLOWDSL_NCCL_ID_FILE", "/shared/id"}}));
    CHECK(b.rank == 1);
    CHECK(b.world == 2);
    CHECK(b.local_rank == 1);
    CHECK(b.id_file == "/shared/id");
  }
  SECTION("Slurm's, and torchrun's address one port above its store") {
    const nccl::Bootstrap slurm = nccl::bootstrap_from(environment(
        {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "5"}, {"FLOWDSL_NCCL_ADDRESS", "node7:29400"}}));
    CHECK(slurm.rank == 5);
    CHECK(slurm.world == 16);
    CHECK(slurm.address == "node7:29400");
    const nccl::Bootstrap torch = nccl::bootstrap_from(environment(
        {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}));
    CHECK(torch.address == "10.0.0.1:29501");
  }
  SECTION("a timeout in seconds") {
    const nccl::Bootstrap b = nccl::bootstrap_from(environment({{"FLOWDSL_NCCL_TIMEOUT_S", "7"}}));
    CHECK(b.timeout == std::chrono::seconds(7));
  }
  SECTION("bad values are refused naming the variable") {
    CHECK_THROWS_WITH(nccl::bootstrap_from(environment({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}, {"FLOWDSL_JOB", "j"}})),
                      contains("PMI_RANK is '2'"));
    CHECK_THROWS_WITH(nccl::bootstrap_from(environment({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}})), contains("PMI_RANK"));
    CHECK_THROWS_WITH(nccl::bootstrap_from(environment({{"RANK", "0"}, {"WORLD_SIZE", "0"}})), contains("WORLD_SIZE is '0': expected an integer from 1 to"));
    CHECK_THROWS_WITH(nccl::bootstrap_from(environment({{"RANK", "0"}, {"WORLD_SIZE", "-3"}})), contains("WORLD_SIZE"));
    CHECK_THROWS_WITH(nccl::bootstrap_from(environment({{"FLOWDSL_NCCL_ADDRESS", "nohost"}})), contains("not host:port"));
    CHECK_THROWS_AS(nccl::bootstrap_from(environment({{"RANK", "0"}, {"WORLD_SIZE", "2"}})), flowdsl::UsageError);
    CHECK_THROWS_WITH(nccl::bootstrap_from(environment({{"RANK", "0"}, {"WORLD_SIZE", "2"}})),
                      contains("FLOWDSL_NCCL_ID_FILE"));
  }
}

TEST_CASE("Rank 0's id reaches every rank through a file", "[nccl][bootstrap]") {
  nccl::Bootstrap base;
  base.id_file = temporary_path("flowdsl-test-id");
  base.timeout = std::chrono::seconds(20);
  std::filesystem::remove(base.id_file);
  const std::vector<nccl::UniqueId> got = share_among(base, 4);
  for (const nccl::UniqueId& id : got) CHECK(id == id_of('a'));

  SECTION("a file left by another job is refused, not read") {
    nccl::Bootstrap zero = base;
    zero.world = 2;
    CHECK_THROWS_WITH(nccl::share_unique_id(zero, id_of('z')), contains("already exists"));
  }
  SECTION("a rank whose rank 0 never comes gives up after the timeout, naming the file") {
    std::filesystem::remove(base.id_file);
    nccl::Bootstrap one = base;
    one.rank = 1;
    one.world = 2;
    one.timeout = std::chrono::milliseconds(30);
    CHECK_THROWS_WITH(nccl::share_unique_id(one, id_of('b')), contains(base.id_file));
  }
  std::filesystem::remove(base.id_file);
}

TEST_CASE("Rank 0's id reaches every rank over TCP", "[nccl][bootstrap]") {
  nccl::Bootstrap base;
  base.address = "127.0.0.1:" + std::to_string(free_port());
  base.timeout = std::chrono::seconds(20);
  const std::vector<nccl::UniqueId> got = share_among(base, 5);
  for (const nccl::UniqueId& id : got) CHECK(id == id_of('a'));

  SECTION("no rank 0 within the timeout: an error naming the address") {
    nccl::Bootstrap one = base;
    one.address = "127.0.0.1:" + std::to_string(free_port());
    one.rank = 1;
    one.world = 2;
    one.timeout = std::chrono::milliseconds(50);
    CHECK_THROWS_WITH(nccl::share_unique_id(one, id_of('b')), contains(one.address));
  }
  SECTION("one rank shares nothing") {
    nccl::Bootstrap alone;
    CHECK(nccl::share_unique_id(alone, id_of('q')) == id_of('q'));
  }
}

TEST_CASE("Collectives are registered calls with typed parameters and extents", "[nccl][registry]") {
  const flowdsl::KernelInfo* all_reduce = registry().find("nccl.all_reduce.bf16");
  REQUIRE(all_reduce != nullptr);
  CHECK(all_reduce->is_call());
  REQUIRE(all_reduce->params.size() == 5);
  CHECK(all_reduce->params[0].name == "comm");
  CHECK(flowdsl::to_string(all_reduce->params[3].type) == "const bf16*");
  CHECK(all_reduce->params[4].extent == "count");
  const flowdsl::KernelInfo* gather = registry().find("nccl.all_gather.f32");
  REQUIRE(gather != nullptr);
  CHECK(gather->params[gather->index_of("recv")].extent == "count * ranks");
  const flowdsl::KernelInfo* scatter = registry().find("nccl.reduce_scatter.i64");
  REQUIRE(scatter != nullptr);
  CHECK(scatter->params[scatter->index_of("send")].extent == "count * ranks");
  for (const char* name : {"nccl.broadcast.u8", "nccl.send_recv.f64", "nccl.all_reduce.f16", "nccl.all_gather.i8"}) {
    CHECK(registry().find(name) != nullptr);
  }
  CHECK(nccl::call_name("all_reduce", ncclFloat32) == "nccl.all_reduce.f32");
  CHECK(nccl::call_name("send_recv", ncclBfloat16) == "nccl.send_recv.bf16");
  CHECK_THROWS_AS(nccl::call_name("all_reduce", ncclNumTypes), flowdsl::UsageError);
  SECTION("registering twice is refused (names are unique)") {
    flowdsl::KernelRegistry other;
    nccl::register_calls(other);
    CHECK_THROWS_AS(nccl::register_calls(other), flowdsl::UsageError);
  }
}

TEST_CASE("A graph file's collectives are checked against its buffers for each world size", "[nccl][json]") {
  for (std::uint64_t world : {1u, 2u, 4u}) {
    for (std::uint64_t rank = 0; rank < world; ++rank) {
      const flowdsl::GraphSpec spec = flowdsl::parse_graph(all_reduce_file, "tp.json", {}, {rank, world});
      REQUIRE(spec.buffers[0].count == 4096 / world);
      CHECK_NOTHROW(flowdsl::check_graph(spec, registry()));
    }
  }
  SECTION("a count beyond its buffer is named at its argument") {
    std::string text = all_reduce_file;
    text.replace(text.find("\"count\": 4096}"), 14, "\"count\": 1000}");
    const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "tp.json", {}, {0, 2});
    try {
      flowdsl::check_graph(spec, registry());
      FAIL("no error");
    } catch (const flowdsl::JsonError& e) {
      CHECK_THAT(e.what(), contains("/nodes/1/args/recv"));
      CHECK_THAT(e.what(), contains("4096 elements (count * ranks)"));
    }
  }
  SECTION("an unknown reduction is named") {
    std::string text = all_reduce_file;
    const std::string op = "\"op\": \"sum\"";
    text.replace(text.find(op), op.size(), "\"op\": \"mean\"");
    const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
    CHECK_THROWS_WITH(flowdsl::check_graph(spec, registry()), contains("/nodes/0/args/op"));
  }
  SECTION("a buffer of another type is named") {
    std::string text = all_reduce_file;
    text.replace(text.find("nccl.all_reduce.f32"), 19, "nccl.all_reduce.f16");
    const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
    CHECK_THROWS_WITH(flowdsl::check_graph(spec, registry()), contains("/nodes/0/args/send"));
  }
}

TEST_CASE("Expressions of rank and world stand for integers wherever a file takes one", "[json][expr]") {
  const auto count_of = [](const std::string& expr, flowdsl::JsonRanks ranks) {
    const std::string text = R"({"version": 1, "name": "e", "buffers": [{"name": "x", "type": "f32", "count": {"expr": ")" + expr +
                             R"("}}], "nodes": [{"name": "e", "kind": "empty"}]})";
    return flowdsl::parse_graph(text, "", {}, ranks).buffers.at(0).count;
  };
  CHECK(count_of("1024", {}) == 1024);
  CHECK(count_of("4096 / world", {1, 4}) == 1024);
  CHECK(count_of("(rank + 1) * 256 - 1", {3, 4}) == 1023);
  CHECK(count_of("rank % 2 + world * world", {3, 8}) == 65);
  CHECK(count_of(" 7 ", {}) == 7);
  const auto problem_of = [](const std::string& field) {
    const std::string text = R"({"version": 1, "name": "e", "buffers": [{"name": "x", "type": "f32", "count": 16}], "nodes": [
      {"name": "e", "kind": "empty"},
      {"name": "m", "kind": "memset", "dst": "x", "value": 0, "element_size": 4, "count": )" + field + "}]}";
    try {
      (void)flowdsl::parse_graph(text, "", {}, {1, 2});
    } catch (const flowdsl::JsonError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(problem_of(R"j({"expr": "16 / (world - 2)"})j"), contains("/nodes/1/count: cannot evaluate"));
  CHECK_THAT(problem_of(R"j({"expr": "16 / (world - 2)"})j"), contains("division by zero"));
  CHECK_THAT(problem_of(R"j({"expr": "rank - 2"})j"), contains("negative"));
  CHECK_THAT(problem_of(R"j({"expr": "ranks"})j"), contains("unknown name 'ranks'"));
  CHECK_THAT(problem_of(R"j({"expr": "4 *"})j"), contains("ends early"));
  CHECK_THAT(problem_of(R"j({"expr": "(4"})j"), contains("not closed"));
  CHECK_THAT(problem_of(R"j({"expr": "4 $ 2"})j"), contains("unexpected '$'"));
  CHECK_THAT(problem_of(R"j({"expr": "99999999999 * 99999999999"})j"), contains("overflows"));
  CHECK_THAT(problem_of(R"j({"expr": 12})j"), contains("an expression is a string"));
  const std::string deep = "{\"expr\": \"" + std::string(40, '(') + "1" + std::string(40, ')') + "\"}";
  CHECK_THAT(problem_of(deep), contains("nest deeper"));
  SECTION("an object with more members than expr is not an expression") {
    CHECK_THAT(problem_of(R"j({"expr": "1", "other": 2})j"), contains("/nodes/1/count"));
  }
}

TEST_CASE("A collective's arguments are parameters; its call is structure", "[nccl][hash]") {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(all_reduce_file, "tp.json", {}, {0, 2});
  std::vector<std::vector<char>> memory;
  const flowdsl::BufferAddresses at = addresses_for(spec, memory);
  flowdsl::Graph g = flowdsl::bind_graph(spec, at, registry());
  const std::uint64_t before = g.topology_hash();
  std::uint64_t smaller = 1024;
  flowdsl::RegisteredLibraryNode sum(&g.state(), g.node("sum").id(), registry().find("nccl.all_reduce.f32"));
  sum.set_bytes("count", &smaller, sizeof smaller);
  CHECK(g.topology_hash() == before);

  std::string text = all_reduce_file;
  text.replace(text.find("nccl.all_gather.f32"), 19, "nccl.broadcast.f32");
  text.replace(text.find("\"ranks\": {\"expr\": \"world\"}"), 26, "\"root\": 0");
  text.replace(text.find("\"recv\": \"gathered\""), 18, "\"recv\": \"partial\"");
  flowdsl::Graph other = flowdsl::bind_graph(flowdsl::parse_graph(text, "tp.json", {}, {0, 2}), at, registry());
  CHECK(other.topology_hash() != before);
}

TEST_CASE("Explain names a changed collective as the node to update, and a changed call as the difference", "[nccl][explain]") {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(all_reduce_file, "tp.json", {}, {1, 2});
  std::vector<std::vector<char>> memory;
  const flowdsl::BufferAddresses at = addresses_for(spec, memory);
  flowdsl::Graph g = flowdsl::bind_graph(spec, at, registry());
  flowdsl_test::Record counts;
  flowdsl::Runtime runtime = flowdsl_test::make_runtime(counts);
  runtime.launch(g);
  CHECK(runtime.explain(g).kind == flowdsl::LaunchKind::hit);

  flowdsl::RegisteredLibraryNode sum(&g.state(), g.node("sum").id(), registry().find("nccl.all_reduce.f32"));
  const std::int32_t max = ncclMax;
  sum.set_bytes("op", &max, sizeof max);
  const flowdsl::LaunchExplanation update = runtime.explain(g);
  CHECK(update.kind == flowdsl::LaunchKind::updated);
  CHECK(update.updated_nodes == std::vector<std::string>{"sum"});
  CHECK(runtime.launch(g).kind == flowdsl::LaunchKind::updated);
  CHECK(counts.updated.size() == 1);

  std::string text = all_reduce_file;
  for (std::size_t at_f32 = text.find("f32"); at_f32 != std::string::npos; at_f32 = text.find("f32", at_f32)) {
    text.replace(at_f32, 3, "bf16");  // buffers and calls
  }
  const flowdsl::GraphSpec other_spec = flowdsl::parse_graph(text, "tp.json", {}, {1, 2});
  std::vector<std::vector<char>> other_memory;
  flowdsl::Graph other = flowdsl::bind_graph(other_spec, addresses_for(other_spec, other_memory), registry());
  const flowdsl::LaunchExplanation miss = runtime.explain(other);
  CHECK(miss.kind == flowdsl::LaunchKind::instantiated);
  REQUIRE_FALSE(miss.differences.empty());
  CHECK_THAT(miss.differences.front(), contains("'sum'") && contains("nccl.all_reduce.bf16"));
}
