// Must not compile: an int* where the kernel takes float*.
#include "flowdsl/graph.hpp"

void scale(float*, float, int) {}

int main() {
  flowdsl::Graph g;
  int* wrong = nullptr;
  g.kernel("scale", scale).args(wrong, 2.0f, 1);
}
