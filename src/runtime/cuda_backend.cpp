// The CUDA backend: executables made by the emitter, updated node by node, launched on streams.
#include <algorithm>
#include <string>

#include "lower/emit.hpp"
#include "flowdsl/runtime.hpp"

namespace flowdsl {
namespace {

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(lowering::Emitted emitted, NativeExecutable exec)
      : graph_(std::move(emitted.graph)),
        nodes_(std::move(emitted.nodes)),
        values_(std::move(emitted.values)),
        exec_(std::move(exec)) {}

  std::optional<std::string> update(const Description& d, const Plan& plan, NodeId id) override {
    const lowering::UpdateStatus status =
        lowering::update(d, plan, id, exec_.get(), nodes_[plan.position[id]], values_);
    if (status.code == cudaSuccess) return std::nullopt;
    (void)cudaGetLastError();
    if (status.reason != nullptr) return std::string(status.reason);
    return std::string(status.call) + " returned " + cudaGetErrorName(status.code) + " (" +
           cudaGetErrorString(status.code) + ")";
  }

  void launch(cudaStream_t stream) override { check(cudaGraphLaunch(exec_.get(), stream), "cudaGraphLaunch"); }

 private:
  NativeGraph graph_;  // kept: per-node updates name nodes of the graph the executable came from
  std::vector<cudaGraphNode_t> nodes_;  // by plan position
  std::vector<std::uint64_t> values_;   // what symbols stand for, by plan position
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

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    device_.limits = lowering::query_device_limits(device);
  }

  std::unique_ptr<Executable> instantiate(const Description& d, const Plan& plan, cudaStream_t stream) override {
    lowering::Emitted emitted = lowering::emit(d, plan, device_);
    cudaGraphInstantiateParams params{};
    params.flags = cudaGraphInstantiateFlagUpload;
    params.uploadStream = stream;
    cudaGraphExec_t exec = nullptr;
    const cudaError_t code = cudaGraphInstantiateWithParams(&exec, emitted.graph.get(), &params);
    NativeExecutable owned(exec);
    if (code != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
      check(code != cudaSuccess ? code : cudaErrorInvalidValue, "cudaGraphInstantiateWithParams",
            culprit(d, plan, emitted, params.errNode_out).c_str());
    }
    return std::make_unique<CudaExecutable>(std::move(emitted), std::move(owned));
  }

 private:
  lowering::DeviceContext device_;  // limits, and kernel attributes learnt while emitting
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace flowdsl
