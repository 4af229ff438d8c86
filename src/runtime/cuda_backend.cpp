// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: executables made by the emitter, updated node by node, launched on streams.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "flowdsl/kind_traits.hpp"
#include "flowdsl/runtime.hpp"
#include "log_internal.hpp"
#include "lower/driver_calls.hpp"
#include "lower/emit.hpp"
#include "lower/graph_memory.hpp"

namespace flowdsl {
namespace {

class CudaExecutable final : public Executable {
 public:
  /// `unfreed`: the addresses of graph memory no free node of it releases.
  CudaExecutable(lowering::Emitted emitted, NativeExecutable exec, std::vector<void*> unfreed,
                 std::uint64_t device_memory)
      : handle_(exec.get()),
        leaves_memory_(!unfreed.empty()),
        graph_(std::move(emitted.graph)),
        nodes_(std::move(emitted.nodes)),
        functions_(std::move(emitted.functions)),
        context_(emitted.context),
        values_(std::move(emitted.values)),
        unfreed_(std::move(unfreed)),
        device_memory_(device_memory),
        exec_(std::move(exec)) {}

  ~CudaExecutable() override { release_unfreed(); }
  CudaExecutable(const CudaExecutable&) = delete;
  CudaExecutable& operator=(const CudaExecutable&) = delete;

  std::optional<std::string> update(const Description& d, const Plan& plan, NodeId id) override {
    const std::uint32_t position = plan.position[id];
    // The driver's call only where the handles' context is this thread's (driver_calls.hpp).
    cudaFunction_t function = functions_[position];
    if (function != nullptr && lowering::current_context() != context_) function = nullptr;
    const lowering::UpdateStatus status = lowering::update(d, plan, id, exec_.get(), nodes_[position], function, values_);
    if (status.code == cudaSuccess) return std::nullopt;
    (void)cudaGetLastError();
    if (!status.reason.empty()) return status.reason;
    return std::string(status.call) + " returned " + cudaGetErrorName(status.code) + " (" +
           cudaGetErrorString(status.code) + ")";
  }

  const std::vector<cudaGraphNode_t>* native_nodes() const noexcept override { return &nodes_; }
  cudaGraphExec_t native_executable() const noexcept override { return exec_.get(); }
  cudaGraphExec_t direct_launch() const noexcept override { return leaves_memory_ ? nullptr : handle_; }
  std::uint64_t device_memory() const noexcept override { return device_memory_; }

  void launch(cudaStream_t stream) override {
    check(cudaGraphLaunch(handle_, stream), "cudaGraphLaunch");
    if (!leaves_memory_) return;
    launched_ = true;
    record_end(stream);
  }

  void mark_end(cudaStream_t stream) override {
    if (!leaves_memory_) record_end(stream);  // else launch() did
  }

  bool ended() const override {
    if (!last_launch_) return true;
    const cudaError_t status = cudaEventQuery(last_launch_.get());
    if (status == cudaErrorNotReady) return false;  // still running: a state, not a failure
    check(status, "cudaEventQuery");
    return true;
  }

 private:
  // Each launch frees what the one before left (cudaGraphInstantiateFlagAutoFreeOnLaunch), but
  // destroying the executable frees nothing: the last launch's memory is freed on a stream of its
  // own once that launch is done, without blocking the host.
  void release_unfreed() noexcept {
    if (!launched_) return;
    try {
      const StreamHandle stream = make_stream();
      check(cudaStreamWaitEvent(stream.get(), last_launch_.get(), 0), "cudaStreamWaitEvent");
      for (void* memory : unfreed_) check(cudaFreeAsync(memory, stream.get()), "cudaFreeAsync");
    } catch (const CudaError& e) {
      detail::log().warn("graph memory left by an executable was not freed: {}", e.what());
    }
  }

  // Records the end of the launch just enqueued on `stream`, in an event made on first use.
  void record_end(cudaStream_t stream) {
    if (!last_launch_) last_launch_ = make_event(cudaEventDisableTiming);
    check(cudaEventRecord(last_launch_.get(), stream), "cudaEventRecord");
  }

