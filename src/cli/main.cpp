// SPDX-License-Identifier: Apache-2.0
// The `flowdsl` command-line tool: validate, dot, run, bench, profile, info and schema for JSON
// graph files.
//
// Exit codes: 0 ok, 1 invalid input (file, arguments, a node at fault in a --debug run),
// 2 environment (no CUDA device, driver too old, out of device memory, buffers larger than the
// device's free memory, CUPTI missing or held by another tool), 3 internal error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench.hpp"
#include "bench_stats.hpp"
#include "buffers.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernel_files.hpp"
#include "flowdsl/kernels.hpp"
#include "loaded_file.hpp"
#include "npy.hpp"
#ifdef FLOWDSL_HAS_NCCL
#include <optional>

#include "flowdsl/nccl.hpp"
#endif

namespace {

using flowdsl::cli::EnvironmentError;
using flowdsl::cli::InputError;

constexpr int exit_ok = 0;
constexpr int exit_invalid = 1;
constexpr int exit_environment = 2;
constexpr int exit_internal = 3;

void noop(void*) {}

// The host functions graph files may name: the tool knows only `noop`.
const flowdsl::HostFunctions& host_functions() {
  static const flowdsl::HostFunctions hosts{{"noop", {noop, nullptr}}};
  return hosts;
}

flowdsl::GraphSpec checked_spec(const std::string& file) { return flowdsl::cli::checked_spec(file, host_functions()); }

// Names of the kernels the nodes use (inline bodies included) whose pointer parameters do not all
// declare an extent, so that nodes of them are not checked against their buffers.
void unchecked_kernels(const flowdsl::GraphSpec& spec, const std::vector<flowdsl::NodeSpec>& nodes,
                       std::set<std::string>& out) {
  std::string_view previous;  // the kernel of the previous kernel node: decided already
  for (const flowdsl::NodeSpec& node : nodes) {
    for (const flowdsl::BodySpec& body : node.bodies) unchecked_kernels(spec, body.nodes, out);
    const auto kernel = node.fields.root().find("kernel");  // the nodes that launch a registered or file kernel
    if (!kernel || !kernel->is_string()) continue;
    const std::string_view name = kernel->get_string();  // valid while the spec is
    if (!previous.empty() && previous == name) continue;
    previous = name;
    bool checked = true;
    if (const flowdsl::KernelInfo* info = flowdsl::KernelRegistry::global().find(name)) {
      checked = info->checked();
    } else {
      for (const flowdsl::KernelFileSpec& f : spec.kernel_files) {
        if (f.name != name) continue;
        for (const flowdsl::KernelParam& p : f.params) checked = checked && (!p.type.pointer || !p.extent.empty());
      }
    }
    if (!checked) out.insert(std::string(name));
  }
}

#ifdef FLOWDSL_HAS_NCCL
// Whether a node (in any body) makes an NCCL collective.
bool uses_nccl(const std::vector<flowdsl::NodeSpec>& nodes) {
  for (const flowdsl::NodeSpec& node : nodes) {
    for (const flowdsl::BodySpec& body : node.bodies) {
      if (uses_nccl(body.nodes)) return true;
    }
    const auto call = node.fields.root().find("call");
    if (call && call->is_string() && call->get_string().substr(0, 5) == "nccl.") {
      return true;
    }
  }
  return false;
}

// The communicator a run of `file` needs: one when the launcher started several ranks or the
// file makes collectives, made before anything is allocated (it picks this rank's GPU). It is
// communicator 0, the one graph files name with "comm": 0.
std::optional<flowdsl::nccl::Communicator> communicator_for(const std::string& file,
                                                             const flowdsl::nccl::Bootstrap& bootstrap) {
  bool needed = bootstrap.world > 1;
  if (!needed) {
    const flowdsl::GraphSpec spec = flowdsl::read_graph_file(file, {}, flowdsl::cli::file_ranks());
    needed = uses_nccl(spec.nodes);
    for (const auto& named : spec.bodies) needed = needed || uses_nccl(named.second);
  }
  if (!needed) return std::nullopt;
  flowdsl::cli::require_device();
  std::optional<flowdsl::nccl::Communicator> comm;
  comm.emplace(bootstrap);
  if (bootstrap.world > 1) {
    std::printf("rank %d of %d on device %d (%s)\n", comm->rank(), comm->size(), comm->device(), bootstrap.source.c_str());
  }
  return comm;
}
#endif

int validate(const std::string& file, bool fuse) {
  flowdsl::GraphSpec spec = checked_spec(file);
  spec.fuse = spec.fuse || fuse;
  std::printf("%s: valid graph %s (%zu nodes, %zu buffers)\n", file.c_str(), flowdsl::quoted_name(spec.name).c_str(),
              spec.nodes.size(), spec.buffers.size());
  if (spec.infer_edges) {
    flowdsl::GraphSpec declared = spec;  // as written, to count what inference changes
    declared.infer_edges = false;
    declared.check_hazards = false;
    flowdsl::Graph graph = flowdsl::inspect_graph(declared, flowdsl::KernelRegistry::global(), host_functions(), file);
    const flowdsl::EdgeInference made = flowdsl::infer_edges(graph);
    std::printf("  edges inferred from the accesses: %zu added, %zu declared ones removed as redundant%s\n", made.added,
                made.removed, made.reduced ? "" : " (reduction skipped)");
  }
  if (spec.fuse) {
    const flowdsl::Graph graph = flowdsl::inspect_graph(spec, flowdsl::KernelRegistry::global(), host_functions(), file);
    const std::string text = flowdsl::describe_fusion(graph.description(), flowdsl::plan_fusion(graph.description(), graph.plan()));
    std::printf("%s", text.c_str());
  }
  std::set<std::string> unchecked;
  unchecked_kernels(spec, spec.nodes, unchecked);
  for (const auto& named : spec.bodies) unchecked_kernels(spec, named.second, unchecked);
  for (const std::string& name : unchecked) {
    std::printf(
        "  note: kernel %s declares no extent for some pointer parameters: those are not checked against "
        "their buffers, nor seen by the hazard check\n",
        flowdsl::quoted_name(name).c_str());
  }
  return exit_ok;
}

int dot(const std::string& file, const std::string& out, flowdsl::DotOptions options) {
  const flowdsl::GraphSpec spec = flowdsl::read_graph_file(file, {}, flowdsl::cli::file_ranks());
  const flowdsl::Graph graph = flowdsl::inspect_graph(spec, flowdsl::KernelRegistry::global(), host_functions(), file);
  options.registry = &flowdsl::KernelRegistry::global();
  const std::string text = flowdsl::to_dot(graph, options);
  if (out.empty() || out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return exit_ok;
  }
  std::ofstream stream(out, std::ios::binary);
  if (!(stream << text)) throw InputError("cannot write " + flowdsl::quoted_name(out));
  return exit_ok;
}

struct RunOptions {
  int iterations = 1;
  std::string out_dir;
  bool debug = false;    // run node by node, checking each node
  bool explain = false;  // say what the first launch and the next one would do
  bool fuse = false;     // fuse runs of element-wise kernels whatever the file says
};

int run(const std::string& file, const RunOptions& run_options) {
  const int iterations = run_options.iterations;
  const auto opened = std::chrono::steady_clock::now();
  const flowdsl::cli::LoadedFile loaded(file, host_functions(), run_options.fuse);
  const flowdsl::GraphSpec& spec = loaded.spec();
  const flowdsl::Graph& graph = loaded.graph();
  const int device = loaded.device();
  std::printf("%s: %zu buffers (%.1f MiB) allocated and initialised\n", spec.name.c_str(), spec.buffers.size(),
              static_cast<double>(loaded.buffer_bytes()) / (1 << 20));
  const flowdsl::cli::LoadPhases& phases = loaded.phases();
  std::printf("load: read and check %.1f ms, device %.1f ms, allocate %.1f ms, upload %.1f ms (%.1f MiB), bind %.1f ms\n",
              phases.read_check, phases.device, phases.allocate, phases.upload,
              static_cast<double>(phases.uploaded_bytes) / (1 << 20), phases.bind);

  flowdsl::RuntimeOptions options;
  options.debug = run_options.debug;
  options.registry = &loaded.registry();
  flowdsl::Runtime runtime(options);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  if (run_options.explain) std::printf("explain: %s\n", runtime.explain(graph, stream.get()).text().c_str());
  if (!runtime.debug()) {
    // The cold start's last phases apart: lowering (what binding left of validation and the
    // plan), then emission, instantiation and upload; the first launch is then a hit.
    const auto lowering = std::chrono::steady_clock::now();
    (void)graph.plan();
    const auto instantiation = std::chrono::steady_clock::now();
    runtime.prepare(graph, stream.get());
    flowdsl::check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
    const auto ready = std::chrono::steady_clock::now();
    const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
    std::printf("ready: lowered in %.1f ms, instantiated and uploaded in %.1f ms; %.1f ms after the file was opened\n",
                ms(lowering, instantiation), ms(instantiation, ready), ms(opened, ready));
  }
  const flowdsl::EventHandle start = flowdsl::make_event();
  const flowdsl::EventHandle stop = flowdsl::make_event();
  for (int i = 0; i < iterations; ++i) {
    flowdsl::check(cudaEventRecord(start.get(), stream.get()), "cudaEventRecord");
    const auto host_start = std::chrono::steady_clock::now();
    const flowdsl::LaunchReport report = runtime.launch(graph, stream.get());
    const double host_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start).count();
    flowdsl::check(cudaEventRecord(stop.get(), stream.get()), "cudaEventRecord");
    flowdsl::check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
    float device_ms = 0;
    flowdsl::check(cudaEventElapsedTime(&device_ms, start.get(), stop.get()), "cudaEventElapsedTime");
    std::printf("launch %d: %s, %.1f us host, %.1f us on the stream%s%s\n", i + 1, flowdsl::to_string(report.kind),
                host_us, 1000.0 * device_ms, report.reason.empty() ? "" : "; ", report.reason.c_str());
    if (i == 0) {
      // Cold start: from opening the file to the end of the first launch (lowering and
      // instantiation are the first launch's host time).
      std::printf("first launch ended %.1f ms after the file was opened\n",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - opened).count());
    }
  }
  if (run_options.explain) {
    std::printf("explain (next launch): %s\n", runtime.explain(graph, stream.get()).text().c_str());
  }
  const flowdsl::RuntimeStatistics s = runtime.statistics();
  std::printf(
      "cache: launches=%llu hits=%llu misses=%llu node_updates=%llu reinstantiations=%llu evictions=%llu "
      "debug_launches=%llu private_executables=%llu executable_bytes=%llu\n",
      static_cast<unsigned long long>(s.launches), static_cast<unsigned long long>(s.hits),
      static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.node_updates),
      static_cast<unsigned long long>(s.reinstantiations), static_cast<unsigned long long>(s.evictions),
      static_cast<unsigned long long>(s.debug_launches), static_cast<unsigned long long>(s.private_executables),
      static_cast<unsigned long long>(s.executable_bytes));
  if (graph.description().fuse) {
    const flowdsl::Plan& plan = graph.plan();
    std::size_t groups = 0, fused = 0;
    if (plan.fusion) {
      groups = plan.fusion->groups.size();
      for (const flowdsl::FusedGroup& group : plan.fusion->groups) fused += group.members.size();
    }
    const flowdsl::FusedKernelStatistics f = flowdsl::fused_kernel_statistics();
    std::printf("fusion: %zu groups of %zu kernels; fused kernels compiled %llu (%.1f ms), found loaded %llu, read from disk %llu\n",
                groups, fused, static_cast<unsigned long long>(f.compilations), f.compile_seconds * 1e3,
                static_cast<unsigned long long>(f.memory_hits), static_cast<unsigned long long>(f.disk_hits));
  }
  if (graph.plan().graph_memory) {
    const flowdsl::GraphMemory m = flowdsl::graph_memory(device);
    std::printf("graph memory on device %d: %.1f MiB in use (at most %.1f MiB), %.1f MiB reserved (at most %.1f MiB)\n",
                device, static_cast<double>(m.used) / (1 << 20), static_cast<double>(m.used_high) / (1 << 20),
                static_cast<double>(m.reserved) / (1 << 20), static_cast<double>(m.reserved_high) / (1 << 20));
  }

  if (run_options.out_dir.empty()) return exit_ok;
  // Each rank writes its own buffers: <out>/rank<r>/ when the launcher started several.
  const std::string out_dir = flowdsl::cli::file_ranks().world > 1
                                  ? run_options.out_dir + "/rank" + std::to_string(flowdsl::cli::file_ranks().rank)
                                  : run_options.out_dir;
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error)
    throw InputError("cannot create the output folder " + flowdsl::quoted_name(out_dir) + ": " + error.message());
  for (const flowdsl::BufferSpec& b : spec.buffers) {
    if (!b.output) continue;
    const std::string path = out_dir + "/" + b.name + ".npy";
    try {
      flowdsl::cli::NpyWriter writer(path, b.type, b.count);
      std::vector<unsigned char> host(std::min<std::uint64_t>(b.bytes(), flowdsl::cli::staging_bytes));
      const auto* device_bytes = static_cast<const unsigned char*>(loaded.address(b.name));
      for (std::uint64_t offset = 0; offset < b.bytes(); offset += host.size()) {
        const std::size_t n = std::min<std::uint64_t>(host.size(), b.bytes() - offset);
        flowdsl::check(cudaMemcpy(host.data(), device_bytes + offset, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
        writer.write(host.data(), n);
      }
    } catch (const flowdsl::CudaError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw InputError(e.what());
    }
    std::printf("wrote %s (%llu x %s)\n", path.c_str(), static_cast<unsigned long long>(b.count),
                std::string(flowdsl::to_string(b.type)).c_str());
  }
  return exit_ok;
}

struct ProfileOptions {
  int iterations = 20;
  std::string trace;  // Chrome trace-event JSON, if asked for
  std::string dot;    // the heat map, if asked for
  bool fuse = false;  // fuse runs of element-wise kernels whatever the file says
};

void write_text(const std::string& path, const std::string& text, const char* what) {
  std::ofstream stream(path, std::ios::binary);
  if (!(stream << text) || !stream.flush())
    throw InputError("cannot write the " + std::string(what) + " to " + flowdsl::quoted_name(path));
  std::printf("wrote %s %s\n", what, path.c_str());
}

// Launches the graph `n` times, one at a time, each between two events on `stream`: the spans
// (µs) in launch order. The first launch (which may instantiate) is not counted.
std::vector<double> event_spans(flowdsl::Runtime& runtime, const flowdsl::Graph& graph, cudaStream_t stream, int n) {
  using flowdsl::check;
  const flowdsl::EventHandle start = flowdsl::make_event();
  const flowdsl::EventHandle stop = flowdsl::make_event();
  runtime.launch(graph, stream);
  std::vector<double> spans;
  for (int i = 0; i < n; ++i) {
    check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    runtime.launch(graph, stream);
    check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
    spans.push_back(1000.0 * static_cast<double>(ms));
  }
  return spans;
}

// The node times of each profiled graph against the span measured with events before profiling.
void print_against_events(const flowdsl::Profile& profile, const std::vector<double>& unprofiled) {
  if (profile.graphs.size() != 1 || unprofiled.empty()) return;  // the reference timed one graph
  const flowdsl::GraphStatistics stats = flowdsl::statistics(profile, 0);
  std::vector<double> sums, profiled_events;
  for (const flowdsl::LaunchStatistics& l : stats.launches) {
    sums.push_back(l.node_sum_us);
    if (l.events_us) profiled_events.push_back(*l.events_us);
  }
  if (sums.empty()) return;
  const double events = flowdsl::cli::summarise(unprofiled).p50;
  const double node_sum = flowdsl::cli::summarise(sums).p50;
  std::printf("events around %zu launches before profiling: median %.2f us; the node times' median sum, %.2f us, is "
              "%.3f of it",
              unprofiled.size(), events, node_sum, node_sum / events);
  if (!profiled_events.empty()) {
    std::printf(" (under CUPTI the events read %.2f us)", flowdsl::cli::summarise(profiled_events).p50);
  }
  std::printf("\n");
}

// Launches the graph N times under the profiler; prints the table, writes the trace and the
// heat map when asked.
int profile(const std::string& file, const ProfileOptions& options) {
  const flowdsl::cli::LoadedFile loaded(file, host_functions(), options.fuse);
  flowdsl::RuntimeOptions runtime_options;
  runtime_options.registry = &loaded.registry();
  flowdsl::Runtime runtime(runtime_options);
  if (runtime.debug()) throw InputError("FLOWDSL_DEBUG is set: debug mode runs node by node, there is no graph launch to profile");
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  // The reference: the graph's span on the stream between two events, launch by launch, before
  // CUPTI is loaded (under the profiler, CUPTI's own work on each launch lies between the events).
  const std::vector<double> unprofiled = event_spans(runtime, loaded.graph(), stream.get(), options.iterations);
  flowdsl::ProfilerOptions profiler_options;
  profiler_options.registry = &loaded.registry();
  flowdsl::Profiler profiler(runtime, profiler_options);
  std::printf("profiling with CUPTI from %s\n", profiler.cupti_library().c_str());
  profiler.name(loaded.graph(), loaded.spec().name);
  for (int i = 0; i < options.iterations; ++i) profiler.launch(loaded.graph(), stream);
  const flowdsl::Profile& collected = profiler.collect();
  std::printf("\n%s", flowdsl::profile_table(collected).c_str());
  print_against_events(collected, unprofiled);
  if (!options.trace.empty()) write_text(options.trace, flowdsl::trace_json(collected), "trace");
  if (!options.dot.empty()) {
    const flowdsl::NodeTimings timings = profiler.timings(loaded.graph());
    const std::vector<flowdsl::Recording> recorded = flowdsl::recordings(runtime, loaded.graph());
    flowdsl::DotOptions dot_options;
    dot_options.registry = &loaded.registry();
    dot_options.timings = &timings;
    dot_options.recordings = &recorded;  // library nodes: what their calls recorded
    write_text(options.dot, flowdsl::to_dot(loaded.graph(), dot_options), "heat map");
  }
  return exit_ok;
}

std::string signature(const flowdsl::KernelInfo& kernel) {
  std::string params;
  for (const flowdsl::KernelParam& p : kernel.params) {
    params += (params.empty() ? "" : ", ") + flowdsl::to_string(p.type) + " " + p.name;
    if (!p.extent.empty()) params += "[" + p.extent + "]";  // the elements it touches
    for (std::size_t i = 0; i < p.enumerators.size(); ++i) params += (i == 0 ? " {" : ", ") + p.enumerators[i];
    if (!p.enumerators.empty()) params += "}";  // the names of its values
  }
  return params;
}

// The registered kernels, then the library calls, as the Markdown tables in docs/kernels.md (a
// test compares them). The NCCL collectives have their own page (docs/multi-gpu.md).
int kernel_table() {
  for (const bool calls : {false, true}) {
    std::printf("%s| %s | parameters | summary |\n| --- | --- | --- |\n", calls ? "\n" : "",
                calls ? "library call" : "kernel");
    for (const flowdsl::KernelInfo* k : flowdsl::KernelRegistry::global().list()) {
      if (k->is_call() != calls || k->name.rfind("nccl.", 0) == 0) continue;
      std::printf("| `%s` | `%s` | %s |\n", k->name.c_str(), signature(*k).c_str(), k->summary.c_str());
    }
  }
  return exit_ok;
}

int info(bool markdown) {
  if (markdown) return kernel_table();
  int runtime_version = 0, driver_version = 0, devices = 0;
  (void)cudaRuntimeGetVersion(&runtime_version);
  (void)cudaDriverGetVersion(&driver_version);
  std::printf("CUDA runtime %d.%d, driver supports up to %d.%d\n", runtime_version / 1000, runtime_version % 1000 / 10,
              driver_version / 1000, driver_version % 1000 / 10);
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("devices: none (%s)\n", status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
  }
  for (int d = 0; status == cudaSuccess && d < devices; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    std::printf("device %d: %s, compute capability %d.%d, %.1f GiB\n", d, p.name, p.major, p.minor,
                static_cast<double>(p.totalGlobalMem) / (1u << 30));
  }
  for (const bool calls : {false, true}) {
    std::printf("%s\n", calls ? "library calls (nodes of kind \"library\"):" : "registered kernels:");
    for (const flowdsl::KernelInfo* k : flowdsl::KernelRegistry::global().list()) {
      if (k->is_call() != calls) continue;
      std::printf("  %s(%s)%s%s\n", k->name.c_str(), signature(*k).c_str(), k->summary.empty() ? "" : "  -- ",
                  k->summary.c_str());
    }
  }
  return exit_ok;
}

int schema() {
  std::printf("%s\n", flowdsl::graph_file_schema().dump(2).c_str());
  return exit_ok;
}

void set_log_level(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("flowdsl", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_level(spdlog::level::from_str(level));
  flowdsl::set_logger(std::move(logger));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flowdsl: check, draw, run, benchmark and profile JSON graph descriptions as CUDA graphs.\n"
               "Exit codes: 0 ok, 1 invalid input, 2 environment (no device, old driver, no CUPTI), 3 internal error."};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "flowdsl's log level: trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  std::string file, out;
  RunOptions run_options;
  flowdsl::DotOptions dot_options;
  CLI::App* validate_cmd = app.add_subcommand("validate", "Check a graph file completely; no GPU needed");
  validate_cmd->add_option("FILE", file, "graph file (.json)")->required();
  bool validate_fuse = false;
  validate_cmd->add_flag("--fuse", validate_fuse,
                         "fuse runs of element-wise kernels (as \"fuse\": true) and print the groups and why kernels were left out");
  CLI::App* dot_cmd = app.add_subcommand("dot", "Write a graph file as Graphviz DOT; no GPU needed");
  dot_cmd->add_option("FILE", file, "graph file (.json)")->required();
  dot_cmd->add_option("-o,--output", out, "output file (default: standard output)");
  dot_cmd->add_flag("--args", dot_options.show_arguments,
                    "show kernel arguments and copy operands (pointers by buffer: input+256)");
  dot_cmd->add_flag("--data-flow", dot_options.data_flow,
                    "draw the buffers too, with an edge for each read (buffer -> node) and write (node -> buffer)");
  CLI::App* run_cmd = app.add_subcommand("run", "Allocate and initialise the buffers, run the graph N times");
  run_cmd->add_option("FILE", file, "graph file (.json)")->required();
  run_cmd->add_option("-n,--iterations", run_options.iterations, "number of launches")->check(CLI::Range(1, 1000000));
  run_cmd->add_option("--out", run_options.out_dir,
                      "folder to write the output buffers to, as <buffer>.npy (created if missing)");
  run_cmd->add_flag("--debug", run_options.debug,
                    "run node by node, checking each node for CUDA errors and NaN outputs (also FLOWDSL_DEBUG=1)");
  run_cmd->add_flag("--fuse", run_options.fuse, "fuse runs of element-wise kernels into one generated kernel each");
  run_cmd->add_flag("--explain", run_options.explain,
                    "say whether the first launch, and the one after the last, hits, updates or misses the cache");
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "Launch the graph again and again: latency percentiles, throughput, GPU busy, host time, memory");
  flowdsl::cli::BenchOptions bench_options;
  bench_cmd->add_option("FILE", file, "graph file (.json)")->required();
  bench_cmd->add_option("-n,--iterations", bench_options.iterations,
                        "launches measured one at a time, then as many back to back (default 1000)")
      ->check(CLI::Range(1, 1000000));
  bench_cmd->add_option("--warmup", bench_options.warmup,
                        "launches before measuring; the first instantiates the executable (default 10)")
      ->check(CLI::Range(1, 1000000));
  bench_cmd->add_flag("--fuse", bench_options.fuse, "fuse runs of element-wise kernels into one generated kernel each");
  bench_cmd->add_option("--json", bench_options.json_out,
                        "write every figure, with the GPU and the driver and runtime versions, to this JSON file");
  CLI::App* profile_cmd =
      app.add_subcommand("profile", "Run the graph N times under CUPTI: per-node GPU times, a trace and a heat map");
  ProfileOptions profile_options;
  profile_cmd->add_option("FILE", file, "graph file (.json)")->required();
  profile_cmd->add_option("-n,--iterations", profile_options.iterations, "number of launches (default 20)")
      ->check(CLI::Range(1, 100000));
  profile_cmd->add_flag("--fuse", profile_options.fuse, "fuse runs of element-wise kernels into one generated kernel each");
  profile_cmd->add_option("--trace", profile_options.trace,
                          "write a Chrome trace-event JSON file (Perfetto, chrome://tracing)");
  profile_cmd->add_option("--dot", profile_options.dot,
                          "write the graph as a Graphviz heat map of GPU time, critical path in red");
  CLI::App* info_cmd = app.add_subcommand("info", "Devices, CUDA versions, registered kernels");
  bool markdown = false;
  info_cmd->add_flag("--markdown", markdown, "only the registered kernels, as the Markdown table of docs/kernels.md");
  CLI::App* schema_cmd = app.add_subcommand("schema", "The JSON Schema of graph files (docs/flowdsl.schema.json)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_invalid;
  }
  set_log_level(log_level);

  try {
    flowdsl::kernels::register_builtins(flowdsl::KernelRegistry::global());
#ifdef FLOWDSL_HAS_NCCL
    // Under mpirun, srun or torchrun each process reads the file as its rank ({"expr": ...}) and
    // runs it on its own GPU with communicator 0.
    flowdsl::nccl::register_calls(flowdsl::KernelRegistry::global());
    const flowdsl::nccl::Bootstrap bootstrap = flowdsl::nccl::bootstrap_from_environment();
    flowdsl::cli::file_ranks() = {static_cast<std::uint64_t>(bootstrap.rank), static_cast<std::uint64_t>(bootstrap.world)};
    std::optional<flowdsl::nccl::Communicator> comm;
    if (run_cmd->parsed() || bench_cmd->parsed() || profile_cmd->parsed()) comm = communicator_for(file, bootstrap);
#endif
    if (validate_cmd->parsed()) return validate(file, validate_fuse);
    if (dot_cmd->parsed()) return dot(file, out, dot_options);
    if (run_cmd->parsed()) return run(file, run_options);
    if (bench_cmd->parsed()) {
      flowdsl::cli::bench(file, host_functions(), bench_options);
      return exit_ok;
    }
    if (profile_cmd->parsed()) return profile(file, profile_options);
    if (info_cmd->parsed()) return info(markdown);
    if (schema_cmd->parsed()) return schema();
  } catch (const EnvironmentError& e) {
    std::fprintf(stderr, "flowdsl: %s\n", e.what());
    return exit_environment;
  } catch (const flowdsl::ProfilerError& e) {  // CUPTI cannot be loaded or used here
    std::fprintf(stderr, "%s\n", e.what());
    return exit_environment;
  } catch (const flowdsl::JsonError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_invalid;
  } catch (const flowdsl::ValidationError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_invalid;
  } catch (const InputError& e) {
    std::fprintf(stderr, "flowdsl: %s\n", e.what());
    return exit_invalid;
  } catch (const flowdsl::DebugError& e) {  // a node of the file at fault
    std::fprintf(stderr, "%s\n", e.what());
    return exit_invalid;
#ifdef FLOWDSL_HAS_NCCL
  } catch (const flowdsl::nccl::NcclError& e) {  // NCCL refused (a peer missing, a network down)
    std::fprintf(stderr, "%s\n", e.what());
    return exit_environment;
#endif
  } catch (const flowdsl::CudaError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    const bool environment = e.code() == cudaErrorMemoryAllocation || e.code() == cudaErrorInsufficientDriver ||
                             e.code() == cudaErrorNoDevice;
    return environment ? exit_environment : exit_internal;
  } catch (const flowdsl::UsageError& e) {  // a launcher variable or NCCL id address that makes no sense
    std::fprintf(stderr, "%s\n", e.what());
    return exit_invalid;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flowdsl: internal error: %s\n", e.what());
    return exit_internal;
  }
  return exit_internal;
}
