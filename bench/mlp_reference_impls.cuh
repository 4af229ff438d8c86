// SPDX-License-Identifier: Apache-2.0
// The serving sample's MLP by hand, for benchmarks against flowdsl: cuBLASLt epilogues in a captured CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mlp_bench {

using bf16 = __nv_bfloat16;

/// \brief Throws std::runtime_error("<call> failed: <cudaError_t name>") unless `code` is cudaSuccess.
inline void check_cuda(cudaError_t code, const char* call) {
  if (code != cudaSuccess) throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(code));
}

/// \brief Throws std::runtime_error("<call> failed: <cublasStatus_t name>") unless `code` is CUBLAS_STATUS_SUCCESS.
inline void check_cublas(cublasStatus_t code, const char* call) {
  if (code != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + cublasLtGetStatusName(code));
}

/// \brief Owns one handle, destroyed with `Destroy` (a CUDA or cuBLASLt destroy function).
///
/// Move-only; a move leaves null behind; the destructor ignores the destroy call's status
/// (there is nothing a destructor could do about it).
template <class Handle, auto Destroy>
class Unique {
 public:
  Unique() noexcept = default;
  /// \brief Takes ownership of `handle` (may be null).
  explicit Unique(Handle handle) noexcept : handle_(handle) {}
  Unique(const Unique&) = delete;
  Unique& operator=(const Unique&) = delete;
  Unique(Unique&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  Unique& operator=(Unique&& other) noexcept {
    reset(std::exchange(other.handle_, Handle{}));
    return *this;
  }
  ~Unique() { reset(); }

  Handle get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != Handle{}; }
  /// \brief Destroys the handle held, if any, and takes `handle`.
  void reset(Handle handle = Handle{}) noexcept {
    if (Handle old = std::exchange(handle_, handle)) (void)Destroy(old);
  }

 private:
  Handle handle_{};
};

