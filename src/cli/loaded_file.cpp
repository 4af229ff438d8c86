// SPDX-License-Identifier: Apache-2.0
// A graph file made ready to launch on the current device (flowdsl run, flowdsl bench).
#include "loaded_file.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "flowdsl/kernel_files.hpp"

namespace flowdsl::cli {

std::string folder_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash == 0 ? 1 : slash);
}

JsonRanks& file_ranks() {
  static JsonRanks ranks;
  return ranks;
}

GraphSpec checked_spec(const std::string& file, const HostFunctions& hosts) {
  GraphSpec spec = read_graph_file(file, {}, file_ranks());
  check_graph(spec, KernelRegistry::global(), hosts, file);
  // The files the graph names: what run would refuse, validate refuses too, before any is read;
  // only a kernel file that does not exist passes here (the kernels may be built elsewhere).
  const std::string base = folder_of(file);
  std::vector<JsonProblem> problems = check_kernel_files(spec, base, true);
  for (std::size_t i = 0; i < spec.buffers.size(); ++i) {
    try {
      check_initial_contents(spec.buffers[i], base);
    } catch (const std::runtime_error& e) {
      problems.push_back(
          {"/buffers/" + std::to_string(i) + "/init", "buffer " + quoted_name(spec.buffers[i].name) + ": " + e.what()});
    }
  }
  if (!problems.empty()) throw JsonError(std::move(problems), file);
  return spec;
}

void require_device() {
  int devices = 0, driver = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  (void)cudaDriverGetVersion(&driver);  // 0 when no driver is installed at all
  if (status == cudaErrorInsufficientDriver && driver > 0) {
    throw EnvironmentError("the installed CUDA driver is too old for this build of flowdsl (CUDA runtime " +
                           std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
                           "); update the driver to run graphs.");
  }
  if (status != cudaSuccess || devices == 0) {
    throw EnvironmentError(
        "no CUDA device is available, so graphs cannot be run here (validate and dot work without one).");
  }
}

namespace {
using Clock = std::chrono::steady_clock;
// Milliseconds since `start`, and `start` moved to now: the time of the phase just ended.
double lap(Clock::time_point& start) {
  const Clock::time_point now = Clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - start).count();
  start = now;
  return ms;
}
}  // namespace

LoadedFile::LoadedFile(const std::string& file, const HostFunctions& hosts, bool fuse)
    : spec_([&] {
        Clock::time_point start = Clock::now();
        GraphSpec spec = checked_spec(file, hosts);
        phases_.read_check = lap(start);
        return spec;
      }()) {
  Clock::time_point start = Clock::now();
  spec_.fuse = spec_.fuse || fuse;
  if (spec_.fuse) prepare_fused_kernel_compiler();  // NVRTC starts while the device and buffers are made
  // The file's problems first, the missing kernel files among them: invalid input is reported
  // as such on any machine.
  const std::string base = folder_of(file);
  if (std::vector<JsonProblem> problems = check_kernel_files(spec_, base); !problems.empty()) {
    throw JsonError(std::move(problems), file);
  }
  require_device();

  // Kernels from files go into a registry that lives no longer than their libraries.
  for (const KernelInfo* info : KernelRegistry::global().list()) registry_.add(*info);
  libraries_ = load_kernel_files(spec_, base, registry_);

  // Refuse before allocating or reading anything: the buffers must fit in the device's free
  // memory (checked_spec has checked the .npy headers against their buffers).
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaGetDevice(&device_), "cudaGetDevice");
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (auto refusal = memory_refusal(spec_, free_bytes, device_)) throw EnvironmentError(*refusal);
  phases_.device += lap(start);
  for (const BufferSpec& b : spec_.buffers) {
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, b.bytes()), ("cudaMalloc for buffer " + quoted_name(b.name)).c_str());
    memory_.emplace_back(ptr);
    phases_.allocate += lap(start);
    auto* device_bytes = static_cast<unsigned char*>(ptr);
    try {
      produce_initial_contents(
          b, base, staging_bytes, [&](const unsigned char* data, std::size_t bytes, std::uint64_t offset) {
            check(cudaMemcpy(device_bytes + offset, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
          });
    } catch (const CudaError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw InputError("buffer " + quoted_name(b.name) + ": " + e.what());
    }
    addresses_.emplace(b.name, ptr);
    buffer_bytes_ += b.bytes();
    if (b.init.kind != BufferInit::Kind::zeros) phases_.uploaded_bytes += b.bytes();
    phases_.upload += lap(start);
  }

  // One event for each name the file's event nodes use: they order the graph's launches with
  // one another.
  Externals externals(hosts);
  for (const std::string& name : event_names(spec_)) {
    events_.push_back(make_event(cudaEventDisableTiming));
    externals.events.emplace(name, events_.back().get());
  }
  graph_ = bind_graph(spec_, addresses_, registry_, externals, file);
  phases_.bind = lap(start);
}

}  // namespace flowdsl::cli
