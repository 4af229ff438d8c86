// Builds a graph against the installed flowdsl, validates it and prints its topology hash: no
// GPU needed. With the kernel library, also registers the built-in kernels.
#include <cstdio>
#include <vector>

#include <flowdsl/flowdsl.hpp>
#ifdef APP_HAS_KERNELS
#include <flowdsl/kernels.hpp>
#endif

int main() {
  std::vector<float> source(256, 1.0f), destination(256);
  flowdsl::Graph g;
  auto copy = g.memcpy("copy", destination.data(), source.data(), source.size() * sizeof(float));
  g.empty("done").after(copy);

  const std::vector<flowdsl::Diagnostic> problems = flowdsl::validate(g.description());
  for (const flowdsl::Diagnostic& d : problems) std::fprintf(stderr, "%s\n", d.message.c_str());
  if (!problems.empty()) return 1;
  std::printf("valid graph of %zu nodes, topology %016llx\n", g.size(),
              static_cast<unsigned long long>(g.topology_hash()));

#ifdef APP_HAS_KERNELS
  flowdsl::KernelRegistry registry;
  flowdsl::kernels::register_builtins(registry);
  std::printf("%zu built-in kernels\n", registry.list().size());
#endif
  return 0;
}
