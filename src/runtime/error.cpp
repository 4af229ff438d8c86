// Error types and the CUDA status check.
#include <string>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/error.hpp"

namespace flowdsl {
namespace {

std::string join(const std::vector<Diagnostic>& diagnostics) {
  std::string text = "flowdsl: invalid graph (" + std::to_string(diagnostics.size()) +
                     (diagnostics.size() == 1 ? " problem):" : " problems):");
  for (const Diagnostic& d : diagnostics) text += "\n  " + d.message;
  return text;
}

std::string describe(cudaError_t code, const std::string& call, const std::string& node) {
  std::string text = "flowdsl: " + call + " failed";
  if (!node.empty()) text += " for node '" + node + "'";
  return text + ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")";
}

std::string join(const std::vector<JsonProblem>& problems, const std::string& source) {
  std::string text = "flowdsl: " + (source.empty() ? std::string("JSON graph") : source) + ": ";
  if (problems.size() == 1) return text + (problems[0].pointer.empty() ? "/" : problems[0].pointer) + ": " + problems[0].message;
  text += std::to_string(problems.size()) + " problems:";
  for (const JsonProblem& p : problems) text += "\n  " + (p.pointer.empty() ? "/" : p.pointer) + ": " + p.message;
  return text;
}

}  // namespace

JsonError::JsonError(std::vector<JsonProblem> problems, std::string source)
    : Error(join(problems, source)), problems_(std::move(problems)), source_(std::move(source)) {}

ValidationError::ValidationError(std::vector<Diagnostic> diagnostics)
    : Error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

CudaError::CudaError(cudaError_t code, std::string call, std::string node)
    : Error(describe(code, call, node)), code_(code), call_(std::move(call)), node_(std::move(node)) {}

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
