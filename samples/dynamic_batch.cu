// SPDX-License-Identifier: Apache-2.0
// Dynamic batch sizes without a host round trip. Per batch, an upstream GPU stage (a filter)
// decides how many of 128 candidate requests go on; condition.bucket.i32 picks the padded batch
// size 1, 2, 4, ..., 128 and a SWITCH of 8 cases runs the MLP forward pass of that size
// (matmul + bias + relu, matmul + bias, softmax from the kernel library): one executable, one
// launch per batch. In the same run: the serving-engine way (copy the count back, wait, pick
// the bucket on the host, launch that bucket's executable: 8 executables), the same SWITCH
// built by hand with CUDA's graph API, and the case where the host already knows the count
// (launch the bucket's executable, filter included, directly). Every variant is checked
// against the host reference at 16 counts covering the 8 buckets; prints the median time per
// batch of each and their ratios.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"
#include "raw_graph.cuh"
#include "reference.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;

namespace {

constexpr int max_batch = 128, features = 64, hidden = 128, classes = 16;
constexpr int buckets = 8;  // padded batch sizes 2^0 .. 2^7 = max_batch
constexpr int sets = 16;    // candidate sets, used in turn, one a batch
constexpr int rounds = 40;  // timed rounds; each runs every set through every variant
constexpr float threshold = 0.5f;
constexpr int filter_threads = 1024;  // at least max_batch
// How many requests of each set score at least the threshold: every bucket twice.
constexpr int counts[sets] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 100, 127, 128};

/// The upstream stage of a batch. Candidate set `*next % sets` (scores[set][max_batch],
/// candidates[set][max_batch][features]) goes on with the requests scoring at least `cutoff`, in
/// order: x[0 .. count) gets their features and x[count .. max_batch) zeros (the padding a
/// bucket reads), *count how many. Then *next advances, so that every launch is the next batch.
/// One block: the copies are flat float4 loops, so that every thread's loads are independent.
__global__ void __launch_bounds__(filter_threads) filter_kernel(const float* scores, const float* candidates, int set_count,
                                                                float cutoff, int* next, float* x, int* count) {
  using Scan = cub::BlockScan<int, filter_threads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int slot[max_batch];  // where candidate r goes, or -1
  const int set = *next % set_count;
  const int t = threadIdx.x;
  const int keep = t < max_batch && scores[set * max_batch + t] >= cutoff ? 1 : 0;
  int position = 0, kept = 0;
  Scan(scan).ExclusiveSum(keep, position, kept);
  if (t < max_batch) slot[t] = keep ? position : -1;
  __syncthreads();  // every thread has read *next, and the slots are known
  constexpr int row4 = features / 4;  // float4 per row
  const auto* in = reinterpret_cast<const float4*>(candidates + static_cast<std::size_t>(set) * max_batch * features);
  auto* out = reinterpret_cast<float4*>(x);
#pragma unroll 4
  for (int i = t; i < max_batch * row4; i += filter_threads) {
    const int to = slot[i / row4];
    if (to >= 0) out[to * row4 + i % row4] = in[i];
  }
  for (int i = kept * row4 + t; i < max_batch * row4; i += filter_threads) out[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (t == 0) {
    *count = kept;
    *next += 1;
  }
}

/// Host side of the inputs: per set, scores with exactly counts[set] at or above the threshold
/// (at random places) and random features.
struct Inputs {
  std::vector<float> scores, candidates;
};
Inputs make_inputs() {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> high(threshold, 1.0f), low(0.0f, 0.49f);
  Inputs in;
  for (int s = 0; s < sets; ++s) {
    std::vector<int> order(max_batch);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<float> score(max_batch);
    for (int i = 0; i < max_batch; ++i) score[order[i]] = i < counts[s] ? high(rng) : low(rng);
    in.scores.insert(in.scores.end(), score.begin(), score.end());
  }
  in.candidates = sample::random_floats(std::size_t(sets) * max_batch * features, 23);
  return in;
}

struct Weights {
  std::vector<float> w1, b1, w2, b2;
};

std::vector<float> to_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

/// The host reference of set s: the padded batch (bucket rows) through the MLP, probabilities
/// [rows, classes].
std::vector<double> reference(const Inputs& in, const Weights& w, int s, int rows) {
  std::vector<float> x(std::size_t(rows) * features, 0.0f);
  int kept = 0;
  for (int r = 0; r < max_batch; ++r) {
    if (in.scores[std::size_t(s) * max_batch + r] < threshold) continue;
    const float* row = in.candidates.data() + (std::size_t(s) * max_batch + r) * features;
    std::copy(row, row + features, x.begin() + std::size_t(kept++) * features);
  }
  const std::vector<float> h = to_floats(ref::matmul(rows, hidden, features, x, w.w1, w.b1, 1));
  const std::vector<float> logits = to_floats(ref::matmul(rows, classes, hidden, h, w.w2, w.b2, 0));
  return ref::softmax(rows, classes, logits);
}

int bucket_rows(int bucket) { return 1 << bucket; }

}  // namespace

