// SPDX-License-Identifier: Apache-2.0
// CudaError, the CUDA status check and the stream and event makers.
#include "flowdsl/cuda_handles.hpp"

namespace flowdsl {
namespace {

std::string describe(cudaError_t code, const std::string& call, const std::string& node, const std::string& detail) {
  std::string text = "flowdsl: " + call + " failed";
  if (!node.empty()) text += " for node " + quoted_name(node);
  text += std::string(": ") + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")";
  return detail.empty() ? text : text + ": " + detail;
}

}  // namespace

CudaError::CudaError(cudaError_t code, std::string call, std::string node, const std::string& detail)
    : Error(describe(code, call, node, detail)), code_(code), call_(std::move(call)), node_(std::move(node)) {}

void check(cudaError_t code, const char* call, const char* node) {
  if (code != cudaSuccess) {
    (void)cudaGetLastError();  // clear the non-sticky error so the runtime stays usable
    throw CudaError(code, call, node ? node : "");
  }
}

StreamHandle make_stream(unsigned flags) {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, flags), "cudaStreamCreateWithFlags");
  return StreamHandle(stream);
}

EventHandle make_event(unsigned flags) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, flags), "cudaEventCreateWithFlags");
  return EventHandle(event);
}

}  // namespace flowdsl
