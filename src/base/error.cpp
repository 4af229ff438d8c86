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

// A file of a million bad nodes must not make a million lines: the first problems, then a count.
std::vector<JsonProblem> capped(std::vector<JsonProblem> problems) {
  if (problems.size() <= JsonError::max_problems + 1) return problems;  // + 1: a count already made
  const std::size_t more = problems.size() - JsonError::max_problems;
  problems.resize(JsonError::max_problems);
  problems.push_back({"", "... and " + std::to_string(more) + " more problems"});
  return problems;
}

}  // namespace

JsonError::JsonError(std::vector<JsonProblem> problems, std::string source)
    : JsonError(capped(std::move(problems)), std::move(source), 0) {}

JsonError::JsonError(std::vector<JsonProblem>&& problems, std::string&& source, int /*capped*/)
    : Error(join(problems, source)), problems_(std::move(problems)), source_(std::move(source)) {}

ValidationError::ValidationError(std::vector<Diagnostic> diagnostics)
    : Error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

}  // namespace flowdsl