int main() {
  if (!sample::have_device()) return sample::skipped;
  const Inputs in = make_inputs();
  Weights w;
  w.w1 = sample::random_floats(std::size_t(features) * hidden, 1);
  w.w2 = sample::random_floats(std::size_t(hidden) * classes, 2);
  for (float& v : w.w1) v /= 16;
  for (float& v : w.w2) v /= 8;
  w.b1 = sample::random_floats(hidden, 3);
  w.b2 = sample::random_floats(classes, 4);

  const sample::DeviceArray<float> scores = sample::device_copy(in.scores), candidates = sample::device_copy(in.candidates);
  const sample::DeviceArray<float> w1 = sample::device_copy(w.w1), b1 = sample::device_copy(w.b1),
                                   w2 = sample::device_copy(w.w2), b2 = sample::device_copy(w.b2);
  const sample::DeviceArray<float> x(std::size_t(max_batch) * features), h(std::size_t(max_batch) * hidden),
      logits(std::size_t(max_batch) * classes), probs(std::size_t(max_batch) * classes);
  const sample::DeviceArray<int> next(1), count(1);
  const sample::PinnedArray<int> host_count(1);

  // The forward pass on the first `rows` rows of x.
  struct Mlp {
    flowdsl::KernelNode<int, int, int, const float*, const float*, const float*, int, float*> layer1{nullptr, 0}, layer2{nullptr, 0};
    flowdsl::KernelNode<int, int, const float*, float*> softmax{nullptr, 0};
  };
  auto declare_mlp = [&](fk::Into into, int rows) {
    Mlp m;
    m.layer1 = fk::matmul(into, "layer1", rows, hidden, features, static_cast<const float*>(x.get()),
                          static_cast<const float*>(w1.get()), b1.get(), fk::Activation::relu, h.get());
    m.layer2 = fk::matmul(into, "layer2", rows, classes, hidden, static_cast<const float*>(h.get()),
                          static_cast<const float*>(w2.get()), b2.get(), fk::Activation::none, logits.get())
                   .after(m.layer1);
    m.softmax = fk::softmax(into, "softmax", rows, classes, static_cast<const float*>(logits.get()), probs.get()).after(m.layer2);
    return m;
  };
  auto declare_filter = [&](flowdsl::Graph& g) {
    return g.kernel("filter", filter_kernel)
        .launch(1, filter_threads)
        .args(static_cast<const float*>(scores.get()), static_cast<const float*>(candidates.get()), sets, threshold,
              next.get(), x.get(), count.get());
  };

  // One executable: filter -> bucket -> SWITCH of the 8 padded forward passes.
  flowdsl::Graph decide_on_device;
  auto filter = declare_filter(decide_on_device);
  auto cases = decide_on_device.switch_cases("forward", buckets);
  auto pick = fk::condition_bucket(decide_on_device, "bucket", count.get(), buckets, cases.condition()).after(filter);
  cases.after(pick);
  std::vector<Mlp> case_nodes;
  for (int b = 0; b < buckets; ++b) case_nodes.push_back(declare_mlp(cases.body(b), bucket_rows(b)));

  // The serving-engine way: the filter and a copy of the count to the host; a forward pass per bucket.
  flowdsl::Graph filter_only;
  auto filtered = declare_filter(filter_only);
  filter_only.memcpy("count_to_host", host_count.get(), count.get(), sizeof(int)).after(filtered);
  std::vector<flowdsl::Graph> forward(buckets), direct(buckets);
  for (int b = 0; b < buckets; ++b) {
    declare_mlp(forward[b], bucket_rows(b));
    // The host already knows the count: the bucket's pass right after the filter.
    auto f = declare_filter(direct[b]);
    declare_mlp(direct[b], bucket_rows(b)).layer1.after(f);
  }

  bool ok = true;
  try {
    auto stream = flowdsl::make_stream();
    const cudaStream_t s = stream.get();
    // The SWITCH graph has a runtime of its own, so that its statistics show one instantiation
    // and hits. The bucket graphs of the other variants share one: buckets whose launch shapes
    // agree have one topology, so they share an executable and update it as they alternate (a
    // Runtime's pool of executables per topology, RuntimeOptions::executables_per_topology, can hold several).
    flowdsl::Runtime runtime_switch, runtime;

    // Raw CUDA: the same nodes, kernels and launch shapes, by hand.
    flowdsl::NativeGraph raw = sample::make_graph();
    const float *scores_in = scores.get(), *candidates_in = candidates.get(), *x_in = x.get(), *w1_in = w1.get(),
                *b1_in = b1.get(), *h_in = h.get(), *w2_in = w2.get(), *b2_in = b2.get(), *logits_in = logits.get();
    float *x_out = x.get(), *h_out = h.get(), *logits_out = logits.get(), *probs_out = probs.get();
    int *next_arg = next.get(), *count_out = count.get();
    const int* count_in = count.get();
    int set_count = sets, bucket_count = buckets, hidden_arg = hidden, features_arg = features, classes_arg = classes;
    int relu = static_cast<int>(fk::Activation::relu), none = static_cast<int>(fk::Activation::none);
    float cutoff = threshold;
    const cudaGraphNode_t raw_filter = sample::RawKernel(decide_on_device, filter)
                                           .add(raw.get(), {}, {&scores_in, &candidates_in, &set_count, &cutoff, &next_arg,
                                                                &x_out, &count_out});
    cudaGraphConditionalHandle handle = 0;
    SAMPLE_CHECK(cudaGraphConditionalHandleCreate(&handle, raw.get(), 0, 0));
    flowdsl::Condition raw_condition{handle};
    const cudaGraphNode_t raw_pick =
        sample::RawKernel(decide_on_device, pick).add(raw.get(), {raw_filter}, {&count_in, &bucket_count, &raw_condition});
    std::vector<cudaGraph_t> bodies;
    sample::add_conditional(raw.get(), {raw_pick}, handle, cudaGraphCondTypeSwitch, buckets, bodies);
    for (int b = 0; b < buckets; ++b) {
      int rows = bucket_rows(b);
      const Mlp& m = case_nodes[b];
      const cudaGraphNode_t l1 = sample::RawKernel(decide_on_device, m.layer1)
                                     .add(bodies[b], {}, {&rows, &hidden_arg, &features_arg, &x_in, &w1_in, &b1_in, &relu, &h_out});
      const cudaGraphNode_t l2 = sample::RawKernel(decide_on_device, m.layer2)
                                     .add(bodies[b], {l1}, {&rows, &classes_arg, &hidden_arg, &h_in, &w2_in, &b2_in, &none, &logits_out});
      sample::RawKernel(decide_on_device, m.softmax).add(bodies[b], {l2}, {&rows, &classes_arg, &logits_in, &probs_out});
    }
    const flowdsl::NativeExecutable raw_exec = sample::instantiate(raw.get(), s);

    // Batches run so far: the filter of batch i takes set i % sets. Every loop below runs the sets
    // in order, 0 to sets - 1, so batch % sets is the set at hand.
    int batch = 0;
    auto sync = [&] { SAMPLE_CHECK(cudaStreamSynchronize(s)); };
    // The SWITCH graphs, and the host that knows the count, need no answer from the device: they
    // enqueue batches back to back. The round trip waits for each count.
    auto run_switch = [&] { runtime_switch.launch(decide_on_device, s); };
    auto run_raw = [&] { SAMPLE_CHECK(cudaGraphLaunch(raw_exec.get(), s)); };
    auto run_round_trip = [&] {
      runtime.launch(filter_only, s);
      sync();  // the host waits for the count
      runtime.launch(forward[ref::condition_bucket(host_count.get()[0], buckets)], s);
      sync();
    };
    auto run_known = [&] { runtime.launch(direct[ref::condition_bucket(counts[batch % sets], buckets)], s); };
    const char* labels[] = {"flowdsl SWITCH (one executable)", "raw CUDA SWITCH (the same, by hand)",
                            "host round trip (count back, 8 executables)", "host knows the count (8 executables)"};
    auto run = [&](int variant) {
      switch (variant) {
        case 0: run_switch(); break;
        case 1: run_raw(); break;
        case 2: run_round_trip(); break;
        default: run_known(); break;
      }
      ++batch;
    };

    SAMPLE_CHECK(cudaMemset(next.get(), 0, sizeof(int)));
    SAMPLE_CHECK(cudaDeviceSynchronize());
    // Correctness: every variant on every set, outputs and padding poisoned before each batch.
    std::size_t bad = 0, checked = 0;
    for (int variant = 0; variant < 4; ++variant) {
      for (int set = 0; set < sets; ++set) {
        SAMPLE_CHECK(cudaMemsetAsync(x.get(), 0xff, x.bytes(), s));
        SAMPLE_CHECK(cudaMemsetAsync(probs.get(), 0xff, probs.bytes(), s));
        SAMPLE_CHECK(cudaMemsetAsync(count.get(), 0xff, count.bytes(), s));
        sync();
        run(variant);
        sync();
        SAMPLE_CHECK(cudaGetLastError());
        const int rows = bucket_rows(ref::condition_bucket(counts[set], buckets));
        const std::vector<double> want = reference(in, w, set, rows);
        std::vector<float> got(std::size_t(max_batch) * classes);
        int got_count = 0;
        SAMPLE_CHECK(cudaMemcpy(got.data(), probs.get(), probs.bytes(), cudaMemcpyDeviceToHost));
        SAMPLE_CHECK(cudaMemcpy(&got_count, count.get(), sizeof got_count, cudaMemcpyDeviceToHost));
        std::size_t wrong = got_count != counts[set];
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (i < want.size()) {
            wrong += !(std::fabs(got[i] - want[i]) <= 1e-4);
          } else {
            wrong += !std::isnan(got[i]);  // past the bucket: nothing may write
          }
        }
        if (wrong) {
          std::printf("%s, count %d: %zu mismatches against the host reference\n", labels[variant], counts[set], wrong);
        }
        bad += wrong;
        ++checked;
      }
    }
    ok = bad == 0;

    // Timing: rounds of every set through each variant in turn (so that drift falls on all alike);
    // a round is `sets` batches enqueued as each variant can, then one synchronisation.
    std::vector<double> us[4];
    for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
      for (int variant = 0; variant < 4; ++variant) {
        const double t = sample::seconds_of([&] {
          for (int set = 0; set < sets; ++set) run(variant);
          sync();
        });
        if (round > 0) us[variant].push_back(1e6 * t / sets);
      }
    }
    SAMPLE_CHECK(cudaGetLastError());

    const flowdsl::RuntimeStatistics st = runtime_switch.statistics(), others = runtime.statistics();
    std::printf("dynamic_batch: %d candidate sets of %d requests (%d features -> %d hidden, relu -> %d classes, softmax); "
                "per batch the requests scoring >= %.1f go on (1 to %d), padded to 1, 2, 4, ..., %d rows\n",
                sets, max_batch, features, hidden, classes, threshold, max_batch, max_batch);
    std::printf("checked: %zu batches (16 counts x 4 variants) against the host reference, %zu mismatches\n", checked, bad);
    std::printf("%-48s %22s\n", "", "median us per batch");
    for (int variant = 0; variant < 4; ++variant) std::printf("%-48s %22.1f\n", labels[variant], sample::median(us[variant]));
    const double flow = sample::median(us[0]), hand = sample::median(us[1]), trip = sample::median(us[2]),
                 known = sample::median(us[3]);
    std::printf("flowdsl SWITCH / raw SWITCH: %.3f (goal <= 1.05)\n", flow / hand);
    std::printf("host round trip / flowdsl SWITCH: %.2f (goal >= 1.3)\n", trip / flow);
    std::printf("flowdsl SWITCH / host knows the count: %.2f (what deciding on the device costs when the host "
                "could have decided: the bucket kernel and the conditional node)\n",
                flow / known);
    std::printf("cache of the SWITCH graph: launches=%llu misses=%llu node_updates=%llu\n",
                static_cast<unsigned long long>(st.launches), static_cast<unsigned long long>(st.misses),
                static_cast<unsigned long long>(st.node_updates));
    std::printf("cache of the 17 graphs of the host variants: launches=%llu misses=%llu node_updates=%llu "
                "(buckets of equal launch shapes share an executable)\n",
                static_cast<unsigned long long>(others.launches), static_cast<unsigned long long>(others.misses),
                static_cast<unsigned long long>(others.node_updates));
    if (st.misses != 1 || st.reinstantiations != 0 || st.node_updates != 0) {
      std::printf("expected one instantiation of the SWITCH graph and hits after it\n");
      ok = false;
    }
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "dynamic_batch: matches reference\n" : "dynamic_batch: DOES NOT match reference\n");
  return ok ? 0 : 1;
}
