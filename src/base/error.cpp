// The CUDA-free error types.
#include <string>

#include "flowdsl/error.hpp"

namespace flowdsl {
namespace {

std::string join(const std::vector<Diagnostic>& diagnostics) {
  std::string text = "flowdsl: invalid graph (" + std::to_string(diagnostics.size()) +
                     (diagnostics.size() == 1 ? " problem):" : " problems):");
  for (const Diagnostic& d : diagnostics) text += "\n  " + d.message;
  return text;
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

}  // namespace flowdsl
