// SPDX-License-Identifier: Apache-2.0
// An optional stage skipped on the device: the energy of x (the sum of its squares) decides,
// through an IF node, whether y is x re-normalised row by row (layer normalisation) or x as it
// is; the statistic never travels to the host. The C++ twin of
// samples/renormalise_if.json (same nodes, names and launch shapes). Runs both
// outcomes, a threshold under the energy and then one over it (a parameter update of the
// deciding kernel), and checks y against the host reference each time.
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"
#include "reference.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;

namespace {
constexpr int rows = 64, cols = 1024, n = rows * cols;
constexpr float eps = 1e-5f;
}  // namespace

int main() {
  if (!sample::have_device()) return sample::skipped;
  const std::vector<float> host_x = sample::random_floats(n, 5);
  double energy = 0;
  for (float v : host_x) energy += double(v) * v;
  const std::vector<double> normalised = ref::layer_norm(rows, cols, eps, host_x, std::vector<float>(cols, 1.0f),
                                                         std::vector<float>(cols, 0.0f));

  const sample::DeviceArray<float> x = sample::device_copy(host_x), squares(n), total(1), y(n);
  const sample::DeviceArray<float> gamma = sample::device_copy(std::vector<float>(cols, 1.0f)),
                                   beta = sample::device_copy(std::vector<float>(cols, 0.0f));
  const sample::DeviceArray<double> partials(fk::sum_max_partials);

  flowdsl::Graph g;
  auto keep = g.memcpy("keep", y.get(), x.get(), y.bytes());
  auto square = fk::multiply(g, "square", n, static_cast<const float*>(x.get()), static_cast<const float*>(x.get()),
                             squares.get());
  auto sum = fk::sum(g, "total", n, static_cast<const float*>(squares.get()), partials.get(), total.get());
  sum.partial.after(square);
  auto renorm = g.if_then("renorm");
  auto too_large = fk::condition_greater(g, "too_large", total.get(), 20000.0f, renorm.condition()).after(sum.finish);
  renorm.after(keep, too_large);
  fk::layer_norm(renorm.body(), "layer_norm", rows, cols, eps, static_cast<const float*>(x.get()),
                 static_cast<const float*>(gamma.get()), static_cast<const float*>(beta.get()), y.get());

  bool ok = true;
  try {
    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    // Threshold 10% under the energy (re-normalised), then 10% over it (passed on).
    for (const double factor : {0.9, 1.1}) {
      const float threshold = static_cast<float>(factor * energy);
      too_large.arg<1>(threshold);
      SAMPLE_CHECK(cudaMemset(y.get(), 0xff, y.bytes()));
      SAMPLE_CHECK(cudaMemset(total.get(), 0xff, total.bytes()));
      SAMPLE_CHECK(cudaDeviceSynchronize());
      const flowdsl::LaunchReport report = runtime.launch(g, stream.get());
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      SAMPLE_CHECK(cudaGetLastError());
      std::vector<float> got(n);
      float got_energy = 0;
      SAMPLE_CHECK(cudaMemcpy(got.data(), y.get(), y.bytes(), cudaMemcpyDeviceToHost));
      SAMPLE_CHECK(cudaMemcpy(&got_energy, total.get(), sizeof got_energy, cudaMemcpyDeviceToHost));
      const bool taken = energy > threshold;
      std::size_t bad = 0;
      for (int i = 0; i < n; ++i) bad += taken ? !(std::fabs(got[i] - normalised[i]) <= 1e-4) : !(got[i] == host_x[i]);
      const bool energy_right = std::fabs(got_energy - energy) <= 1e-5 * energy;
      std::printf("renormalise_if: energy %.2f (host %.2f), threshold %.2f: %s; launch %s; %zu mismatches\n", got_energy,
                  energy, threshold, taken ? "re-normalised" : "passed on as it is",
                  report.kind == flowdsl::LaunchKind::instantiated ? "instantiated" : "updated in place", bad);
      ok = ok && bad == 0 && energy_right;
    }
    const flowdsl::RuntimeStatistics st = runtime.statistics();
    if (st.misses != 1 || st.reinstantiations != 0) {
      std::printf("expected one instantiation, then a parameter update\n");
      ok = false;
    }
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "renormalise_if: matches reference\n" : "renormalise_if: DOES NOT match reference\n");
  return ok ? 0 : 1;
}
