// SPDX-License-Identifier: Apache-2.0
// Catch2 v2 (single header, Debian 12) or v3 (compiled library, Ubuntu 24.04).
#pragma once

#if defined(FLOWDSL_CATCH2_V3)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <string>

namespace flowdsl_test {

/// Notes that a check could not run here (a tool is missing), saying why: when every test
/// passes, the runner then exits with 77, which ctest reports as skipped (catch_main.cpp).
void skipped_check(const std::string& reason);

/// Matcher for "the string contains `text`", under both Catch2 versions.
inline auto contains(const std::string& text) {
#if defined(FLOWDSL_CATCH2_V3)
  return Catch::Matchers::ContainsSubstring(text);
#else
  return Catch::Matchers::Contains(text);
#endif
}

}  // namespace flowdsl_test
