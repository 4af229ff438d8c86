// SPDX-License-Identifier: Apache-2.0
// Loading graph files: what `flowdsl validate` does (read_graph_file + check_graph with the
// built-in kernels), per size, and a hostile file. Needs no GPU. Each load runs in a child
// process, so that its peak resident memory (ru_maxrss from wait4) is its own; the figure per
// node is that peak less the peak of a child that only registers the kernels. Beside each load,
// the floor of any loader on nlohmann: reading the same file and a SAX pass over it whose
// handler keeps nothing (same run, own child).
// `--quick` loads 1,000 nodes (a ctest smoke test; no timing is asserted).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"

namespace {

constexpr int lanes = 16;  // width of the DAG

// A valid DAG of `n` scale.f32 kernels: node i runs after node i-16 (its lane) and after one
// random node among the 16 before it; each lane writes its own buffer.
void write_dag(const std::string& path, int n) {
  std::ofstream out(path, std::ios::binary);
  std::mt19937 random(1);
  out << R"({"version": 1, "name": "dag", "buffers": [{"name": "in", "type": "f32", "count": 256})";
  for (int l = 0; l < lanes; ++l) out << R"(, {"name": "b)" << l << R"(", "type": "f32", "count": 256})";
  out << "],\n\"nodes\": [\n";
  for (int i = 0; i < n; ++i) {
    out << (i == 0 ? "" : ",\n") << R"({"name": "n)" << i
        << R"(", "kind": "kernel", "kernel": "scale.f32", "grid": 1, "block": 256, "args": {"n": 256, "a": 2.0, "x": "in", "y": "b)"
        << i % lanes << R"("}, "after": [)";
    if (i >= lanes) out << "\"n" << i - lanes << "\"";
    if (i >= 1) {
      const int other = std::uniform_int_distribution<int>(std::max(0, i - lanes), i - 1)(random);
      if (other != i - lanes) out << (i >= lanes ? ", " : "") << "\"n" << other << "\"";
    }
    out << "]}";
  }
  out << "\n]}\n";
}

// A hostile file: a million empty nodes.
void write_empty_nodes(const std::string& path, int n) {
  std::ofstream out(path, std::ios::binary);
  out << R"({"version": 1, "name": "x", "buffers": [], "nodes": [)";
  for (int i = 0; i < n; ++i) out << (i == 0 ? "{}" : ", {}");
  out << "]}\n";
}

/// A SAX handler that accepts everything and keeps nothing.
struct NullHandler : nlohmann::json_sax<nlohmann::json> {
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

enum class Pass { nothing, load, sax };

struct Load {
  double ms = 0;          ///< read + check (or read + SAX pass), in the child
  long peak_kib = 0;      ///< the child's peak resident memory
  bool refused = false;   ///< a JsonError
};

// Runs read_graph_file + check_graph on `path` (Pass::load), or reads it and runs the null SAX
// pass (Pass::sax), or nothing, in a child process.
Load load_in_child(const std::string& path, Pass pass = Pass::load) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    flowdsl::KernelRegistry registry;
    flowdsl::kernels::register_builtins(registry);
    Load load;
    if (pass == Pass::load) {
      const double t0 = bench::now_us();
      try {
        const flowdsl::GraphSpec spec = flowdsl::read_graph_file(path);
        flowdsl::check_graph(spec, registry, {}, path);
      } catch (const flowdsl::JsonError&) {
        load.refused = true;
      }
      load.ms = (bench::now_us() - t0) / 1000;
    } else if (pass == Pass::sax) {
      const double t0 = bench::now_us();
      std::ifstream in(path, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      NullHandler handler;
      load.refused = !nlohmann::json::sax_parse(text, &handler);
      load.ms = (bench::now_us() - t0) / 1000;
    }
    const ssize_t written = write(pipe_fds[1], &load, sizeof load);
    _exit(written == static_cast<ssize_t>(sizeof load) ? 0 : 1);
  }
  close(pipe_fds[1]);
  Load load;
  const bool got = read(pipe_fds[0], &load, sizeof load) == static_cast<ssize_t>(sizeof load);
  close(pipe_fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (!got) std::fprintf(stderr, "the child loading %s failed\n", path.c_str());
  load.peak_kib = usage.ru_maxrss;
  return load;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::string dir = std::filesystem::temp_directory_path() / ("flowdsl_load_bench." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const long baseline = load_in_child("", Pass::nothing).peak_kib;
  std::printf("loading graph files (read_graph_file + check_graph, as `flowdsl validate`), baseline peak %ld KiB\n",
              baseline);
  std::printf("%-28s %10s %10s %14s %12s %12s\n", "file", "MB", "ms", "peak B/node", "SAX pass ms", "ms / SAX");
  const auto report = [&](const std::string& name, const std::string& path, int n, bool expect_refusal) {
    const Load load = load_in_child(path);
    const Load sax = load_in_child(path, Pass::sax);
    const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    const double per_node = static_cast<double>(load.peak_kib - baseline) * 1024.0 / n;
    std::printf("%-28s %10.1f %10.1f %14.0f %12.1f %12.2f%s\n", name.c_str(), mb, load.ms, per_node, sax.ms,
                load.ms / sax.ms,
                load.refused == expect_refusal ? "" : (expect_refusal ? "  (NOT refused)" : "  (refused)"));
    std::filesystem::remove(path);
    return load.refused == expect_refusal;
  };
  bool ok = true;
  for (int n : quick ? std::vector<int>{1000} : std::vector<int>{10'000, 100'000, 1'000'000}) {
    const std::string path = dir + "/dag" + std::to_string(n) + ".json";
    write_dag(path, n);
    ok = report("valid DAG, " + std::to_string(n) + " nodes", path, n, false) && ok;
  }
  const int empty = quick ? 1000 : 1'000'000;
  const std::string path = dir + "/empty.json";
  write_empty_nodes(path, empty);
  ok = report(std::to_string(empty) + " empty nodes (refused)", path, empty, true) && ok;
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}
