// SPDX-License-Identifier: Apache-2.0
// `flowdsl bench FILE`: a graph file's graph launched again and again, measured from the host
// (steady_clock) and on the stream (CUDA events).
#include "bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "bench_stats.hpp"
#include "buffers.hpp"
#include "loaded_file.hpp"

namespace flowdsl::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double microseconds(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Says on stderr how far a run is, every 2 s once it has taken 2 s (short runs say nothing).
class Progress {
 public:
  Progress(const char* run, int total) : run_(run), total_(total), start_(Clock::now()), next_(start_ + every) {}
  void done(int launches) {
    const Clock::time_point now = Clock::now();
    if (now < next_) return;
    std::fprintf(stderr, "bench: %s: %d of %d launches (%.0f s)\n", run_, launches, total_,
                 std::chrono::duration<double>(now - start_).count());
    next_ = now + every;
  }

 private:
  static constexpr std::chrono::seconds every{2};
  const char* run_;
  int total_;
  Clock::time_point start_;
  Clock::time_point next_;
};

// The CUDA backend, measuring the device memory each executable takes: the free memory
// cudaMemGetInfo reports before instantiation and after the upload, less what the graph
// memory pool reserved meanwhile. Kernel code that CUDA loads lazily while the executable is
// made counts too; cudaMemGetInfo sees memory in pages (2 MiB), so small executables may read 0.
class MeasuringBackend : public Backend {
 public:
  explicit MeasuringBackend(int device) : inner_(make_cuda_backend()), device_(device) {}

  std::unique_ptr<Executable> instantiate(const Description& description, const Plan& plan,
                                          cudaStream_t stream) override {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const std::size_t free_before = free_memory();
    const std::uint64_t pool_before = graph_memory(device_).reserved;
    std::unique_ptr<Executable> executable = inner_->instantiate(description, plan, stream);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // the upload is done
    const std::size_t free_after = free_memory();
    const std::uint64_t pool_after = graph_memory(device_).reserved;
    const std::uint64_t taken = free_before > free_after ? free_before - free_after : 0;
    const std::uint64_t pool = pool_after > pool_before ? pool_after - pool_before : 0;
    executable_bytes_ += taken > pool ? taken - pool : 0;
    ++executables_;
    return executable;
  }

  std::uint64_t executable_bytes() const noexcept { return executable_bytes_; }
  int executables() const noexcept { return executables_; }

 private:
  static std::size_t free_memory() {
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return free_bytes;
  }

  std::unique_ptr<Backend> inner_;
  int device_;
  std::uint64_t executable_bytes_ = 0;
  int executables_ = 0;
};

// "13.0" from CUDA's 13000.
std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

json device_json(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  return {{"index", device},
          {"name", std::string(p.name)},
          {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"multiprocessors", p.multiProcessorCount},
          {"memory_bytes", p.totalGlobalMem},
          {"driver_version", version_text(driver)},
          {"runtime_version", version_text(runtime)}};
}

// The times of one launch run.
struct Run {
  std::vector<double> host_us;     // the launch call alone
  std::vector<double> span_us;     // from an event recorded before the launch to one recorded after it
  std::vector<double> latency_us;  // launch call to the end of the stream's synchronisation (one at a time)
  double wall_s = 0;               // back to back: from the first launch call to the end of the one sync
  int other_than_hits = 0;         // launches that updated or instantiated (a graph that does not change: 0)
};

float elapsed_ms(const EventHandle& start, const EventHandle& stop) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
  return ms;
}

// Launches one at a time: each launch call timed, then the stream synchronised.
Run latency_run(Runtime& runtime, const Graph& graph, cudaStream_t stream, int iterations) {
  Run run;
  run.host_us.reserve(iterations);
  run.latency_us.reserve(iterations);
  run.span_us.reserve(iterations);
  const EventHandle start = make_event();
  const EventHandle stop = make_event();
  Progress progress("latency run", iterations);
  for (int i = 0; i < iterations; ++i) {
    check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    const Clock::time_point t0 = Clock::now();
    const LaunchReport report = runtime.launch(graph, stream);
    const Clock::time_point t1 = Clock::now();
    check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const Clock::time_point t2 = Clock::now();
    run.host_us.push_back(microseconds(t1 - t0));
    run.latency_us.push_back(microseconds(t2 - t0));
    run.span_us.push_back(1000.0 * elapsed_ms(start, stop));
    run.other_than_hits += report.kind != LaunchKind::hit;
    progress.done(i + 1);
  }
  return run;
}

