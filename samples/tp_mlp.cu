// SPDX-License-Identifier: Apache-2.0
// Tensor-parallel MLP for serving: y = gelu(x W1 + b1) W2 + b2 with the first layer split by
// columns across the ranks, the second by rows, and an all-reduce of the partial outputs
// (optionally pipelined over chunks of rows, `--chunks`, so that it overlaps the next chunk's
// matmuls), as one flowdsl graph per row bucket on every rank (a launch is a collective: every
// rank launches the same graphs in the same order). Each rank also runs the whole MLP on its own
// GPU (the one-GPU graph) and checks the tensor-parallel output against it; rank 0 checks rows of
// that against a host reference. Both are timed, launches back to back, in rounds taking turns.
//
//   ./tp_mlp                                          one rank (the all-reduce is a copy)
//   NCCL_NVLS_ENABLE=0 mpirun -np 2 ./tp_mlp           one rank per GPU of this host
//
// Rank, size and the way NCCL's id travels come from the launcher (flowdsl::nccl::Bootstrap).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common.cuh"
#include "flowdsl/cublaslt.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"
#include "flowdsl/nccl.hpp"

namespace fk = flowdsl::kernels;
namespace nccl = flowdsl::nccl;
using bf16 = __nv_bfloat16;

namespace {

using sample::DeviceArray;

// How a bucket's rows go through the tensor-parallel graph.
struct Pipeline {
  int chunks = 1;      // up to this many chunks, of 512 rows or more on average (on two H200s
                       // one chunk is fastest: NCCL's kernels slow the overlapped matmuls)
  bool taper = false;  // chunk sizes falling k, k - 1, ..., 1 (the last all-reduce, which
                       // nothing overlaps, is then the smallest)
  bool bf16_sum = false;  // partial outputs rounded to bf16 and summed in bf16 (half the bytes),
                          // then widened to f32
};

struct Options {
  std::vector<int> rows{16, 128, 1024, 4096};
  int width = 4096, hidden = 16384, out = 4096;
  int iterations = 100;
  Pipeline pipeline;
};

float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

// Random values of magnitude `scale`, rounded to bf16 (what the GPU sees).
std::vector<float> random_bf16(std::size_t n, unsigned seed, float scale) {
  std::vector<float> v = sample::random_floats(n, seed);
  for (float& x : v) x = round_bf16(x * scale);
  return v;
}

template <class T>
DeviceArray<T> device_of(const std::vector<T>& host) {
  return sample::device_copy(host);
}

// cuBLASLt's gelu: the tanh approximation.
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// The model, whole and this rank's shard of it, on this rank's GPU.
struct Model {
  int width, hidden, out, shard;  // shard: hidden columns of this rank
  std::vector<float> w1, b1, w2, b2;  // whole, bf16-rounded values (b2 in float)
  DeviceArray<bf16> w1_all, b1_all, w2_all, w1_shard, b1_shard, w2_shard;
  DeviceArray<float> b2_dev;
  DeviceArray<bf16> b2_bf16;  // the same values (b2 is bf16-rounded)