  // What a launch reads, beside the vtable's pointer (a hit launch runs on caches a
  // synchronisation may have emptied): exec_'s handle, and whether unfreed_ holds anything.
  cudaGraphExec_t handle_;
  bool leaves_memory_;
  NativeGraph graph_;  // kept: per-node updates name nodes of the graph the executable came from
  std::vector<cudaGraphNode_t> nodes_;  // by plan position
  std::vector<cudaFunction_t> functions_;  // kernels' driver handles, by plan position
  CUcontext context_;                      // the context they belong to
  std::vector<std::uint64_t> values_;   // what symbols stand for, by plan position
  std::vector<void*> unfreed_;          // graph memory no free node releases
  EventHandle last_launch_;  // recorded after each launch when unfreed_ is not empty, or when marked
  bool launched_ = false;
  std::uint64_t device_memory_;
  NativeExecutable exec_;  // declared last, destroyed first
};

// The path of the node CUDA blamed, or empty.
std::string culprit(const Description& d, const Plan& plan, const lowering::Emitted& emitted, cudaGraphNode_t native) {
  const auto it = std::find(emitted.nodes.begin(), emitted.nodes.end(), native);
  if (native == nullptr || it == emitted.nodes.end()) return {};
  const auto position = static_cast<std::uint32_t>(it - emitted.nodes.begin());
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (plan.position[id] == position) return node_path(d, id);
  }
  return {};
}

// Graphs of at least this many nodes, every one of a kind CUDA allows in a graph made for device
// launch, are instantiated for it: their launch from the host then costs far less (measured on
// an H200: 11.5 against 114 µs for a chain of 10 000 kernels, 29 against 51 µs for 8 chains of
// 1250), while smaller graphs launch faster the ordinary way (4.3 against 3.1 µs at 1000 kernels).
constexpr std::size_t device_launch_min_nodes = 2000;

bool wants_device_launch(const Description& d) {
  if (d.nodes.size() < device_launch_min_nodes) return false;
  for (const Node& n : d.nodes) {
    if (!is_device_launchable(n.op)) return false;
  }
  return true;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    device_.limits = lowering::query_device_limits(device);
  }

  std::unique_ptr<Executable> instantiate(const Description& d, const Plan& plan, cudaStream_t stream) override {
    const std::size_t free_before = free_memory();
    lowering::Emitted emitted = lowering::emit(d, plan, device_);
    std::vector<void*> unfreed;
    if (plan.graph_memory) {
      for (std::uint32_t position : lowering::unfreed_allocs(d, plan)) {
        unfreed.push_back(reinterpret_cast<void*>(static_cast<std::uintptr_t>(emitted.values[position])));
      }
    }
    // Memory no free node releases is freed by the next launch; without the flag, that launch fails.
    const unsigned long long flags =
        cudaGraphInstantiateFlagUpload | (unfreed.empty() ? 0 : cudaGraphInstantiateFlagAutoFreeOnLaunch);
    cudaGraphInstantiateParams params{};
    auto instantiate_with = [&](unsigned long long with) {
      params = {};
      params.flags = with;
      params.uploadStream = stream;
      cudaGraphExec_t exec = nullptr;
      cudaError_t code = cudaGraphInstantiateWithParams(&exec, emitted.graph.get(), &params);
      NativeExecutable owned(exec);
      if (code == cudaSuccess && params.result_out != cudaGraphInstantiateSuccess) code = cudaErrorInvalidValue;
      if (code != cudaSuccess) owned.reset();
      return std::pair(code, std::move(owned));
    };
    cudaError_t code = cudaErrorInvalidValue;
    NativeExecutable owned;
    if (unfreed.empty() && wants_device_launch(d)) {
      std::tie(code, owned) = instantiate_with(flags | cudaGraphInstantiateFlagDeviceLaunch);
      if (code != cudaSuccess) {
        // CUDA's rules for such graphs go beyond node kinds (a copy must not touch pageable
        // host memory, for one): the executable is made the ordinary way instead.
        FLOWDSL_DEBUG("{} nodes: not instantiable for device launch ({}), instantiated for the host only",
                      d.nodes.size(), cudaGetErrorName(code));
        (void)cudaGetLastError();
      }
    }
    if (code != cudaSuccess) std::tie(code, owned) = instantiate_with(flags);
    if (code != cudaSuccess) {
      check(code, "cudaGraphInstantiateWithParams", culprit(d, plan, emitted, params.errNode_out).c_str());
    }
    // Graph memory is mapped by the upload, which runs on the stream: waited for, so that it counts
    // (only such executables pay for the wait).
    if (plan.graph_memory) check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const std::size_t free_after = free_memory();
    const std::uint64_t took = free_before > free_after ? free_before - free_after : 0;
    return std::make_unique<CudaExecutable>(std::move(emitted), std::move(owned), std::move(unfreed), took);
  }

 private:
  static std::size_t free_memory() {
    std::size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return free;
  }

  lowering::DeviceContext device_;  // limits, and kernel attributes learnt while emitting
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace flowdsl
