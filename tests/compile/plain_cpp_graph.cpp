// A plain C++ program (no CUDA header on the include path) builds a graph, validates it and
// hashes it: what the builder's public headers promise.
#include "flowdsl/graph.hpp"

void scale(float*, float, int) {}

int main() {
  float x[16] = {};
  flowdsl::Graph g;
  auto up = g.memcpy("upload", x, x + 8, 8 * sizeof(float));
  auto k = g.kernel("scale", scale).launch(1, 8).args(x, 2.0f, 8).after(up);
  g.child("tail").body().empty("join");
  k.arg<1>(3.0f);
  return g.description().nodes.size() == 4 ? 0 : 1;
}