  Model(const Options& o, int rank, int world)
      : width(o.width), hidden(o.hidden), out(o.out), shard(o.hidden / world),
        w1(random_bf16(std::size_t(o.width) * o.hidden, 1, 1.0f / std::sqrt(float(o.width)))),
        b1(random_bf16(o.hidden, 2, 0.1f)),
        w2(random_bf16(std::size_t(o.hidden) * o.out, 3, 1.0f / std::sqrt(float(o.hidden)))),
        b2(random_bf16(o.out, 4, 0.1f)) {
    std::vector<float> w1s(std::size_t(width) * shard), b1s(b1.begin() + std::size_t(rank) * shard,
                                                         b1.begin() + std::size_t(rank + 1) * shard);
    for (int k = 0; k < width; ++k) {
      std::copy_n(w1.begin() + std::size_t(k) * hidden + std::size_t(rank) * shard, shard, w1s.begin() + std::size_t(k) * shard);
    }
    const std::vector<float> w2s(w2.begin() + std::size_t(rank) * shard * out, w2.begin() + std::size_t(rank + 1) * shard * out);
    w1_all = device_of(to_bf16(w1));
    b1_all = device_of(to_bf16(b1));
    w2_all = device_of(to_bf16(w2));
    w1_shard = device_of(to_bf16(w1s));
    b1_shard = device_of(to_bf16(b1s));
    w2_shard = device_of(to_bf16(w2s));
    b2_dev = device_of(b2);
    b2_bf16 = device_of(to_bf16(b2));
  }
};

// Activations for the largest bucket.
struct Activations {
  DeviceArray<bf16> x, h_all, h_shard;
  DeviceArray<float> partial, y_tp, y_one;
  DeviceArray<bf16> partial_bf16, sum_bf16;  // Pipeline::bf16_sum
  Activations(const Model& m, int rows, const std::vector<float>& x_host)
      : x(device_of(to_bf16(x_host))), h_all(std::size_t(rows) * m.hidden), h_shard(std::size_t(rows) * m.shard),
        partial(std::size_t(rows) * m.out), y_tp(std::size_t(rows) * m.out), y_one(std::size_t(rows) * m.out),
        partial_bf16(std::size_t(rows) * m.out), sum_bf16(std::size_t(rows) * m.out) {}
};

// Rows [first, first + count) of a bucket: one chunk of the pipeline.
struct Chunk {
  int first, count;
};

// The bucket's rows in pieces (8-row multiples, so each piece's pointers stay 16-byte aligned);
// fewer pieces when the bucket is small.
std::vector<Chunk> chunks_of(int rows, const Pipeline& p) {
  const int k = std::max(1, std::min(p.chunks, rows / 512));
  const long weights = p.taper ? long(k) * (k + 1) / 2 : k;
  std::vector<Chunk> out;
  int first = 0;
  for (int i = 0; i < k && first < rows; ++i) {
    const long weight = p.taper ? k - i : 1;
    const int size = i + 1 == k ? rows - first : std::max(8, int((rows * weight / weights + 7) & ~7L));
    out.push_back({first, std::min(size, rows - first)});
    first += out.back().count;
  }
  return out;
}

// This rank's part: its columns of layer 1, its rows of layer 2 (rank 0 adds b2, so the sum
// holds it once), and the all-reduce into the output. The rows go through in chunks: chunk c's
// all-reduce has no edge to chunk c + 1's matmuls, so NCCL moves one chunk while the GPU
// multiplies the next. The matmuls form one chain and the all-reduces another (every rank's
// collectives in the same order). Without `all_reduce`, the matmuls alone (what the collectives
// add is the difference).
flowdsl::Graph tensor_parallel(const Model& m, const Activations& a, const nccl::Communicator& comm, int rows,
                               const Pipeline& pipeline, bool all_reduce = true) {
  flowdsl::Graph g;
  const bool adds_bias = comm.rank() == 0;
  std::string compute, reduce;  // the chains' last nodes
  for (const Chunk& c : chunks_of(rows, pipeline)) {
    const std::string at = "@" + std::to_string(c.first);
    auto linear1 = fk::cublaslt_matmul(g, "linear1" + at, c.count, m.shard, m.width,
                                       static_cast<const bf16*>(a.x.get()) + std::size_t(c.first) * m.width,
                                       static_cast<const bf16*>(m.w1_shard.get()),
                                       static_cast<const bf16*>(m.b1_shard.get()), fk::Epilogue::bias_gelu,
                                       a.h_shard.get() + std::size_t(c.first) * m.shard);
    if (!compute.empty()) linear1.after(compute);
    const std::size_t at_out = std::size_t(c.first) * m.out, count = std::size_t(c.count) * m.out;
    const bf16* h = a.h_shard.get() + std::size_t(c.first) * m.shard;
    const fk::Epilogue epilogue = adds_bias ? fk::Epilogue::bias : fk::Epilogue::none;
    // Layer 2 into `partial` (f32, or bf16 to be summed in bf16), then its all-reduce into `sum`
    // after the previous chunk's; false when the graph has no collectives.
    const auto layer2 = [&](auto* partial, const auto* bias, auto* sum, ncclDataType_t type) {
      auto linear2 = fk::cublaslt_matmul(g, "linear2" + at, c.count, m.out, m.shard, h,
                                         static_cast<const bf16*>(m.w2_shard.get()), adds_bias ? bias : nullptr,
                                         epilogue, partial)
                         .after(linear1);
      compute = linear2.name();
      if (!all_reduce) return false;
      auto summed = nccl::all_reduce(g, "all_reduce" + at, comm, partial, sum, count, type, ncclSum).after(linear2);
      if (!reduce.empty()) summed.after(reduce);
      reduce = summed.name();
      return true;
    };
    if (!pipeline.bf16_sum) {
      layer2(a.partial.get() + at_out, static_cast<const float*>(m.b2_dev.get()), a.y_tp.get() + at_out, ncclFloat32);
    } else if (layer2(a.partial_bf16.get() + at_out, static_cast<const bf16*>(m.b2_bf16.get()),
                      a.sum_bf16.get() + at_out, ncclBfloat16)) {
      fk::cast(g, "widen" + at, static_cast<std::int64_t>(count), static_cast<const bf16*>(a.sum_bf16.get()) + at_out,
               a.y_tp.get() + at_out)
          .after(reduce);
    }
  }
  return g;
}

// The whole MLP on this GPU.
flowdsl::Graph one_gpu(const Model& m, const Activations& a, int rows) {
  flowdsl::Graph g;
  auto linear1 = fk::cublaslt_matmul(g, "linear1", rows, m.hidden, m.width, static_cast<const bf16*>(a.x.get()),
                                     static_cast<const bf16*>(m.w1_all.get()), static_cast<const bf16*>(m.b1_all.get()),
                                     fk::Epilogue::bias_gelu, a.h_all.get());
  fk::cublaslt_matmul(g, "linear2", rows, m.out, m.hidden, static_cast<const bf16*>(a.h_all.get()),
                      static_cast<const bf16*>(m.w2_all.get()), static_cast<const float*>(m.b2_dev.get()), fk::Epilogue::bias,
                      a.y_one.get())
      .after(linear1);
  return g;
}

std::vector<float> download(const DeviceArray<float>& d, std::size_t n) {
  std::vector<float> host(n);
  SAMPLE_CHECK(cudaMemcpy(host.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// Largest |a - b| / (1 + |b|).
double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i])) / (1.0 + std::fabs(double(b[i])));
    w = std::isnan(d) ? INFINITY : std::max(w, d);
  }
  return w;
}