// Launches back to back, synchronised once at the end. Each launch sits between two events of
// a ring; a slot is read (waiting for its launch, `ring` launches back, to end) before it is
// recorded again, so the stream stays fed and the host holds a bounded number of events.
Run back_to_back_run(Runtime& runtime, const Graph& graph, cudaStream_t stream, int iterations) {
  constexpr int ring = 256;
  std::vector<std::pair<EventHandle, EventHandle>> events;
  for (int i = 0; i < std::min(ring, iterations); ++i) events.emplace_back(make_event(), make_event());
  Run run;
  run.host_us.reserve(iterations);  // no reallocation among the launches
  run.span_us.reserve(iterations);
  const auto read = [&](int slot) {
    check(cudaEventSynchronize(events[slot].second.get()), "cudaEventSynchronize");
    run.span_us.push_back(1000.0 * elapsed_ms(events[slot].first, events[slot].second));
  };
  Progress progress("back-to-back run", iterations);
  const Clock::time_point begin = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    const int slot = i % ring;
    if (i >= ring) read(slot);
    check(cudaEventRecord(events[slot].first.get(), stream), "cudaEventRecord");
    const Clock::time_point t0 = Clock::now();
    const LaunchReport report = runtime.launch(graph, stream);
    run.host_us.push_back(microseconds(Clock::now() - t0));
    check(cudaEventRecord(events[slot].second.get(), stream), "cudaEventRecord");
    run.other_than_hits += report.kind != LaunchKind::hit;
    progress.done(i + 1);
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  run.wall_s = std::chrono::duration<double>(Clock::now() - begin).count();
  for (int i = std::max(0, iterations - ring); i < iterations; ++i) read(i % ring);
  return run;
}

json graph_memory_json(const GraphMemory& m) {
  return {{"used", m.used}, {"used_high", m.used_high}, {"reserved", m.reserved}, {"reserved_high", m.reserved_high}};
}

void print_summary(const char* what, const Summary& s) {
  std::printf("%-34s p50 %9.2f us   p90 %9.2f us   p99 %9.2f us   (min %.2f, max %.2f)\n", what, s.p50, s.p90, s.p99,
              s.min, s.max);
}

}  // namespace

