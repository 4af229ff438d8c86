// SPDX-License-Identifier: Apache-2.0
// Preprocessing a stream of image-like tensors into fixed-shape bfloat16 batches: pad each
// variable-size image (flattened pixels in [0, 255]) to the batch width with a validity mask,
// normalise ((x / 255 - mean) / std, as a scale and a per-column bias in one fused kernel),
// cast to bfloat16. Each batch binds new input buffers (a parameter-only update). Graph
// replay against the same kernels launched one by one, and against the graph fused
// (Graph::fuse); batches of each checked against the host.
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"
#include "reference.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;

namespace {

using sample::device_copy;
using sample::DeviceArray;
constexpr int batch = 256, width = 3 * 64 * 64, input_sets = 4, batches = 100;
constexpr float mean = 0.45f, stddev = 0.25f;

struct Images {
  std::vector<float> pixels;
  std::vector<std::int32_t> offsets;
};
Images make_images(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> side(40, 64);  // 3 x h x w images, h and w in [40, 64]
  std::uniform_int_distribution<int> pixel(0, 255);
  Images im{{}, {0}};
  for (int b = 0; b < batch; ++b) im.offsets.push_back(im.offsets.back() + 3 * side(rng) * side(rng));
  im.pixels.resize(im.offsets.back());
  for (float& p : im.pixels) p = static_cast<float>(pixel(rng));
  return im;
}
}  // namespace

int main() {
  if (!sample::have_device()) return sample::skipped;
  const float a = 1.0f / (255.0f * stddev);
  const std::vector<float> bias(width, -mean / stddev);
  std::vector<Images> images;
  std::vector<DeviceArray<float>> d_pixels;
  std::vector<DeviceArray<std::int32_t>> d_offsets;
  for (int s = 0; s < input_sets; ++s) {
    images.push_back(make_images(300 + s));
    d_pixels.push_back(device_copy(images.back().pixels));
    d_offsets.push_back(device_copy(images.back().offsets));
  }
  const DeviceArray<float> d_bias = device_copy(bias);
  const std::size_t n = std::size_t(batch) * width;
  const DeviceArray<float> padded(n), scaled(n), normalised(n);
  const DeviceArray<__nv_bfloat16> out(n);
  const DeviceArray<std::uint8_t> mask(n);

  // The pad value is the mean pixel, so that padding normalises to zero. The same graph twice:
  // as declared, and fused (scale, normalise and cast run as one generated kernel, the
  // intermediates kept in registers).
  fk::register_builtins(flowdsl::KernelRegistry::global());  // the fusion pass reads element functions
  struct Pipeline {
    flowdsl::Graph g;
    std::optional<flowdsl::KernelNode<std::int32_t, std::int32_t, float, const float*, const std::int32_t*, float*, std::uint8_t*>> pad;
  };
  auto declare = [&](Pipeline& p, bool fuse) {
    flowdsl::Graph& g = p.g;
    g.fuse(fuse);
    p.pad.emplace(fk::pad(g, "pad", batch, width, 255.0f * mean, static_cast<const float*>(d_pixels[0].get()),
                          d_offsets[0].get(), padded.get(), mask.get()));
    auto scale =
        fk::scale(g, "scale", static_cast<std::int64_t>(n), a, static_cast<const float*>(padded.get()), scaled.get())
            .after(*p.pad);
    auto shift = fk::bias_activation(g, "normalise", batch, width, fk::Activation::none,
                                     static_cast<const float*>(scaled.get()), static_cast<const float*>(d_bias.get()),
                                     normalised.get())
                     .after(scale);
    fk::cast(g, "to_bf16", static_cast<std::int64_t>(n), static_cast<const float*>(normalised.get()), out.get())
        .after(shift);
  };
  Pipeline plain, fused;
  declare(plain, false);
  declare(fused, true);
  flowdsl::Graph& g = plain.g;

  bool ok = true;
  try {
    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    auto bind = [&](int i) {
      for (Pipeline* p : {&plain, &fused}) {
        p->pad->arg<3>(static_cast<const float*>(d_pixels[i % input_sets].get())).arg<4>(d_offsets[i % input_sets].get());
      }
    };
    auto check = [&](int i) {
      const Images& im = images[i % input_sets];
      const ref::Padded p = ref::pad(batch, width, 255.0f * mean, im.pixels, im.offsets);
      std::vector<__nv_bfloat16> got(n);
      std::vector<std::uint8_t> got_mask(n);
      SAMPLE_CHECK(cudaMemcpy(got.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
      SAMPLE_CHECK(cudaMemcpy(got_mask.data(), mask.get(), mask.bytes(), cudaMemcpyDeviceToHost));
      std::size_t bad = 0;
      for (std::size_t k = 0; k < n; ++k) {
        const double want = double(a * p.values[k]) + bias[k % width];
        bad += !(std::fabs(__bfloat162float(got[k]) - want) <= 1e-2 * std::max(1.0, std::fabs(want)));
        bad += got_mask[k] != p.mask[k];
      }
      std::printf("batch %d: %zu mismatches against the host reference\n", i, bad);
      return bad == 0;
    };
    auto start = flowdsl::make_event(), stop = flowdsl::make_event();
    auto timed = [&](auto&& launch) {
      SAMPLE_CHECK(cudaEventRecord(start.get(), stream.get()));
      for (int i = 1; i <= batches; ++i) {
        bind(i);
        launch();
      }
      SAMPLE_CHECK(cudaEventRecord(stop.get(), stream.get()));
      SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
      float ms = 0;
      SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      return ms;
    };
    bind(0);
    runtime.launch(g, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    ok = check(0);
    const float graph_ms = timed([&] { runtime.launch(g, stream.get()); });
    ok = check(batches) && ok;
    const float stream_ms = timed([&] { flowdsl::launch_eagerly(g, stream.get()); });
    ok = check(batches) && ok;
    bind(0);
    runtime.launch(fused.g, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    ok = check(0) && ok;
    const float fused_ms = timed([&] { runtime.launch(fused.g, stream.get()); });
    ok = check(batches) && ok;
    const double bytes = double(batches) * n * (4 + 1 + 4 + 4 + 4 + 4 + 4 + 2);  // pad in+out+mask, scale, bias, cast
    std::printf("preprocess: %d batches of %d images, width %d\n", batches, batch, width);
    std::printf("%-30s %10s %16s %14s\n", "", "GPU ms", "images/s", "GB/s");
    std::printf("%-30s %10.2f %16.0f %14.0f\n", "graph replay", graph_ms, batches * double(batch) / (graph_ms * 1e-3),
                bytes / (graph_ms * 1e6));
    std::printf("%-30s %10.2f %16.0f %14.0f\n", "kernels one by one (stream)", stream_ms,
                batches * double(batch) / (stream_ms * 1e-3), bytes / (stream_ms * 1e6));
    std::printf("%-30s %10.2f %16.0f %14s\n", "graph replay, fused", fused_ms, batches * double(batch) / (fused_ms * 1e-3),
                "-");
    std::printf("ratio stream / graph: %.2f\n", stream_ms / graph_ms);
    std::printf("ratio graph / fused graph: %.2f\n", graph_ms / fused_ms);
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "preprocess: matches reference\n" : "preprocess: DOES NOT match reference\n");
  return ok ? 0 : 1;
}
