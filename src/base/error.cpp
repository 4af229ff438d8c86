// SPDX-License-Identifier: Apache-2.0
// The CUDA-free error types.
#include "flowdsl/error.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>

namespace flowdsl {
namespace {

// Appends `text` with every control character escaped; with `quotes`, quotes and backslashes too.
void escape_into(std::string& out, std::string_view text, bool quotes) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (quotes && (c == '\'' || c == '\\')) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
}

// One message, one line: whatever control character a message still holds (a name quoted
// without quoted_name) is escaped where the lines are joined.
void append_line(std::string& text, std::string_view line) {
  text += "\n  ";
  escape_into(text, line, false);
}

std::string join(const std::vector<Diagnostic>& diagnostics) {
  std::string text = "flowdsl: invalid graph (" + std::to_string(diagnostics.size()) +
                     (diagnostics.size() == 1 ? " problem):" : " problems):");
  for (const Diagnostic& d : diagnostics) append_line(text, d.message);
  return text;
}

std::string join(const std::vector<JsonProblem>& problems, const std::string& source, std::size_t total) {
  std::string text = "flowdsl: " + (source.empty() ? std::string("JSON graph") : source) + ": ";
  if (problems.size() == 1) {
    text += problems[0].pointer.empty() ? "/" : problems[0].pointer;
    text += ": ";
    escape_into(text, problems[0].message, false);
    return text;
  }
  text += std::to_string(total) + " problems:";
  for (const JsonProblem& p : problems) append_line(text, (p.pointer.empty() ? "/" : p.pointer) + ": " + p.message);
  return text;
}

// A problem found again and again (a node listing itself 2 000 times) is reported once, where
// it was first found, with its count.
template <class Problem, class Key>
std::vector<Problem> once_each(std::vector<Problem> all, const Key& key) {
  if (all.size() < 2) return all;
  std::unordered_map<std::string, std::size_t> first;  // key -> index in `out`
  std::vector<Problem> out;
  std::vector<std::size_t> counts;
  for (Problem& p : all) {
    const auto [it, added] = first.emplace(key(p), out.size());
    if (added) {
      out.push_back(std::move(p));
      counts.push_back(1);
    } else {
      ++counts[it->second];
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (counts[i] > 1) out[i].message += " (found " + std::to_string(counts[i]) + " times)";
  }
  return out;
}

std::vector<JsonProblem> once_each(std::vector<JsonProblem> all) {
  return once_each(std::move(all), [](const JsonProblem& p) { return p.pointer + '\0' + p.message; });
}

std::vector<Diagnostic> once_each(std::vector<Diagnostic> all) {
  return once_each(std::move(all), [](const Diagnostic& d) {
    std::string key = d.message + '\0' + d.member;
    for (const std::string& n : d.nodes) key += '\0' + n;
    return key;
  });
}

// A file of a million bad nodes must not make a million lines: the first problems, then a count.
std::vector<JsonProblem> capped(const std::vector<JsonProblem>& all) {
  if (all.size() <= JsonError::max_problems + 1) return all;  // + 1: a count already made
  std::vector<JsonProblem> problems(all.begin(), all.begin() + JsonError::max_problems);
  problems.push_back({"", "... and " + std::to_string(all.size() - JsonError::max_problems) + " more problems"});
  return problems;
}

// How many problems `problems` stands for: a list capped before (the problems of another
// JsonError) ends with the count of those left out.
std::size_t total_of(const std::vector<JsonProblem>& problems) {
  if (problems.size() != JsonError::max_problems + 1 || !problems.back().pointer.empty()) return problems.size();
  unsigned long long more = 0;
  if (std::sscanf(problems.back().message.c_str(), "... and %llu more problems", &more) != 1) return problems.size();
  return JsonError::max_problems + static_cast<std::size_t>(more);
}

}  // namespace

std::string quoted_name(std::string_view text) {
  // A message quotes at most this much of what it names: a 4 KB expression or value from a
  // file is shown by its start and its length.
  constexpr std::size_t shown = 200;
  std::string out;
  out.reserve(std::min(text.size(), shown) + 24);
  out += '\'';
  escape_into(out, text.substr(0, shown), true);
  out += '\'';
  if (text.size() > shown) out.insert(out.size() - 1, "...").append(" (" + std::to_string(text.size()) + " bytes)");
  return out;
}

JsonError::JsonError(std::vector<JsonProblem> problems, std::string source)
    : JsonError(capped(once_each(problems)), std::move(source), total_of(once_each(problems))) {}

JsonError::JsonError(std::vector<JsonProblem>&& problems, std::string&& source, std::size_t total)
    : Error(join(problems, source, total)), problems_(std::move(problems)), source_(std::move(source)) {}

// The parameter is replaced by its problems once each before the base is made from them.
ValidationError::ValidationError(std::vector<Diagnostic> diagnostics)
    : Error(join(diagnostics = once_each(std::move(diagnostics)))), diagnostics_(std::move(diagnostics)) {}

}  // namespace flowdsl
