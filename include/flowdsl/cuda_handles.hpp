// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file cuda_handles.hpp
/// \brief The CUDA-facing vocabulary: move-only owners of CUDA handles (one owner per handle,
/// destroyed exactly once) and CudaError.

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "flowdsl/error.hpp"

namespace flowdsl {

/// \brief A CUDA runtime call failed. Carries the error code, the call and, where the call
/// concerned one node, that node's path.
class CudaError : public Error {
 public:
  /// \param code the cudaError_t the call returned
  /// \param call the name of the CUDA function, e.g. "cudaGraphInstantiate"
  /// \param node the node concerned, or empty
  /// \param detail what the failure means there, appended to the message (or empty)
  CudaError(cudaError_t code, std::string call, std::string node = {}, const std::string& detail = {});

  cudaError_t code() const noexcept { return code_; }
  const std::string& call() const noexcept { return call_; }
  const std::string& node() const noexcept { return node_; }

 private:
  cudaError_t code_;
  std::string call_;
  std::string node_;
};

/// \brief Owns one CUDA handle of type `Handle`, destroyed with `Destroy`.
///
/// Deleted copy; a move hands the handle over and leaves null behind; the destructor is
/// noexcept and ignores the destroy call's status (there is nothing a destructor could do).
template <class Handle, cudaError_t (*Destroy)(Handle)>
class UniqueHandle {
 public:
  UniqueHandle() noexcept = default;
  /// \brief Takes ownership of `handle` (may be null).
  explicit UniqueHandle(Handle handle) noexcept : handle_(handle) {}
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    reset(std::exchange(other.handle_, nullptr));
    return *this;
  }
  ~UniqueHandle() { reset(); }

  Handle get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// \brief Gives up ownership without destroying.
  [[nodiscard]] Handle release() noexcept { return std::exchange(handle_, nullptr); }
  /// \brief Destroys the handle held, if any, and takes `handle`.
  void reset(Handle handle = nullptr) noexcept {
    if (Handle old = std::exchange(handle_, handle)) {
      (void)Destroy(old);
    }
  }

 private:
  Handle handle_ = nullptr;
};

/// \brief A native graph (cudaGraph_t).
using NativeGraph = UniqueHandle<cudaGraph_t, &cudaGraphDestroy>;
/// \brief An executable (cudaGraphExec_t). Destroying one that is still running is allowed:
/// CUDA frees it once the launch completes.
using NativeExecutable = UniqueHandle<cudaGraphExec_t, &cudaGraphExecDestroy>;
/// \brief A stream (cudaStream_t).
using StreamHandle = UniqueHandle<cudaStream_t, &cudaStreamDestroy>;
/// \brief An event (cudaEvent_t).
using EventHandle = UniqueHandle<cudaEvent_t, &cudaEventDestroy>;

/// \brief Creates a stream that does not synchronise with the legacy default stream.
/// \throws CudaError
StreamHandle make_stream(unsigned flags = cudaStreamNonBlocking);
/// \brief Creates an event (timing enabled unless flags say otherwise).
/// \throws CudaError
EventHandle make_event(unsigned flags = cudaEventDefault);

/// \brief Throws CudaError(code, call, node) unless code is cudaSuccess.
void check(cudaError_t code, const char* call, const char* node = nullptr);

}  // namespace flowdsl
