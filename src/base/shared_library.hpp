// SPDX-License-Identifier: Apache-2.0
// Optional libraries opened at run time (cuBLASLt, CUPTI, NCCL, NVRTC): the first candidate that
// opens, then each function resolved by name. A program that never uses a library neither links
// nor loads it, so checking a graph file maps none of them (internal to the library).
#pragma once

#include <string>
#include <vector>

namespace flowdsl::detail {

/// \brief Where to look for an optional library: the path in environment variable `variable`
/// when it is set (alone, so that a wrong path is not hidden by a default), else `defaults` in
/// order (a soname first, then the toolkit's full path).
std::vector<std::string> library_candidates(const char* variable, std::vector<std::string> defaults);

/// \brief A shared library opened with dlopen (RTLD_NOW | RTLD_LOCAL) and never closed: the
/// functions resolved from it stay valid for the life of the process.
class SharedLibrary {
 public:
  SharedLibrary() = default;
  /// \brief Opens the first of `candidates` that opens; on failure the handle stays null and
  /// tried() says, one line a candidate, why each did not.
  explicit SharedLibrary(const std::vector<std::string>& candidates);

  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// \brief The candidate that opened.
  const std::string& path() const noexcept { return path_; }
  /// \brief "\n  <candidate>: <why>" for each candidate that did not open.
  const std::string& tried() const noexcept { return tried_; }

  /// \brief Points `out` at the function `name`, or at null after adding `name` to the
  /// comma-separated `missing`.
  template <class F>
  void resolve(const char* name, F& out, std::string& missing) const {
    out = reinterpret_cast<F>(symbol(name));
    if (out == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  }

 private:
  void* symbol(const char* name) const;
  void* handle_ = nullptr;
  std::string path_;
  std::string tried_;
};

}  // namespace flowdsl::detail