void bench(const std::string& file, const HostFunctions& hosts, const BenchOptions& options) {
  const LoadedFile loaded(file, hosts, options.fuse);
  const GraphSpec& spec = loaded.spec();
  const int device = loaded.device();
  const json device_info = device_json(device);

  RuntimeOptions runtime_options;
  runtime_options.registry = &loaded.registry();
  auto backend = std::make_unique<MeasuringBackend>(device);
  const MeasuringBackend& measured = *backend;
  Runtime runtime(runtime_options, std::move(backend));
  if (runtime.debug()) {
    std::fprintf(stderr,
                 "bench: FLOWDSL_DEBUG=1: launches run node by node, checked after each node; these are "
                 "not the figures of graph launches\n");
  }
  const StreamHandle stream = make_stream();

  std::printf("%s: %zu buffers (%s) on device %d, %s (driver %s, runtime %s)\n", spec.name.c_str(), spec.buffers.size(),
              format_bytes(loaded.buffer_bytes()).c_str(), device, device_info.at("name").get<std::string>().c_str(),
              device_info.at("driver_version").get<std::string>().c_str(),
              device_info.at("runtime_version").get<std::string>().c_str());

  // Warm-up: the first launch validates, emits, instantiates and uploads the executable.
  const Clock::time_point first = Clock::now();
  runtime.launch(loaded.graph(), stream.get());
  const double first_launch_us = microseconds(Clock::now() - first);
  for (int i = 1; i < options.warmup; ++i) runtime.launch(loaded.graph(), stream.get());
  check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");

  const Run one_by_one = latency_run(runtime, loaded.graph(), stream.get(), options.iterations);
  const Run back_to_back = back_to_back_run(runtime, loaded.graph(), stream.get(), options.iterations);
  const GraphMemory pool = graph_memory(device);

  const Summary latency = summarise(one_by_one.latency_us);
  const Summary span = summarise(one_by_one.span_us);
  const Summary host = summarise(one_by_one.host_us);
  const Summary host_back_to_back = summarise(back_to_back.host_us);
  double busy_s = 0;
  for (double us : back_to_back.span_us) busy_s += us / 1e6;
  const double launches_per_s = options.iterations / back_to_back.wall_s;
  const double busy_fraction = busy_s / back_to_back.wall_s;
  const int other_than_hits = one_by_one.other_than_hits + back_to_back.other_than_hits;

  std::printf("warm-up: %d launches; the first (validate, emit, instantiate, upload) took %.1f us on the host\n",
              options.warmup, first_launch_us);
  std::printf("%d launches, one at a time:\n", options.iterations);
  print_summary("  latency (launch to sync'd)", latency);
  print_summary("  span on the stream (events)", span);
  print_summary("  host time of the launch call", host);
  std::printf("%d launches back to back, one sync at the end: %.3f s\n", options.iterations, back_to_back.wall_s);
  std::printf("  throughput %.0f launches/s", launches_per_s);
  if (spec.items_per_launch != 0) {
    std::printf(", %.0f items/s (%llu items per launch)", launches_per_s * static_cast<double>(spec.items_per_launch),
                static_cast<unsigned long long>(spec.items_per_launch));
  }
  std::printf("; GPU busy %.1f%% (event spans / wall time)\n", 100.0 * busy_fraction);
  print_summary("  host time of the launch call", host_back_to_back);
  std::printf(
      "device memory: buffers %s; executables %s (%d, cudaMemGetInfo around instantiation); graph memory "
      "%s reserved (at most %s), %s in use at most\n",
      format_bytes(loaded.buffer_bytes()).c_str(), format_bytes(measured.executable_bytes()).c_str(),
      measured.executables(), format_bytes(pool.reserved).c_str(), format_bytes(pool.reserved_high).c_str(),
      format_bytes(pool.used_high).c_str());
  if (other_than_hits != 0) {
    std::printf("note: %d measured launches were not cache hits (updates or instantiations)\n", other_than_hits);
  }

  if (options.json_out.empty()) return;
  json throughput = {{"launches", options.iterations},
                     {"wall_s", back_to_back.wall_s},
                     {"launches_per_s", launches_per_s},
                     {"gpu_busy_fraction", busy_fraction},
                     {"span_us", summarise(back_to_back.span_us)},
                     {"host_launch_us", host_back_to_back}};
  if (spec.items_per_launch != 0) {
    throughput["items_per_launch"] = spec.items_per_launch;
    throughput["items_per_s"] = launches_per_s * static_cast<double>(spec.items_per_launch);
  }
  const RuntimeStatistics s = runtime.statistics();
  const json report = {{"file", file},
                       {"graph", spec.name},
                       {"iterations", options.iterations},
                       {"warmup", options.warmup},
                       {"debug", runtime.debug()},
                       {"device", device_info},
                       {"first_launch_us", first_launch_us},
                       {"latency_us", latency},
                       {"span_us", span},
                       {"host_launch_us", host},
                       {"throughput", throughput},
                       {"memory",
                        {{"buffers_bytes", loaded.buffer_bytes()},
                         {"executables", measured.executables()},
                         {"executables_bytes", measured.executable_bytes()},
                         {"graph_memory", graph_memory_json(pool)}}},
                       {"launches_other_than_hits", other_than_hits},
                       {"cache",
                        {{"launches", s.launches},
                         {"hits", s.hits},
                         {"misses", s.misses},
                         {"node_updates", s.node_updates},
                         {"reinstantiations", s.reinstantiations}}}};
  std::ofstream out(options.json_out, std::ios::binary);
  if (!(out << report.dump(2) << "\n")) throw InputError("cannot write " + quoted_name(options.json_out));
  std::printf("wrote %s\n", options.json_out.c_str());
}

}  // namespace flowdsl::cli
