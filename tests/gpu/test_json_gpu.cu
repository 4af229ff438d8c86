// JSON graph files on the GPU: `flowdsl run` on every sample equals the same graph built in
// C++, and a kernel loaded from a cubin runs and updates like a linked one.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "buffers.hpp"
#include "cli_kernels.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernel_library.hpp"
#include "gpu_support.cuh"
#include "npy.hpp"

namespace {

const flowdsl::KernelRegistry& tool_kernels() {
  static flowdsl::KernelRegistry* r = [] {
    auto* made = new flowdsl::KernelRegistry;
    flowdsl::cli::register_cli_kernels(*made);
    return made;
  }();
  return *r;
}

// Device buffers for every buffer of a spec, initialised as `flowdsl run` does.
struct Buffers {
  std::vector<std::unique_ptr<flowdsl_test::DeviceBuffer<unsigned char>>> owned;
  flowdsl::BufferAddresses at;

  explicit Buffers(const flowdsl::GraphSpec& spec) {
    for (const auto& b : spec.buffers) {
      owned.push_back(std::make_unique<flowdsl_test::DeviceBuffer<unsigned char>>(b.bytes()));
      owned.back()->upload(flowdsl::cli::initial_contents(b, FLOWDSL_SAMPLES_DIR));
      at[b.name] = owned.back()->get();
    }
  }
  float* f32(const std::string& name) const { return static_cast<float*>(at.at(name)); }
  std::vector<float> download(const std::string& name, std::size_t n) const {
    std::vector<float> host(n);
    CUDA_REQUIRE(cudaMemcpy(host.data(), at.at(name), n * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }
};

// The sample graphs as the C++ builder writes them, over the same buffers.
flowdsl::Graph diamond_in_cpp(const Buffers& b) {
  const auto& k = tool_kernels();
  const int n = 1 << 20;
  flowdsl::Graph g;
  auto up = g.memcpy("upload", b.f32("x"), b.f32("input"), n * 4);
  auto l = g.kernel("left", *k.find("scale_f32")).launch(4096, 256).set("n", n).set("alpha", 2.0f)
               .set("x", b.f32("x")).set("y", b.f32("left")).after(up);
  auto r = g.kernel("right", *k.find("scale_f32")).launch(4096, 256).set("n", n).set("alpha", 0.5f)
               .set("x", b.f32("x")).set("y", b.f32("right")).after(up);
  auto join = g.empty("join").after(l, r);
  auto c = g.kernel("combine", *k.find("multiply_add_f32")).launch(4096, 256).set("n", n).set("a", b.f32("left"))
               .set("b", b.f32("right")).set("out", b.f32("z")).after(join);
  c.reads(b.f32("left"), n * 4).reads(b.f32("right"), n * 4).writes(b.f32("z"), n * 4);
  g.memcpy("download", b.f32("output"), b.f32("z"), n * 4).after(c);
  return g;
}

flowdsl::Graph pipeline_in_cpp(const Buffers& b) {
  const auto& k = tool_kernels();
  const int n = 1 << 16;
  flowdsl::Graph g;
  auto zero = g.memset("zero", b.f32("y"), 0, n * 4);
  auto axpy = g.kernel("axpy", *k.find("axpy_f32")).launch(256, 256).set("n", n).set("alpha", 1.0f)
                  .set("x", b.f32("x0")).set("y", b.f32("y")).after(zero);
  auto clamp = g.kernel("clamp", *k.find("clamp_f32")).launch(256, 256).set("n", n).set("lo", -0.5f)
                   .set("hi", 0.5f).set("y", b.f32("y")).after(axpy);
  g.memcpy("download", b.f32("result"), b.f32("y"), n * 4).after(clamp);
  return g;
}

}  // namespace

TEST_CASE("flowdsl run on every sample writes what the same graph built in C++ computes", "[json][cli][gpu]") {
  struct Case {
    const char* name;
    const char* output;
    flowdsl::Graph (*build)(const Buffers&);
  };
  for (const Case& c : {Case{"diamond", "output", diamond_in_cpp}, Case{"pipeline", "result", pipeline_in_cpp}}) {
    INFO(c.name);
    const std::string file = std::string(FLOWDSL_SAMPLES_DIR) + "/" + c.name + ".json";
    const std::string out_dir = std::string("json_gpu_") + c.name;
    const std::string command = "mkdir -p " + out_dir + " && '" FLOWDSL_CLI "' run '" + file + "' --iterations 3 --out " + out_dir;
    REQUIRE(std::system(command.c_str()) == 0);

    const flowdsl::GraphSpec spec = flowdsl::read_graph_file(file);
    const Buffers buffers(spec);
    const flowdsl::Graph cpp = c.build(buffers);
    const flowdsl::Graph loaded = flowdsl::bind_graph(spec, buffers.at, tool_kernels());
    CHECK(cpp.topology_hash() == loaded.topology_hash());

    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    runtime.launch(cpp, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    const flowdsl::BufferSpec& out = *std::find_if(spec.buffers.begin(), spec.buffers.end(),
                                                   [&](const flowdsl::BufferSpec& b) { return b.name == c.output; });
    const std::vector<float> want = buffers.download(c.output, out.count);
    const std::vector<unsigned char> got = flowdsl::cli::read_npy(out_dir + "/" + c.output + ".npy", out.type, out.count);
    REQUIRE(got.size() == want.size() * sizeof(float));
    CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
  }
}

TEST_CASE("A kernel loaded from a cubin runs and updates like a linked one", "[json][kernel_files][gpu]") {
  const std::string text = R"({"version": 1, "name": "cubin",
    "kernel_files": [{"name": "twice", "file": ")" FLOWDSL_TWICE_CUBIN R"(", "symbol": "twice",
                      "params": [{"name": "n", "type": "i32"}, {"name": "factor", "type": "f32"},
                                 {"name": "data", "type": "f32*"}]}],
    "buffers": [{"name": "a", "type": "f32", "count": 1000, "init": {"kind": "constant", "value": 1.5}},
                {"name": "b", "type": "f32", "count": 1000, "init": {"kind": "constant", "value": -4}}],
    "nodes": [{"name": "k", "kind": "kernel", "kernel": "twice", "grid": 4, "block": 256,
               "args": {"n": 1000, "factor": 1.0, "data": "a"}}]})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text);
  flowdsl::check_graph(spec, tool_kernels());
  flowdsl::KernelRegistry registry;
  const std::vector<flowdsl::KernelLibrary> libraries = flowdsl::load_kernel_files(spec, "", registry);
  REQUIRE(libraries.size() == 1);
  const Buffers buffers(spec);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime runtime;

  // From JSON.
  const flowdsl::Graph loaded = flowdsl::bind_graph(spec, buffers.at, registry);
  CHECK(runtime.launch(loaded, stream.get()).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(buffers.download("a", 1000) == std::vector<float>(1000, 3.0f));

  // From C++, through the registry entry: argument changes update the executable in place.
  flowdsl::Graph g;
  auto k = g.kernel("k", *registry.find("twice")).launch(4, 256).set("n", 1000).set("factor", 1.0f).set("data", buffers.f32("b"));
  CHECK(g.topology_hash() == loaded.topology_hash());
  CHECK(runtime.launch(g, stream.get()).kind != flowdsl::LaunchKind::instantiated);  // shares the executable
  k.set("factor", 0.25f);
  const flowdsl::LaunchReport report = runtime.launch(g, stream.get());
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(buffers.download("b", 1000) == std::vector<float>(1000, -4.0f * 2.0f * 0.5f));
  CHECK(runtime.statistics().reinstantiations == 0);
}