// Rows [0, count) of the whole MLP on the host, in double from the bf16 values, h rounded to
// bf16 as the GPU stores it.
std::vector<float> host_rows(const Model& m, const std::vector<float>& x, int count) {
  std::vector<float> y(std::size_t(count) * m.out);
  std::vector<double> h(m.hidden);
  for (int r = 0; r < count; ++r) {
    for (int j = 0; j < m.hidden; ++j) h[j] = m.b1[j];
    for (int k = 0; k < m.width; ++k) {
      const double xv = x[std::size_t(r) * m.width + k];
      const float* w = &m.w1[std::size_t(k) * m.hidden];
      for (int j = 0; j < m.hidden; ++j) h[j] += xv * w[j];
    }
    std::vector<double> acc(m.out);
    for (int c = 0; c < m.out; ++c) acc[c] = m.b2[c];
    for (int j = 0; j < m.hidden; ++j) {
      const double hv = round_bf16(float(gelu_tanh(h[j])));
      const float* w = &m.w2[std::size_t(j) * m.out];
      for (int c = 0; c < m.out; ++c) acc[c] += hv * w[c];
    }
    for (int c = 0; c < m.out; ++c) y[std::size_t(r) * m.out + c] = float(acc[c]);
  }
  return y;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per launch of `g`, `iterations` launches back to back after a warm-up.
double time_launches(flowdsl::Runtime& runtime, const flowdsl::Graph& g, cudaStream_t stream, int iterations) {
  for (int i = 0; i < 5; ++i) runtime.launch(g, stream);
  const flowdsl::EventHandle start = flowdsl::make_event(cudaEventDefault), stop = flowdsl::make_event(cudaEventDefault);
  SAMPLE_CHECK(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < iterations; ++i) runtime.launch(g, stream);
  SAMPLE_CHECK(cudaEventRecord(stop.get(), stream));
  SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return 1000.0 * ms / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tensor-parallel MLP on flowdsl graphs with an NCCL all-reduce (one process per GPU)"};
  Options o;
  bool quick = false;
  app.add_option("--rows", o.rows, "row buckets (requests batched per launch)");
  app.add_option("--width", o.width, "input and output features")->check(CLI::Range(8, 65536));
  app.add_option("--hidden", o.hidden, "hidden features (a multiple of 8 x the number of ranks)")->check(CLI::Range(8, 262144));
  app.add_option("--out", o.out, "output features")->check(CLI::Range(8, 65536));
  app.add_option("--iterations", o.iterations, "timed launches per bucket and round (five rounds)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--chunks", o.pipeline.chunks,
                 "pipeline the rows in up to this many chunks, of >= 512 rows on average (1: no pipeline)")
      ->check(CLI::Range(1, 64));
  app.add_flag("--taper", o.pipeline.taper, "chunk sizes falling k, k - 1, ..., 1 instead of equal");
  app.add_flag("--sum-bf16", o.pipeline.bf16_sum,
               "all-reduce the partial outputs as bf16 (half the bytes), then widen the sum to f32");
  app.add_flag("--quick", quick, "a small model and two buckets (the ctest run)");
  CLI11_PARSE(app, argc, argv);
  if (quick) o = Options{{16, 256, 1024}, 512, 1024, 256, 20, o.pipeline};
  if (!sample::have_device()) return sample::skipped;

  try {
    const nccl::Communicator comm;  // this rank's GPU; one rank when no launcher started us
    const int rank = comm.rank(), world = comm.size();
    if (o.hidden % (8 * world) != 0 || o.width % 8 != 0 || o.out % 8 != 0) {
      std::fprintf(stderr, "tp_mlp: --hidden must be a multiple of 8 x %d ranks, --width and --out of 8\n", world);
      return 1;
    }
    const int max_rows = *std::max_element(o.rows.begin(), o.rows.end());
    const Model m(o, rank, world);
    const std::vector<float> x = random_bf16(std::size_t(max_rows) * o.width, 5, 1.0f);
    const Activations a(m, max_rows, x);
    if (rank == 0) {
      std::printf("tensor-parallel MLP %d -> %d (gelu) -> %d, bf16 weights, f32 out%s, %d rank%s (NCCL %d)\n", o.width,
                  o.hidden, o.out, o.pipeline.bf16_sum ? " (partial outputs summed in bf16)" : "", world,
                  world == 1 ? "" : "s", nccl::library_version());
    }

    flowdsl::Runtime runtime;
    const flowdsl::StreamHandle stream = flowdsl::make_stream();
    bool ok = true;
    for (const int rows : o.rows) {
      if (rows < 1) continue;
      const flowdsl::Graph tp = tensor_parallel(m, a, comm, rows, o.pipeline);
      const flowdsl::Graph one = one_gpu(m, a, rows);
      SAMPLE_CHECK(cudaMemset(a.y_tp.get(), 0xff, a.y_tp.bytes()));  // poisoned: an unwritten value fails
      SAMPLE_CHECK(cudaMemset(a.y_one.get(), 0xff, a.y_one.bytes()));
      SAMPLE_CHECK(cudaDeviceSynchronize());
      runtime.launch(tp, stream.get());
      runtime.launch(one, stream.get());
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      const std::size_t n = std::size_t(rows) * o.out;
      const std::vector<float> y_tp = download(a.y_tp, n), y_one = download(a.y_one, n);
      // Sums in another order (shards, then the all-reduce), and h rounded to bf16 after products
      // cuBLASLt may split differently: equal to a few bf16 ulps, not bit for bit.
      const double tp_error = worst(y_tp, y_one);
      double host_error = 0;
      if (rank == 0 && rows == o.rows.front()) {
        const int count = std::min(rows, 2);
        host_error = worst(std::vector<float>(y_one.begin(), y_one.begin() + std::size_t(count) * o.out), host_rows(m, x, count));
      }
      const bool good = tp_error <= 2e-2 && host_error <= 2e-2;
      ok = ok && good;
      // Five rounds taking turns, medians: the GPU's clocks drift under minutes of matmuls, and
      // each variant should see every state of them.
      const flowdsl::Graph matmuls = tensor_parallel(m, a, comm, rows, o.pipeline, false);
      std::vector<double> tp_times, one_times, matmul_times;
      for (int round = 0; round < 5; ++round) {
        tp_times.push_back(time_launches(runtime, tp, stream.get(), o.iterations));
        one_times.push_back(time_launches(runtime, one, stream.get(), o.iterations));
        matmul_times.push_back(time_launches(runtime, matmuls, stream.get(), o.iterations));
      }
      const double tp_us = median(tp_times), one_us = median(one_times), matmuls_us = median(matmul_times);
      const std::size_t pieces = chunks_of(rows, o.pipeline).size();
      std::printf("rank %d rows %5d (%zu chunk%s%s): tensor-parallel %9.1f us (matmuls alone %9.1f), one GPU %9.1f us, "
                  "speed-up %.2fx; |tp - one GPU| %.2e%s %s\n",
                  rank, rows, pieces, pieces == 1 ? "" : "s", pieces > 1 && o.pipeline.taper ? ", tapered" : "", tp_us,
                  matmuls_us, one_us, one_us / tp_us, tp_error,
                  rank == 0 && rows == o.rows.front() ? (", |one GPU - host| " + std::to_string(host_error)).c_str() : "",
                  good ? "ok" : "MISMATCH");
    }
    const flowdsl::RuntimeStatistics s = runtime.statistics();
    std::printf("rank %d: %s; launches %llu, misses %llu\n", rank, ok ? "tp_mlp: matches the one-GPU result" : "tp_mlp: MISMATCH",
                static_cast<unsigned long long>(s.launches), static_cast<unsigned long long>(s.misses));
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_mlp: %s\n", e.what());
    return 1;
  }
}
