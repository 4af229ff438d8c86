// libFuzzer target: the JSON graph loader (parse, check against the built-in kernels, write and
// read back) must never crash, hang or allocate without bound, whatever the input. Problems
// must come out as JsonError only.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flowdsl/json.hpp"
#include "flowdsl/kernels.hpp"

namespace {

void host_fn(void*) {}

const flowdsl::KernelRegistry& builtins() {
  static const flowdsl::KernelRegistry* registry = [] {
    auto* made = new flowdsl::KernelRegistry;
    flowdsl::kernels::register_builtins(*made);
    return made;
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  flowdsl::JsonLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_nodes = 10'000;
  const flowdsl::HostFunctions hosts{{"noop", {host_fn, nullptr}}};
  try {
    const flowdsl::GraphSpec spec =
        flowdsl::parse_graph(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", limits);
    flowdsl::check_graph(spec, builtins(), hosts);
    // What was accepted must write and read back.
    (void)flowdsl::parse_graph(flowdsl::to_json_text(spec), "fuzz-roundtrip", limits);
  } catch (const flowdsl::JsonError&) {
  }
  return 0;
}
