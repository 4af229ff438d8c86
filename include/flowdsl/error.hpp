// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file error.hpp
/// \brief The exception types flowdsl throws (CudaError, which carries a CUDA status, is in
/// cuda_handles.hpp with the other CUDA-facing types).

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace flowdsl {

/// \brief `text` in single quotes, as every message quotes a name: a quote or a backslash in it
/// is escaped with a backslash, and a control character is written as an escape (`\n`, `\t`,
/// `\r`, else `\xNN`), so that a name from an untrusted file can neither end the message early
/// nor start a line of its own. `quoted_name("a'b\n")` is `'a\'b\n'`. Text over 200 bytes is
/// quoted by its first 200, then `...` and its length: `'xxx...' (4096 bytes)`.
std::string quoted_name(std::string_view text);

/// \brief Base of every exception flowdsl throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// \brief Misuse of the API that no valid program does: a node handle from another graph,
/// a lookup of a name that does not exist, a kernel argument slot that does not exist,
/// a registry entry that clashes with another.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// \brief One problem found by validation, attached to the node(s) it is about.
struct Diagnostic {
  /// Paths of the nodes concerned (may be empty: empty graph). A node inside a body is named by
  /// its path from the top: "outer/loop/step".
  std::vector<std::string> nodes;
  std::string message;             ///< full sentence, starting with the node it names
  /// The parameter of the first node the problem is about, as a relative JSON pointer
  /// ("args/x"), or empty. Graph files report the problem at the node's pointer plus this.
  std::string member;
};

/// \brief A graph description failed validation. what() lists every problem, one per line;
/// diagnostics() gives them as data.
class ValidationError : public Error {
 public:
  explicit ValidationError(std::vector<Diagnostic> diagnostics);

  /// \brief Every problem found, in the order validation met them.
  const std::vector<Diagnostic>& diagnostics() const noexcept { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

/// \brief One problem of a JSON graph file, at a JSON pointer (RFC 6901, "" is the whole file).
struct JsonProblem {
  std::string pointer;  ///< e.g. "/nodes/3/args/alpha"
  std::string message;  ///< what was found and what was expected
};

/// \brief A JSON graph file is malformed or describes an invalid graph. what() gives one line
/// per problem, "<pointer>: <message>", prefixed by the file's name when known; problems()
/// gives them as data. Core validation errors are mapped to the pointer of their node. At most
/// max_problems are kept: beyond, the last problem (pointer "") says how many more there were,
/// and what() counts them all.
class JsonError : public Error {
 public:
  static constexpr std::size_t max_problems = 100;

  /// \param problems at least one problem
  /// \param source the file name, or empty
  explicit JsonError(std::vector<JsonProblem> problems, std::string source = {});

  const std::vector<JsonProblem>& problems() const noexcept { return problems_; }
  /// \brief Pointer of the first problem.
  const std::string& pointer() const noexcept { return problems_.front().pointer; }
  const std::string& source() const noexcept { return source_; }

 private:
  JsonError(std::vector<JsonProblem>&& problems, std::string&& source, std::size_t total);

  std::vector<JsonProblem> problems_;
  std::string source_;
};

}  // namespace flowdsl
