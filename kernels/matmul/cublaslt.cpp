// SPDX-License-Identifier: Apache-2.0
// Matrix products by cuBLASLt as library calls: per device one handle, the algorithm picked
// once per shape, and a workspace per output buffer; registered as "cublaslt.matmul.*".
#include "flowdsl/cublaslt.hpp"
#include "flowdsl/cuda_handles.hpp"
#include "shared_library.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace flowdsl::kernels {
namespace {

constexpr std::size_t workspace_bytes = std::size_t{32} << 20;  // what cuBLAS asks for on Hopper

template <class T>
constexpr cudaDataType_t data_type() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return CUDA_R_16BF;
  } else if constexpr (std::is_same_v<T, __half>) {
    return CUDA_R_16F;
  } else {
    static_assert(std::is_same_v<T, float>);
    return CUDA_R_32F;
  }
}

// The largest power of two up to 256 that divides `p`'s address (null: 256), for the heuristic
// to pick only algorithms that can read and write such operands.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// While the calling thread records a library node, a call that allocates is refused: the
// first use of a shape or an output allocates, so it does so with capture relaxed for this
// thread alone, and then restores the mode.
class RelaxedCapture {
 public:
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// cuBLASLt, opened with dlopen when the first product is recorded: a program that only builds or
// checks graphs (`flowdsl validate`) neither links nor maps it. FLOWDSL_CUBLASLT names another
// library.
struct LtApi {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

// The API, loaded once; an environment error (exit 2 from the tool) when it cannot be.
const LtApi& lt() {
  static const LtApi api = [] {
    const flowdsl::detail::SharedLibrary library(flowdsl::detail::library_candidates(
        "FLOWDSL_CUBLASLT", {"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)
#ifdef FLOWDSL_CUBLASLT_LIBRARY
                             , FLOWDSL_CUBLASLT_LIBRARY
#endif
                            }));
    if (!library) {
      throw CudaError(cudaErrorSharedObjectInitFailed, "dlopen", {},
                      "cuBLASLt cannot be loaded, so its products cannot run here; tried:" + library.tried() +
                          "\n  (set FLOWDSL_CUBLASLT to the path of libcublasLt.so)");
    }
    LtApi out;
    std::string missing;
    library.resolve("cublasLtCreate", out.create, missing);
    library.resolve("cublasLtDestroy", out.destroy, missing);
    library.resolve("cublasLtMatmulDescCreate", out.desc_create, missing);
    library.resolve("cublasLtMatmulDescDestroy", out.desc_destroy, missing);
    library.resolve("cublasLtMatmulDescSetAttribute", out.desc_set, missing);
    library.resolve("cublasLtMatrixLayoutCreate", out.layout_create, missing);
    library.resolve("cublasLtMatrixLayoutDestroy", out.layout_destroy, missing);
    library.resolve("cublasLtMatmulPreferenceCreate", out.preference_create, missing);
    library.resolve("cublasLtMatmulPreferenceDestroy", out.preference_destroy, missing);
    library.resolve("cublasLtMatmulPreferenceSetAttribute", out.preference_set, missing);
    library.resolve("cublasLtMatmulAlgoGetHeuristic", out.heuristic, missing);
    library.resolve("cublasLtMatmul", out.matmul, missing);
    if (!missing.empty()) {
      throw CudaError(cudaErrorSharedObjectSymbolNotFound, "dlsym", {},
                      library.path() + " lacks " + missing + " (cuBLASLt " + std::to_string(CUBLAS_VER_MAJOR) +
                          " or later is needed)");
    }
    return out;
  }();
  return api;
}

template <class Handle, cublasStatus_t (*LtApi::*Destroy)(Handle)>
struct LtDeleter {
  void operator()(Handle h) const noexcept { (void)(lt().*Destroy)(h); }
};
using LtHandle = std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, LtDeleter<cublasLtHandle_t, &LtApi::destroy>>;
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                                   LtDeleter<cublasLtMatmulDesc_t, &LtApi::desc_destroy>>;
using MatrixLayout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                                     LtDeleter<cublasLtMatrixLayout_t, &LtApi::layout_destroy>>;
using Preference = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                                   LtDeleter<cublasLtMatmulPreference_t, &LtApi::preference_destroy>>;

struct DeviceFree {
  void operator()(void* p) const noexcept { (void)cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, DeviceFree>;

// One shape's descriptors and algorithm. Row-major C = A B is column-major C^T = B^T A^T:
// cuBLASLt's M, N, K are n, m, k, its first operand is b (n x k, ld n), its second a (k x m,
// ld k), and its bias (per row of C^T) is ours per column of C. Weights in [n, k] layout (a
// linear layer's) are that first operand transposed: k x n, ld k, with op T.
struct Plan {
  MatmulDesc op;
  MatrixLayout first, second, out;
  cublasLtMatmulAlgo_t algo{};
};

struct ShapeKey {
  cudaDataType_t in, out;
  std::int32_t m, n, k, epilogue;
  std::uint32_t alignment;
  bool weights_nk;  ///< b is [n, k] (a linear layer's weights), not [k, n]
  bool operator<(const ShapeKey& o) const {
    return std::tie(in, out, m, n, k, epilogue, alignment, weights_nk) <
           std::tie(o.in, o.out, o.m, o.n, o.k, o.epilogue, o.alignment, o.weights_nk);
  }
};

cublasLtEpilogue_t lt_epilogue(std::int32_t e) {
  switch (static_cast<Epilogue>(e)) {
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::bias_gelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::bias_relu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

#define FLOWDSL_LT_TRY(call)                                        \
  do {                                                              \
    if (const cublasStatus_t status_ = (call); status_ != CUBLAS_STATUS_SUCCESS) return status_; \
  } while (0)

class DeviceState {
 public:
  // Enqueues one product on `stream`; the state's lock is held: the descriptors are shared.
  cublasStatus_t matmul(cudaStream_t stream, const ShapeKey& key, const void* a, const void* b, const void* bias, void* c) {
    std::lock_guard lock(mutex_);
    const Plan* plan = nullptr;
    void* workspace = nullptr;
    FLOWDSL_LT_TRY(prepare(key, c, plan, workspace));
    if (key.epilogue != static_cast<std::int32_t>(Epilogue::none)) {
      FLOWDSL_LT_TRY(lt().desc_set(plan->op.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    const float alpha = 1.0f, beta = 0.0f;
    return lt().matmul(handle_.get(), plan->op.get(), &alpha, b, plan->first.get(), a, plan->second.get(), &beta, c,
                          plan->out.get(), c, plan->out.get(), &plan->algo, workspace, workspace_bytes, stream);
  }

 private:
  // The shape's plan and the output's workspace, made on first use.
  cublasStatus_t prepare(const ShapeKey& key, const void* c, const Plan*& plan, void*& workspace) {
    const auto found = plans_.find(key);
    const auto space = workspaces_.find(c);
    if (found != plans_.end() && space != workspaces_.end()) {
      plan = found->second.get();
      workspace = space->second.get();
      return CUBLAS_STATUS_SUCCESS;
    }
    const RelaxedCapture relaxed;
    if (!handle_) {
      cublasLtHandle_t h = nullptr;
      FLOWDSL_LT_TRY(lt().create(&h));
      handle_.reset(h);
    }
    if (space == workspaces_.end()) {
      void* p = nullptr;
      if (const cudaError_t e = cudaMalloc(&p, workspace_bytes); e != cudaSuccess) {
        (void)cudaGetLastError();
        // The device is out of memory: an environment error (its code kept), not a failed call.
        throw CudaError(e, "cudaMalloc", {}, "cuBLASLt's workspace of 32 MiB for an output could not be allocated");
      }
      workspace = workspaces_.emplace(c, DeviceMemory(p)).first->second.get();
    } else {
      workspace = space->second.get();
    }
    if (found != plans_.end()) {
      plan = found->second.get();
      return CUBLAS_STATUS_SUCCESS;
    }
    auto made = std::make_unique<Plan>();
    FLOWDSL_LT_TRY(make_plan(key, *made));
    plan = plans_.emplace(key, std::move(made)).first->second.get();
    return CUBLAS_STATUS_SUCCESS;
  }

  cublasStatus_t make_plan(const ShapeKey& key, Plan& plan) {
    cublasLtMatmulDesc_t op = nullptr;
    FLOWDSL_LT_TRY(lt().desc_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    plan.op.reset(op);
    const cublasLtEpilogue_t epilogue = lt_epilogue(key.epilogue);
    FLOWDSL_LT_TRY(lt().desc_set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
    if (key.weights_nk) {
      const cublasOperation_t transpose = CUBLAS_OP_T;
      FLOWDSL_LT_TRY(lt().desc_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
      FLOWDSL_LT_TRY(lt().layout_create(&first, key.in, std::uint64_t(key.k), std::uint64_t(key.n), key.k));
    } else {
      FLOWDSL_LT_TRY(lt().layout_create(&first, key.in, std::uint64_t(key.n), std::uint64_t(key.k), key.n));
    }
    plan.first.reset(first);
    FLOWDSL_LT_TRY(lt().layout_create(&second, key.in, std::uint64_t(key.k), std::uint64_t(key.m), key.k));
    plan.second.reset(second);
    FLOWDSL_LT_TRY(lt().layout_create(&out, key.out, std::uint64_t(key.n), std::uint64_t(key.m), key.n));
    plan.out.reset(out);
    cublasLtMatmulPreference_t preference = nullptr;
    FLOWDSL_LT_TRY(lt().preference_create(&preference));
    const Preference owned(preference);
    const std::uint64_t bytes = workspace_bytes;
    FLOWDSL_LT_TRY(lt().preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                        sizeof bytes));
    for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                 CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      FLOWDSL_LT_TRY(lt().preference_set(preference, attribute, &key.alignment, sizeof key.alignment));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    FLOWDSL_LT_TRY(lt().heuristic(handle_.get(), op, first, second, out, out, preference, 1, &result,
                                                 &found));
    if (found == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    plan.algo = result.algo;
    return CUBLAS_STATUS_SUCCESS;
  }

  std::mutex mutex_;
  LtHandle handle_;
  std::map<ShapeKey, std::unique_ptr<Plan>> plans_;
  std::unordered_map<const void*, DeviceMemory> workspaces_;
};

#undef FLOWDSL_LT_TRY

// The state of the current device, made on first use; kept until the process ends.
DeviceState* state_of_current_device() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
  static std::mutex mutex;
  static std::vector<std::unique_ptr<DeviceState>> states;  // by device
  std::lock_guard lock(mutex);
  if (states.size() <= std::size_t(device)) states.resize(std::size_t(device) + 1);
  if (!states[std::size_t(device)]) states[std::size_t(device)] = std::make_unique<DeviceState>();
  return states[std::size_t(device)].get();
}

}  // namespace

namespace {

template <class T, class Out>
int product(cudaStream_t stream, bool weights_nk, i32 m, i32 n, i32 k, const T* a, const T* b, const Out* bias, i32 epilogue,
            Out* c) {
  if (m < 0 || n < 0 || k <= 0 || epilogue < 0 || epilogue > static_cast<i32>(Epilogue::bias_relu) ||
      (epilogue != static_cast<i32>(Epilogue::none) && bias == nullptr)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to compute
  DeviceState* state = state_of_current_device();
  if (state == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const std::uint32_t alignment = std::min({alignment_of(a), alignment_of(b), alignment_of(c), alignment_of(bias)});
  const ShapeKey key{data_type<T>(), data_type<Out>(), m, n, k, epilogue, alignment, weights_nk};
  return state->matmul(stream, key, a, b, bias, c);
}

}  // namespace

template <class T, class Out>
int cublaslt_matmul_call(cudaStream_t stream, i32 m, i32 n, i32 k, const T* a, const T* b, const Out* bias, i32 epilogue,
                         Out* c) {
  return product(stream, false, m, n, k, a, b, bias, epilogue, c);
}

template <class T, class Out>
int cublaslt_linear_call(cudaStream_t stream, i32 m, i32 n, i32 k, const T* x, const T* w, const Out* bias, i32 epilogue,
                         Out* y) {
  return product(stream, true, m, n, k, x, w, bias, epilogue, y);
}

template <class T, class Out>
LibraryNode<i32, i32, i32, const T*, const T*, const Out*, i32, Out*> cublaslt_matmul(Into g, std::string name, i32 m, i32 n,
                                                                                     i32 k, const T* a, const T* b,
                                                                                     const Out* bias, Epilogue epilogue,
                                                                                     Out* c) {
  return g.builder()
      .library(std::move(name), &cublaslt_matmul_call<T, Out>)
      .args(m, n, k, a, b, bias, static_cast<i32>(epilogue), c);
}

template <class T, class Out>
LibraryNode<i32, i32, i32, const T*, const T*, const Out*, i32, Out*> cublaslt_linear(Into g, std::string name, i32 m, i32 n,
                                                                                     i32 k, const T* x, const T* w,
                                                                                     const Out* bias, Epilogue epilogue,
                                                                                     Out* y) {
  return g.builder()
      .library(std::move(name), &cublaslt_linear_call<T, Out>)
      .args(m, n, k, x, w, bias, static_cast<i32>(epilogue), y);
}

#define FLOWDSL_CUBLASLT_INSTANCE(T, Out)                                                                            \
  template int cublaslt_matmul_call<T, Out>(cudaStream_t, i32, i32, i32, const T*, const T*, const Out*, i32, Out*); \
  template LibraryNode<i32, i32, i32, const T*, const T*, const Out*, i32, Out*> cublaslt_matmul<T, Out>(             \
      Into, std::string, i32, i32, i32, const T*, const T*, const Out*, Epilogue, Out*);                               \
  template int cublaslt_linear_call<T, Out>(cudaStream_t, i32, i32, i32, const T*, const T*, const Out*, i32, Out*); \
  template LibraryNode<i32, i32, i32, const T*, const T*, const Out*, i32, Out*> cublaslt_linear<T, Out>(             \
      Into, std::string, i32, i32, i32, const T*, const T*, const Out*, Epilogue, Out*);
FLOWDSL_CUBLASLT_INSTANCE(__nv_bfloat16, __nv_bfloat16)
FLOWDSL_CUBLASLT_INSTANCE(__nv_bfloat16, float)
FLOWDSL_CUBLASLT_INSTANCE(__half, __half)
FLOWDSL_CUBLASLT_INSTANCE(__half, float)
#undef FLOWDSL_CUBLASLT_INSTANCE

namespace {

// Whether the `a_bytes` at `a` and the `b_bytes` at `b` share memory.
bool overlap(const void* a, std::uint64_t a_bytes, const void* b, std::uint64_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}

// What cublaslt_matmul_call refuses, found from its arguments (KernelInfo::check): validation
// reports it as invalid input before the call is recorded. Sizes and the epilogue are in range
// here (the registry's own checks come first). Linear: the operands are named x, w and y.
template <class T, class Out, bool Linear = false>
ArgumentProblem check_matmul(const void* const* args) {
  i32 m = 0, n = 0, k = 0, epilogue = 0;
  const T* a = nullptr;
  const T* b = nullptr;
  const Out* bias = nullptr;
  Out* c = nullptr;
  std::memcpy(&m, args[0], sizeof m);
  std::memcpy(&n, args[1], sizeof n);
  std::memcpy(&k, args[2], sizeof k);
  std::memcpy(&a, args[3], sizeof a);
  std::memcpy(&b, args[4], sizeof b);
  std::memcpy(&bias, args[5], sizeof bias);
  std::memcpy(&epilogue, args[6], sizeof epilogue);
  std::memcpy(&c, args[7], sizeof c);
  if (k == 0) return {2, "argument 'k' is 0: cuBLASLt multiplies over at least one element (k >= 1)"};
  if (epilogue != static_cast<i32>(Epilogue::none) && bias == nullptr) {
    return {5, "argument 'bias' is null but epilogue " + std::to_string(epilogue) + " adds a bias (use 0, none)"};
  }
  const std::uint64_t c_bytes = std::uint64_t(m) * std::uint64_t(n) * sizeof(Out);
  const std::string out = Linear ? "y" : "c";
  const auto refuse = [&](const char* input) {
    return ArgumentProblem{7, "argument '" + out + "' overlaps '" + input + "': cuBLASLt reads its inputs while it writes " +
                                  out + ", so " + out + " must not share their memory"};
  };
  if (overlap(c, c_bytes, a, std::uint64_t(m) * std::uint64_t(k) * sizeof(T))) return refuse(Linear ? "x" : "a");
  if (overlap(c, c_bytes, b, std::uint64_t(k) * std::uint64_t(n) * sizeof(T))) return refuse(Linear ? "w" : "b");
  if (epilogue != static_cast<i32>(Epilogue::none) && overlap(c, c_bytes, bias, std::uint64_t(n) * sizeof(Out))) {
    return refuse("bias");
  }
  return {};
}

}  // namespace

namespace detail {

void register_cublaslt(KernelRegistry& registry);  // called by register_builtins

void register_cublaslt(KernelRegistry& registry) {
  const std::vector<std::string> params = {"m", "n", "k", "a: m * k", "b: k * n", "bias: n", "epilogue: " FLOWDSL_EPILOGUE_NAMES, "c: m * n"};
  const std::string summary =
      "c[m, n] = epilogue(a[m, k] b[k, n] + bias[n]) by cuBLASLt, float accumulate; epilogue 0 none, 1 bias, "
      "2 bias + gelu (tanh), 3 bias + relu";
  registry.add_call("cublaslt.matmul.bf16", &cublaslt_matmul_call<__nv_bfloat16, __nv_bfloat16>, params,
                    summary + "; c and bias bf16", &check_matmul<__nv_bfloat16, __nv_bfloat16>);
  registry.add_call("cublaslt.matmul.bf16.f32", &cublaslt_matmul_call<__nv_bfloat16, float>, params,
                    summary + "; c and bias f32", &check_matmul<__nv_bfloat16, float>);
  registry.add_call("cublaslt.matmul.f16", &cublaslt_matmul_call<__half, __half>, params, summary + "; c and bias f16",
                    &check_matmul<__half, __half>);
  registry.add_call("cublaslt.matmul.f16.f32", &cublaslt_matmul_call<__half, float>, params,
                    summary + "; c and bias f32", &check_matmul<__half, float>);

  // The same products with weights in a linear layer's [n, k] layout (the same bytes: the checks hold).
  const std::vector<std::string> linear_params = {"m", "n", "k", "x: m * k", "w: n * k", "bias: n", "epilogue: " FLOWDSL_EPILOGUE_NAMES, "y: m * n"};
  const std::string linear_summary =
      "y[m, n] = epilogue(x[m, k] w[n, k]^T + bias[n]) by cuBLASLt (weights [out, in]), float accumulate; epilogue as "
      "cublaslt.matmul's";
  registry.add_call("cublaslt.linear.bf16", &cublaslt_linear_call<__nv_bfloat16, __nv_bfloat16>, linear_params,
                    linear_summary + "; y and bias bf16", &check_matmul<__nv_bfloat16, __nv_bfloat16, true>);
  registry.add_call("cublaslt.linear.bf16.f32", &cublaslt_linear_call<__nv_bfloat16, float>, linear_params,
                    linear_summary + "; y and bias f32", &check_matmul<__nv_bfloat16, float, true>);
  registry.add_call("cublaslt.linear.f16", &cublaslt_linear_call<__half, __half>, linear_params,
                    linear_summary + "; y and bias f16", &check_matmul<__half, __half, true>);
  registry.add_call("cublaslt.linear.f16.f32", &cublaslt_linear_call<__half, float>, linear_params,
                    linear_summary + "; y and bias f32", &check_matmul<__half, float, true>);
}

}  // namespace detail
}  // namespace flowdsl::kernels
