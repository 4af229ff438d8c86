// SPDX-License-Identifier: Apache-2.0
// Graphviz as a test oracle: a DOT text must render without error or warning.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "catch.hpp"

namespace flowdsl_test {

/// Renders `text` with Graphviz (written to `file` in the build tree's test folder, then
/// `dot -Tsvg`); fails the test with the reason when dot rejects it or warns. Without dot on
/// PATH the check is skipped, and the test executable reports itself skipped (skipped_check).
inline void require_dot_accepts(const std::string& text, const std::string& file) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    skipped_check("Graphviz 'dot' is not on PATH: install the graphviz package (.ci/install-deps does)");
#if defined(FLOWDSL_CATCH2_V3)
    SKIP("Graphviz 'dot' is not on PATH");
#else
    WARN("SKIPPED: Graphviz 'dot' is not on PATH");
    return;
#endif
  }
  const std::string path = std::string(FLOWDSL_TEST_OUTPUT_DIR) + "/" + file;
  { std::ofstream(path) << text; }
  const std::string command = "dot -Tsvg '" + path + "' -o '" + path + ".svg' 2>'" + path + ".err'";
  INFO("dot input:\n" << text);
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream err(path + ".err");
  const std::string warnings((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  CHECK(warnings.empty());
}

}  // namespace flowdsl_test
