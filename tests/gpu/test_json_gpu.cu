// SPDX-License-Identifier: Apache-2.0
// JSON graph files on the GPU: `flowdsl run` on every sample writes, byte for byte, what the
// same graph built in C++ with the kernel library's launchers computes; a kernel loaded from a
// cubin runs and updates like a linked one.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernel_files.hpp"
#include "flowdsl/kernels.hpp"
#include "gpu_support.cuh"
#include "npy.hpp"
#ifdef FLOWDSL_HAS_NCCL
#include "flowdsl/nccl.hpp"
#endif

namespace fk = flowdsl::kernels;

namespace {

// The registry of the `flowdsl` tool: the built-in kernels.
const flowdsl::KernelRegistry& builtins() {
  static const flowdsl::KernelRegistry* r = [] {
    auto* made = new flowdsl::KernelRegistry;
    fk::register_builtins(*made);
#ifdef FLOWDSL_HAS_NCCL
    flowdsl::nccl::register_calls(*made);  // samples/allreduce.json, as the tool does
#endif
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
  template <class T>
  T* get(const std::string& name) const {
    return static_cast<T*>(at.at(name));
  }
  float* f32(const std::string& name) const { return get<float>(name); }
  std::vector<unsigned char> download(const std::string& name, std::size_t bytes) const {
    std::vector<unsigned char> host(bytes);
    CUDA_REQUIRE(cudaMemcpy(host.data(), at.at(name), bytes, cudaMemcpyDeviceToHost));
    return host;
  }
  std::vector<float> download_f32(const std::string& name, std::size_t n) const {
    std::vector<float> host(n);
    CUDA_REQUIRE(cudaMemcpy(host.data(), at.at(name), n * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }
};

// The sample graphs as C++ writes them with the kernel library, over the same buffers: same
// node names, order and dependencies as samples/*.json.
flowdsl::Graph diamond_in_cpp(const Buffers& b) {
  const std::int64_t n = 1 << 20;
  float *x = b.f32("x"), *left = b.f32("left"), *right = b.f32("right"), *z = b.f32("z");
  flowdsl::Graph g;
  auto up = g.memcpy("upload", x, b.f32("input"), n * 4);
  auto l = fk::scale(g, "left", n, 2.0f, x, left).after(up);
  auto r = fk::scale(g, "right", n, 0.5f, x, right).after(up);
  auto join = g.empty("join").after(l, r);
  auto c = fk::multiply(g, "combine", n, left, right, z).after(join).reads(left).reads(right).writes(z);
  g.memcpy("download", b.f32("output"), z, n * 4).after(c);
  return g;
}

flowdsl::Graph pipeline_in_cpp(const Buffers& b) {
  const std::int64_t n = 1 << 16;
  float* y = b.f32("y");
  flowdsl::Graph g;
  auto zero = g.memset("zero", y, 0, n * 4);
  auto axpy = fk::axpy(g, "axpy", n, 1.0f, b.f32("x0"), y).after(zero);
  auto clamp = fk::clamp(g, "clamp", n, -0.5f, 0.5f, y, y).after(axpy);
  g.memcpy("download", b.f32("result"), y, n * 4).after(clamp);
  return g;
}

flowdsl::Graph mlp_inference_in_cpp(const Buffers& b) {
  const int batch = 128, width = 256, hidden = 512, classes = 16;
  auto* x16 = b.get<__nv_bfloat16>("x16");
  auto* h16 = b.get<__nv_bfloat16>("h16");
  flowdsl::Graph g;
  auto pad = fk::pad(g, "pad", batch, width, 0.0f, b.f32("values"), b.get<std::int32_t>("offsets"), b.f32("padded"),
                     b.get<std::uint8_t>("mask"));
  auto cast_in = fk::cast(g, "cast_in", std::int64_t{batch} * width, b.f32("padded"), x16).after(pad);
  auto linear1 = fk::matmul(g, "linear1", batch, hidden, width, x16, b.get<__nv_bfloat16>("w1"), b.f32("b1"),
                            fk::Activation::gelu, b.f32("h")).after(cast_in);
  auto cast_h = fk::cast(g, "cast_h", std::int64_t{batch} * hidden, b.f32("h"), h16).after(linear1);
  auto linear2 = fk::matmul(g, "linear2", batch, classes, hidden, h16, b.get<__nv_bfloat16>("w2"), b.f32("b2"),
                            fk::Activation::none, b.f32("logits")).after(cast_h);
  auto softmax = fk::softmax(g, "softmax", batch, classes, b.f32("logits"), b.f32("probs")).after(linear2);
  fk::row_argmax(g, "argmax", batch, classes, b.f32("probs"), b.get<std::int32_t>("classes")).after(softmax);
  return g;
}

flowdsl::Graph preprocess_in_cpp(const Buffers& b) {
  const int batch = 16, width = 3 * 64 * 64;
  const std::int64_t n = std::int64_t{batch} * width;
  const double mean = 0.45, stddev = 0.25;
  flowdsl::Graph g;
  auto pad = fk::pad(g, "pad", batch, width, static_cast<float>(255.0 * mean), b.f32("pixels"),
                     b.get<std::int32_t>("offsets"), b.f32("padded"), b.get<std::uint8_t>("mask"));
  auto scale = fk::scale(g, "scale", n, static_cast<float>(1.0 / (255.0 * stddev)), b.f32("padded"), b.f32("scaled")).after(pad);
  auto shift = fk::bias_activation(g, "normalise", batch, width, fk::Activation::none, b.f32("scaled"), b.f32("bias"),
                                   b.f32("normalised")).after(scale);
  fk::cast(g, "to_bf16", n, b.f32("normalised"), b.get<__nv_bfloat16>("out")).after(shift);
  return g;
}

flowdsl::Graph rl_cartpole_in_cpp(const Buffers& b) {
  const int envs = 4096, steps = 8, max_steps = 500;
  const std::uint64_t seed = 2026;
  float *state = b.f32("state"), *reward = b.f32("reward_sum"), *neg_obs = b.f32("neg_obs"), *rows = b.f32("rows");
  auto* episode_steps = b.get<std::int32_t>("episode_steps");
  auto* episodes = b.get<std::int32_t>("episodes");
  auto* action = b.get<std::int32_t>("action");
  auto* done = b.get<std::uint8_t>("done");
  flowdsl::Graph g;
  flowdsl::NodeHandle last = fk::cartpole_reset(g, "reset", envs, seed, state, reward, episode_steps, episodes, done);
  for (int s = 0; s < steps; ++s) {
    // The policy "theta + 0.5 theta_dot + 0.01 x_dot > 0" as argmax of the rows [-obs, 0].
    const std::string p = "policy" + std::to_string(s);
    auto theta = fk::scale(g, p + ".theta", envs, -1.0f, state + 2 * envs, neg_obs).after(last);
    auto theta_dot = fk::axpy(g, p + ".theta_dot", envs, -0.5f, state + 3 * envs, neg_obs).after(theta);
    auto x_dot = fk::axpy(g, p + ".x_dot", envs, static_cast<float>(-0.01), state + envs, neg_obs).after(theta_dot);
    auto pad = fk::pad(g, p + ".rows", envs, 2, 0.0f, neg_obs, b.get<std::int32_t>("row_offsets"), rows,
                       b.get<std::uint8_t>("rows_mask")).after(x_dot);
    auto policy = fk::row_argmax(g, p, envs, 2, rows, action).after(pad);
    last = fk::cartpole_step(g, "step" + std::to_string(s), envs, seed, max_steps, action, state, reward, episode_steps,
                             episodes, done).after(policy);
  }
  return g;
}

flowdsl::Graph heat2d_in_cpp(const Buffers& b) {
  const int nx = 128, ny = 96, steps = 20;
  float *u = b.f32("u"), *v = b.f32("v");
  flowdsl::Graph g;
  flowdsl::NodeHandle last = g.memcpy("load", u, b.f32("initial"), std::size_t{4} * nx * ny);
  for (int s = 0; s < steps; ++s) {
    fk::Heat2dNodes nodes = fk::heat2d_step(g, "heat" + std::to_string(s), nx, ny, 0.2f, s % 2 ? v : u, s % 2 ? u : v,
                                            b.get<double>("partials") + std::size_t(s) * fk::sum_max_partials,
                                            b.f32("residuals") + s);
    nodes.step.after(last);
    last = nodes.step;
  }
  return g;
}

flowdsl::Graph renormalise_if_in_cpp(const Buffers& b) {
  const std::int64_t n = 65536;
  const int rows = 64, cols = 1024;
  const float* x = b.f32("x");
  flowdsl::Graph g;
  auto keep = g.memcpy("keep", b.f32("y"), x, n * 4);
  auto square = fk::multiply(g, "square", n, x, x, b.f32("squares"));
  auto sum = fk::sum(g, "total", n, static_cast<const float*>(b.f32("squares")), b.get<double>("partials"), b.f32("energy"));
  sum.partial.after(square);
  auto renorm = g.if_then("renorm");
  auto too_large = fk::condition_greater(g, "too_large", b.f32("energy"), 20000.0f, renorm.condition()).after(sum.finish);
  renorm.after(keep, too_large);
  fk::layer_norm(renorm.body(), "layer_norm", rows, cols, 1e-5f, x, static_cast<const float*>(b.f32("gamma")),
                 static_cast<const float*>(b.f32("beta")), b.f32("y"));
  return g;
}

#ifdef FLOWDSL_HAS_NCCL
// One rank: the all-reduce and all-gather are copies. Communicator 0 is the test case's.
flowdsl::Graph allreduce_in_cpp(const Buffers& b) {
  const std::int64_t n = 1024;
  flowdsl::Graph g;
  auto copy = g.memcpy("copy", b.f32("d"), b.f32("x"), n * 4);
  auto twice = fk::scale(g, "double", n, 2.0f, b.f32("x"), b.f32("d")).after(copy);
  const auto call = [&](const char* name, const char* entry) { return g.library(name, *builtins().find(entry)); };
  const auto set = [](flowdsl::RegisteredLibraryNode& node, const char* param, auto value) {
    node.set_bytes(param, &value, sizeof value);
  };
  auto sum = call("sum", "nccl.all_reduce.f32");
  set(sum, "comm", std::int32_t{0});
  set(sum, "count", std::uint64_t{1024});
  set(sum, "op", std::int32_t{ncclSum});
  set(sum, "send", static_cast<const float*>(b.f32("d")));
  set(sum, "recv", b.f32("y"));
  sum.after(twice);
  auto gather = call("gather", "nccl.all_gather.f32");
  set(gather, "comm", std::int32_t{0});
  set(gather, "count", std::uint64_t{1024});
  set(gather, "ranks", std::int32_t{1});
  set(gather, "send", static_cast<const float*>(b.f32("y")));
  set(gather, "recv", b.f32("z"));
  gather.after(sum);
  return g;
}
#endif

}  // namespace

TEST_CASE("flowdsl run on every sample writes what the same graph built in C++ computes", "[json][cli][gpu]") {
  std::map<std::string, flowdsl::Graph (*)(const Buffers&)> twins = {
      {"diamond", diamond_in_cpp},       {"pipeline", pipeline_in_cpp}, {"mlp_inference", mlp_inference_in_cpp},
      {"preprocess", preprocess_in_cpp}, {"rl_cartpole", rl_cartpole_in_cpp}, {"heat2d", heat2d_in_cpp},
      {"renormalise_if", renormalise_if_in_cpp}};
#ifdef FLOWDSL_HAS_NCCL
  // The first communicator of this process: the "comm": 0 of samples/allreduce.json.
  const flowdsl::nccl::Communicator comm = flowdsl::nccl::Communicator::single(0);
  REQUIRE(comm.id() == 0);
  twins.emplace("allreduce", allreduce_in_cpp);
#endif
  std::size_t samples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FLOWDSL_SAMPLES_DIR)) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    const std::string file = entry.path().string();
    INFO("sample " << name);
    ++samples;
#ifndef FLOWDSL_HAS_NCCL
    if (name == "allreduce") {  // built without NCCL: the tool cannot run it
      --samples;
      continue;
    }
#endif
    const auto twin = twins.find(name);
    REQUIRE(twin != twins.end());  // every sample graph file has its C++ twin here

    // The tool creates the (nested) output folder.
    const std::filesystem::path out_dir = std::filesystem::path("json_gpu") / name;
    std::filesystem::remove_all(out_dir);
    const std::string command = "'" FLOWDSL_CLI "' run '" + file + "' --iterations 3 --out " + out_dir.string();
    REQUIRE(std::system(command.c_str()) == 0);

    const flowdsl::GraphSpec spec = flowdsl::read_graph_file(file);
    const Buffers buffers(spec);
    const flowdsl::Graph cpp = twin->second(buffers);
    const flowdsl::Graph loaded = flowdsl::bind_graph(spec, buffers.at, builtins());
    CHECK(cpp.description().nodes.size() == loaded.description().nodes.size());
    CHECK(cpp.topology_hash() == loaded.topology_hash());

    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    runtime.launch(cpp, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    std::size_t outputs = 0;
    for (const flowdsl::BufferSpec& out : spec.buffers) {
      if (!out.output) continue;
      INFO("output buffer " << out.name);
      ++outputs;
      const std::vector<unsigned char> want = buffers.download(out.name, out.bytes());
      const std::vector<unsigned char> got =
          flowdsl::cli::read_npy((out_dir / (out.name + ".npy")).string(), out.type, out.count);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
    }
    CHECK(outputs > 0);
  }
  CHECK(samples == twins.size());
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
  flowdsl::check_graph(spec, builtins());
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
  CHECK(buffers.download_f32("a", 1000) == std::vector<float>(1000, 3.0f));

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
  CHECK(buffers.download_f32("b", 1000) == std::vector<float>(1000, -4.0f * 2.0f * 0.5f));
  CHECK(runtime.statistics().reinstantiations == 0);
}