/// \brief Device memory (cudaMalloc: aligned to at least 256 bytes, as cuBLASLt's default
/// heuristics assume).
struct DeviceMemory {
  static constexpr const char* allocate_call = "cudaMalloc";
  static cudaError_t allocate(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
  static cudaError_t deallocate(void* p) { return cudaFree(p); }
};

/// \brief Pinned host memory (cudaMallocHost), which a captured copy may read or write.
struct PinnedMemory {
  static constexpr const char* allocate_call = "cudaMallocHost";
  static cudaError_t allocate(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
  static cudaError_t deallocate(void* p) { return cudaFreeHost(p); }
};

/// \brief `count` elements of T in the memory `Memory` allocates, uninitialised.
template <class T, class Memory>
class Buffer {
 public:
  Buffer() noexcept = default;
  /// \throws std::runtime_error when the allocation fails
  explicit Buffer(std::size_t count) : count_(count) {
    void* p = nullptr;
    check_cuda(Memory::allocate(&p, count * sizeof(T)), Memory::allocate_call);
    memory_.reset(p);
  }
  Buffer(Buffer&& other) noexcept : memory_(std::move(other.memory_)), count_(std::exchange(other.count_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    memory_ = std::move(other.memory_);
    count_ = std::exchange(other.count_, 0);
    return *this;
  }

  T* get() const noexcept { return static_cast<T*>(memory_.get()); }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

 private:
  Unique<void*, &Memory::deallocate> memory_;
  std::size_t count_ = 0;
};

template <class T>
using DeviceBuffer = Buffer<T, DeviceMemory>;
template <class T>
using PinnedBuffer = Buffer<T, PinnedMemory>;

/// \brief A device copy of `host` (a synchronous cudaMemcpy).
/// \throws std::runtime_error on a CUDA failure
template <class T>
DeviceBuffer<T> device_copy(const std::vector<T>& host) {
  DeviceBuffer<T> d(host.size());
  check_cuda(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

/// \brief `v` rounded to bfloat16, to nearest even.
inline std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

/// \brief The MLP's parameters on the device. Layer l computes x * weights[l] + biases[l], with
/// weights[l] row-major [widths[l]][widths[l + 1]] in bfloat16 and biases[l] widths[l + 1] floats;
/// biases16[l] is biases[l] rounded to bfloat16, the bias a bfloat16 output's epilogue takes
/// (cuBLASLt's bias has the output's type).
struct MlpWeights {
  std::vector<int> widths;  // input width, hidden widths..., classes
  std::vector<DeviceBuffer<bf16>> weights;
  std::vector<DeviceBuffer<float>> biases;
  std::vector<DeviceBuffer<bf16>> biases16;

  int layers() const noexcept { return static_cast<int>(widths.size()) - 1; }
  int classes() const noexcept { return widths.back(); }
};

/// \brief Uploads an MLP given as host floats (the serving sample's HostModel: widths, weights
/// row-major [k][n], biases [n]); the weights are rounded to bfloat16.
/// \throws std::invalid_argument when a width is not positive, fewer than two widths are given,
///         or a layer's weights or bias do not have its widths' sizes
/// \throws std::runtime_error on a CUDA failure
inline MlpWeights upload_weights(const std::vector<int>& widths, const std::vector<std::vector<float>>& weights,
                                 const std::vector<std::vector<float>>& biases) {
  if (widths.size() < 2) throw std::invalid_argument("upload_weights: needs two or more widths");
  const std::size_t layers = widths.size() - 1;
  if (weights.size() != layers || biases.size() != layers)
    throw std::invalid_argument("upload_weights: " + std::to_string(widths.size()) + " widths need " +
                                std::to_string(layers) + " weight matrices and biases");
  MlpWeights m{widths, {}, {}, {}};
  for (std::size_t l = 0; l < layers; ++l) {
    if (widths[l] < 1 || widths[l + 1] < 1) throw std::invalid_argument("upload_weights: widths must be positive");
    const std::size_t k = std::size_t(widths[l]), n = std::size_t(widths[l + 1]);
    if (weights[l].size() != k * n || biases[l].size() != n)
      throw std::invalid_argument("upload_weights: layer " + std::to_string(l) + " needs " + std::to_string(k * n) +
                                  " weights and " + std::to_string(n) + " biases");
    m.weights.push_back(device_copy(to_bf16(weights[l])));
    m.biases.push_back(device_copy(biases[l]));
    m.biases16.push_back(device_copy(to_bf16(biases[l])));
  }
  return m;
}

namespace detail {

// The kernels are static: a __global__ function cannot be inline, and internal linkage lets
// every translation unit that includes this header have its own copy.

struct alignas(8) Bf16x4 {
  __nv_bfloat162 lo, hi;
};

/// out = in rounded to bfloat16; four elements a thread (a 16-byte load, an 8-byte store; the
/// buffers come from cudaMalloc, so aligned), the n % 4 last ones one a thread.
static __global__ void cast_to_bf16(const float* __restrict__ in, bf16* __restrict__ out, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t quads = n / 4;
  for (std::int64_t i = first; i < quads; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(in)[i];
    reinterpret_cast<Bf16x4*>(out)[i] = Bf16x4{__floats2bfloat162_rn(v.x, v.y), __floats2bfloat162_rn(v.z, v.w)};
  }
  for (std::int64_t i = 4 * quads + first; i < n; i += stride) out[i] = __float2bfloat16_rn(in[i]);
}

constexpr int softmax_block = 128;  // four rows a block

/// probs[r] = softmax(logits[r]) over `classes` floats, one warp a row: each lane holds the
/// columns lane, lane + 32, ...; the maximum and the sum go round the warp by shuffles.
static __global__ void softmax_rows(const float* __restrict__ logits, float* __restrict__ probs, int rows,
                                    int classes) {
  const int row = int(blockIdx.x) * (softmax_block / 32) + int(threadIdx.x) / 32;
  const int lane = int(threadIdx.x) % 32;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below see full warps
  const float* in = logits + std::size_t(row) * classes;
  float* out = probs + std::size_t(row) * classes;
  float top = -INFINITY;
  for (int c = lane; c < classes; c += 32) top = fmaxf(top, in[c]);
  for (int offset = 16; offset > 0; offset /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
  float sum = 0.0f;
  for (int c = lane; c < classes; c += 32) sum += expf(in[c] - top);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  for (int c = lane; c < classes; c += 32) out[c] = expf(in[c] - top) / sum;
}

using LtHandle = Unique<cublasLtHandle_t, &cublasLtDestroy>;
using MatmulDesc = Unique<cublasLtMatmulDesc_t, &cublasLtMatmulDescDestroy>;
using MatrixLayout = Unique<cublasLtMatrixLayout_t, &cublasLtMatrixLayoutDestroy>;
using MatmulPreference = Unique<cublasLtMatmulPreference_t, &cublasLtMatmulPreferenceDestroy>;
using NativeGraph = Unique<cudaGraph_t, &cudaGraphDestroy>;
using NativeExecutable = Unique<cudaGraphExec_t, &cudaGraphExecDestroy>;
using Stream = Unique<cudaStream_t, &cudaStreamDestroy>;

inline MatrixLayout column_major(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_cublas(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
  return MatrixLayout(layout);
}

template <class T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  check_cublas(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value), "cublasLtMatmulDescSetAttribute");
}

/// Throws std::invalid_argument unless `p` is pinned host memory: stream capture refuses a copy
/// from or to pageable memory, and an executable's copy cannot be pointed at it.
inline void require_pinned(const void* p, const char* what) {
  cudaPointerAttributes attributes{};
  check_cuda(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes");
  if (attributes.type != cudaMemoryTypeHost)
    throw std::invalid_argument(std::string("RawCublasLtMlp::bind: ") + what +
                                " is not pinned host memory (cudaMallocHost or cudaHostRegister)");
}

}  // namespace detail

/// \brief One bucket's forward pass of the MLP through cuBLASLt, as a CUDA graph made by stream
/// capture: upload (float, pinned host to device) -> cast to bfloat16 -> per hidden layer, a
/// matmul with the GELU_BIAS epilogue storing bfloat16 -> the last layer's matmul with the BIAS
/// epilogue storing float -> softmax (float) -> download to pinned host.
///
/// Every matmul takes bfloat16 operands, accumulates in float (CUBLAS_COMPUTE_32F, float
/// scales) and adds a float bias. cuBLASLt's GELU is the tanh approximation,
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), not the erf form of the flowdsl kernels.
/// Each layer's algorithm is the first that cublasLtMatmulAlgoGetHeuristic proposes for a 32 MiB
/// workspace, chosen once, in the constructor.
///
/// Row-major C = A W (A [rows][k], W [k][n]) is computed as the column-major C^T = W^T A^T:
/// cuBLASLt's m = n, n = rows, k = k, its A operand W with ld n, its B operand A with ld k, D
/// with ld n; the bias (n floats, one per row of the column-major D) so goes to C's columns.
///
/// Launches share the activations and the workspace: run them in order on one stream. `weights`
/// must outlive the object. Not thread-safe.
class RawCublasLtMlp {
 public:
  static constexpr std::size_t workspace_bytes = std::size_t(32) << 20;

  /// \param weights the MLP (two or more widths), read by every launch
  /// \param rows the bucket: rows of every batch
  /// \param handle a cuBLASLt handle to use; null: the object creates and owns one
  /// \throws std::invalid_argument when `weights` has fewer than two widths or rows < 1
  /// \throws std::runtime_error on a CUDA or cuBLASLt failure, or when the heuristic finds no
  ///         algorithm for a layer
  RawCublasLtMlp(const MlpWeights& weights, int rows, cublasLtHandle_t handle = nullptr)
      : weights_(&weights), rows_(rows) {
    if (weights.layers() < 1) throw std::invalid_argument("RawCublasLtMlp: the MLP needs two or more widths");
    if (rows < 1) throw std::invalid_argument("RawCublasLtMlp: rows must be positive");
    if (handle == nullptr) {
      check_cublas(cublasLtCreate(&handle), "cublasLtCreate");
      owned_handle_.reset(handle);
    }
    handle_ = handle;
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    capture_stream_.reset(stream);
    workspace_ = DeviceBuffer<unsigned char>(workspace_bytes);
    const std::size_t r = std::size_t(rows);
    input_ = DeviceBuffer<float>(r * weights.widths[0]);
    input16_ = DeviceBuffer<bf16>(r * weights.widths[0]);
    for (int l = 0; l + 1 < weights.layers(); ++l) hidden_.emplace_back(r * weights.widths[l + 1]);
    logits_ = DeviceBuffer<float>(r * weights.classes());
    probs_ = DeviceBuffer<float>(r * weights.classes());
    for (int l = 0; l < weights.layers(); ++l) layers_.push_back(make_layer(l));
  }

  /// \brief Points the upload at `host_in` (rows x widths[0] floats) and the download at
  /// `host_out` (rows x classes floats). The first call captures the graph and instantiates it
  /// (after one eager pass on the object's own stream, which loads the kernels outside capture
  /// and so reads `host_in` and writes `host_out`); later calls update the executable's two
  /// copies in place (cudaGraphExecMemcpyNodeSetParams1D), which affects later launches only.
  /// \throws std::invalid_argument when either pointer is not pinned host memory (first call)
  /// \throws std::runtime_error on a CUDA or cuBLASLt failure, or a later call's pointer that is
  ///         not pinned host memory
  void bind(const float* host_in, float* host_out) {
    if (!executable_) {
      detail::require_pinned(host_in, "host_in");
      detail::require_pinned(host_out, "host_out");
      capture(host_in, host_out);
      return;
    }
    // An update refuses a change of memory kind itself (cudaErrorInvalidValue).
    check_cuda(cudaGraphExecMemcpyNodeSetParams1D(executable_.get(), upload_node_, input_.get(), host_in,
                                                  input_.bytes(), cudaMemcpyHostToDevice),
               "cudaGraphExecMemcpyNodeSetParams1D (upload)");
    check_cuda(cudaGraphExecMemcpyNodeSetParams1D(executable_.get(), download_node_, host_out, probs_.get(),
                                                  probs_.bytes(), cudaMemcpyDeviceToHost),
               "cudaGraphExecMemcpyNodeSetParams1D (download)");
  }

  /// \brief Launches the executable on `stream`.
  /// \throws std::logic_error before the first bind
  /// \throws std::runtime_error on a CUDA failure
  void launch(cudaStream_t stream) const {
    if (!executable_) throw std::logic_error("RawCublasLtMlp::launch: bind() first");
    check_cuda(cudaGraphLaunch(executable_.get(), stream), "cudaGraphLaunch");
  }

  /// \brief Nodes of the captured graph (what cuBLASLt captured included); 0 before the first bind.
  std::size_t node_count() const noexcept { return node_count_; }
  int rows() const noexcept { return rows_; }

 private:
  /// One cublasLtMatmul: cuBLASLt's A is the weights, its B the layer's input, its C = D the output.
  struct Layer {
    detail::MatmulDesc desc;
    detail::MatrixLayout w_layout, in_layout, out_layout;
    cublasLtMatmulAlgo_t algo{};
    const bf16* w = nullptr;
    const bf16* in = nullptr;
    void* out = nullptr;  // bfloat16 for hidden layers, the float logits for the last
  };

  Layer make_layer(int l) const {
    const MlpWeights& w = *weights_;
    const bool hidden = l + 1 < w.layers();
    const int k = w.widths[l], n = w.widths[l + 1];
    Layer layer;
    cublasLtMatmulDesc_t desc = nullptr;
    check_cublas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    layer.desc.reset(desc);
    // Operations stay CUBLAS_OP_N, the default: the transposes are in the layouts' reading.
    const cublasLtEpilogue_t epilogue = hidden ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    detail::set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    // The bias has D's type: bfloat16 for the hidden layers, float for the last. Set before the
    // heuristic, which reads the pointer's alignment.
    const void* bias = hidden ? static_cast<const void*>(w.biases16[l].get()) : static_cast<const void*>(w.biases[l].get());
    detail::set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    const cudaDataType_t d_type = hidden ? CUDA_R_16BF : CUDA_R_32F;
    layer.w_layout = detail::column_major(CUDA_R_16BF, std::uint64_t(n), std::uint64_t(k), n);
    layer.in_layout = detail::column_major(CUDA_R_16BF, std::uint64_t(k), std::uint64_t(rows_), k);
    layer.out_layout = detail::column_major(d_type, std::uint64_t(n), std::uint64_t(rows_), n);
    layer.w = w.weights[l].get();
    layer.in = l == 0 ? input16_.get() : hidden_[std::size_t(l - 1)].get();
    layer.out = hidden ? static_cast<void*>(hidden_[std::size_t(l)].get()) : static_cast<void*>(logits_.get());

    cublasLtMatmulPreference_t preference = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const detail::MatmulPreference owned_preference(preference);
    const std::size_t workspace = workspace_bytes;
    check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                      sizeof workspace),
                 "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check_cublas(
        cublasLtMatmulAlgoGetHeuristic(handle_, desc, layer.w_layout.get(), layer.in_layout.get(),
                                       layer.out_layout.get(), layer.out_layout.get(), preference, 1, &result, &found),
        "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1)
      throw std::runtime_error("RawCublasLtMlp: cuBLASLt has no algorithm for layer " + std::to_string(l + 1) + " (" +
                               std::to_string(rows_) + " x " + std::to_string(k) + " by " + std::to_string(k) + " x " +
                               std::to_string(n) + ")");
    layer.algo = result.algo;
    return layer;
  }

  /// The node the capture on `stream` added last: the one the capture's next node will follow.
  static cudaGraphNode_t last_captured(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* dependencies = nullptr;
    std::size_t count = 0;
    check_cuda(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &dependencies, nullptr, &count),
               "cudaStreamGetCaptureInfo");
    if (status != cudaStreamCaptureStatusActive || count != 1)
      throw std::runtime_error("RawCublasLtMlp: the capture does not end in one node");
    return dependencies[0];
  }

  /// The forward pass on `stream`; while capturing, also records the two copies' nodes.
  void enqueue(const float* host_in, float* host_out, cudaStream_t stream, bool capturing) {
    check_cuda(cudaMemcpyAsync(input_.get(), host_in, input_.bytes(), cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync (upload)");
    if (capturing) upload_node_ = last_captured(stream);
    const std::int64_t n = std::int64_t(input_.size());
    const unsigned cast_blocks = unsigned(std::max<std::int64_t>(1, (n / 4 + 255) / 256));
    detail::cast_to_bf16<<<cast_blocks, 256, 0, stream>>>(input_.get(), input16_.get(), n);
    check_cuda(cudaGetLastError(), "cast_to_bf16 launch");
    const float one = 1.0f, zero = 0.0f;  // read when the call is made (host pointer mode)
    for (const Layer& layer : layers_)
      check_cublas(cublasLtMatmul(handle_, layer.desc.get(), &one, layer.w, layer.w_layout.get(), layer.in,
                                  layer.in_layout.get(), &zero, layer.out, layer.out_layout.get(), layer.out,
                                  layer.out_layout.get(), &layer.algo, workspace_.get(), workspace_.bytes(), stream),
                   "cublasLtMatmul");
    const int classes = weights_->classes();
    const unsigned softmax_blocks = unsigned((rows_ + detail::softmax_block / 32 - 1) / (detail::softmax_block / 32));
    detail::softmax_rows<<<softmax_blocks, detail::softmax_block, 0, stream>>>(logits_.get(), probs_.get(), rows_,
                                                                               classes);
    check_cuda(cudaGetLastError(), "softmax_rows launch");
    check_cuda(cudaMemcpyAsync(host_out, probs_.get(), probs_.bytes(), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (download)");
    if (capturing) download_node_ = last_captured(stream);
  }

  void capture(const float* host_in, float* host_out) {
    cudaStream_t stream = capture_stream_.get();
    enqueue(host_in, host_out, stream, false);
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    // Thread-local: other threads' CUDA calls neither break this capture nor are refused by it.
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      enqueue(host_in, host_out, stream, true);
    } catch (...) {
      // End the failed capture, so that the stream is usable again; the first error is the one to report.
      (void)cudaStreamEndCapture(stream, &graph);
      detail::NativeGraph discarded(graph);
      throw;
    }
    check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    // The copies' node handles belong to the graph: it lives as long as the executable they update.
    graph_.reset(graph);
    check_cuda(cudaGraphGetNodes(graph, nullptr, &node_count_), "cudaGraphGetNodes");
    // Uploaded at instantiation, as flowdsl's executables are; synchronised so that the first
    // launch, on any stream, finds it resident.
    cudaGraphInstantiateParams params{};
    params.flags = cudaGraphInstantiateFlagUpload;
    params.uploadStream = stream;
    cudaGraphExec_t executable = nullptr;
    check_cuda(cudaGraphInstantiateWithParams(&executable, graph, &params), "cudaGraphInstantiateWithParams");
    executable_.reset(executable);
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  const MlpWeights* weights_;
  int rows_;
  detail::LtHandle owned_handle_;
  cublasLtHandle_t handle_ = nullptr;
  detail::Stream capture_stream_;
  DeviceBuffer<unsigned char> workspace_;
  DeviceBuffer<float> input_;               // [rows][widths[0]]: the upload lands here
  DeviceBuffer<bf16> input16_;              // the input cast to bfloat16
  std::vector<DeviceBuffer<bf16>> hidden_;  // hidden layer l's output: [rows][widths[l + 1]]
  DeviceBuffer<float> logits_, probs_;      // [rows][classes]
  std::vector<Layer> layers_;
  detail::NativeGraph graph_;
  detail::NativeExecutable executable_;
  cudaGraphNode_t upload_node_ = nullptr, download_node_ = nullptr;
  std::size_t node_count_ = 0;
};

}  // namespace mlp_bench
