// Must not compile: three parameters, two arguments.
#include "flowdsl/graph.hpp"

void scale(float*, float, int) {}

int main() {
  flowdsl::Graph g;
  g.kernel("scale", scale).args(static_cast<float*>(nullptr), 2.0f);
}
