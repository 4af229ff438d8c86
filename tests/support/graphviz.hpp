// Graphviz as a test oracle: a DOT text must render without error or warning.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "catch.hpp"

namespace flowdsl_test {

/// Renders `text` with Graphviz (written to `file`, then `dot -Tsvg`); fails the test with the
/// reason when dot rejects it or warns.
inline void require_dot_accepts(const std::string& text, const std::string& file) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    FAIL("Graphviz 'dot' is not on PATH: install the graphviz package (.ci/install-deps does)");
  }
  { std::ofstream(file) << text; }
  const std::string command = "dot -Tsvg '" + file + "' -o '" + file + ".svg' 2>'" + file + ".err'";
  INFO("dot input:\n" << text);
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream err(file + ".err");
  const std::string warnings((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  CHECK(warnings.empty());
}

}  // namespace flowdsl_test
