// libFuzzer target: the JSON graph reader and checker must never crash, hang or allocate
// without bound, whatever the input. Problems must come out as JsonError only.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flowdsl/json.hpp"

namespace {

// Host stand-ins with kernel signatures: checking never launches them.
void scale(int, float, const float*, float*) {}
void fill(std::uint64_t, __half, __half*) {}
void host_fn(void*) {}

const flowdsl::KernelRegistry& registry() {
  static flowdsl::KernelRegistry* r = [] {
    auto* made = new flowdsl::KernelRegistry;
    made->add("scale_f32", scale, {"n", "alpha", "x", "y"});
    made->add("fill_f16", fill, {"n", "value", "out"});
    return made;
  }();
  return *r;
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
    flowdsl::check_graph(spec, registry(), hosts);
    // What was accepted must write and read back.
    (void)flowdsl::parse_graph(flowdsl::to_json_text(spec), "fuzz-roundtrip", limits);
  } catch (const flowdsl::JsonError&) {
  }
  return 0;
}
