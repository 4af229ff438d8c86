// SPDX-License-Identifier: Apache-2.0
// Serving a Llama model with flowdsl: requests with random prompt and output lengths arrive at
// Poisson times; a continuous batcher (llm_batcher.hpp) admits them into sequence slots when the
// paged KV cache can hold them, interleaves chunks of their prompts with one decode token of each
// running sequence, and retires them at their length limit or end token. Each step runs the
// graph of a flowdsl::Family over token buckets 1, 2, 4, ... --max-step-tokens, made ready up
// front, on activations sized for the largest bucket and shared by all.
//
//   llm_serving                                         a random tiny model, a few rates
//   llm_serving --model /tmp/llama1b --rates 4,8,16,32 --requests 200 --json serving.json
//
// Reports, at each arrival rate: time to first token and time per output token (p50, p99), output
// tokens/s, GPU busy (step time on the GPU over wall time) and device memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.cuh"
#include "flowdsl/family.hpp"
#include "flowdsl/runtime.hpp"
#include "llm_batcher.hpp"
#include "llm_model.cuh"

using namespace llm;

namespace {

struct Options {
  std::string model;  // empty: a random tiny model
  int slots = 64, page_size = 16, max_step_tokens = 256, prefill_chunk = 64, max_context = 1024;
  int requests = 100, prompt_min = 16, prompt_max = 256, output_min = 16, output_max = 128;
  std::string rates = "2,8,32";
  std::string linear = "auto";
  int gemv_max = 1;
  int end_token = -1;
  unsigned seed = 1;
  std::string json_path;
};

/// A request as the serving loop tracks it: when it arrived and when each of its tokens came.
struct Timeline {
  double arrival_ms = 0;
  std::vector<double> token_ms;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * double(v.size() - 1) + 0.5));
  return v[i];
}

/// Pinned staging for one step's inputs, copied to the State's arrays before each launch.
struct Staging {
  sample::PinnedArray<i32> tokens, positions, seqs, last_index, block_table, next;
  Staging(int max_tokens, int slots, int table)
      : tokens(std::size_t(max_tokens)), positions(std::size_t(max_tokens)), seqs(std::size_t(max_tokens)),
        last_index(std::size_t(slots)), block_table(std::size_t(table)), next(std::size_t(slots)) {}
};

template <class T>
void copy_in(const DeviceArray<T>& to, const sample::PinnedArray<T>& from, std::size_t n, cudaStream_t stream) {
  SAMPLE_CHECK(cudaMemcpyAsync(to.get(), from.get(), n * sizeof(T), cudaMemcpyHostToDevice, stream));
}

/// The serving loop at one arrival rate: every request served; the figures as JSON.
nlohmann::json serve(const Options& o, const Config& c, BatcherLimits limits, flowdsl::Family& family, State& s,
                     Staging& st, cudaStream_t stream, double rate) {
  // The requests: Poisson arrivals at `rate` a second, uniform prompt and output lengths.
  std::mt19937 rng(o.seed + unsigned(rate * 1000));
  std::exponential_distribution<double> gap(rate / 1000.0);  // in milliseconds
  std::uniform_int_distribution<int> prompt_len(o.prompt_min, o.prompt_max), output_len(o.output_min, o.output_max),
      token(0, c.vocab - 1);
  std::vector<Request> requests;
  std::vector<Timeline> times(static_cast<std::size_t>(o.requests));
  double at = 0;
  for (int i = 0; i < o.requests; ++i) {
    at += gap(rng);
    Request r;
    r.id = i;
    r.prompt.resize(static_cast<std::size_t>(prompt_len(rng)));
    for (i32& t : r.prompt) t = token(rng);
    r.max_new_tokens = output_len(rng);
    times[std::size_t(i)].arrival_ms = at;
    requests.push_back(std::move(r));
  }

  Batcher batcher(limits, o.end_token);
  auto start = flowdsl::make_event(), stop = flowdsl::make_event();
  double gpu_ms = 0;
  std::size_t next_request = 0, finished = 0, steps = 0, tokens_out = 0;
  std::map<int, std::size_t> bucket_steps;
  const auto t0 = Clock::now();
  while (finished < requests.size()) {
    const double now = ms_since(t0);
    while (next_request < requests.size() && times[next_request].arrival_ms <= now) {
      batcher.submit(requests[next_request++]);
    }
    const StepPlan plan = batcher.plan();
    if (plan.empty()) {  // idle until the next arrival
      if (next_request == requests.size()) throw std::logic_error("requests left that the batcher cannot run");
      const double wait = times[next_request].arrival_ms - now;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(std::max(wait, 0.0)));
      continue;
    }
    const int T = static_cast<int>(plan.tokens.size());
    const int bucket = family.bucket_for(T);
    const int rows = std::min(bucket, limits.slots);
    const int sampled = static_cast<int>(plan.sample.size());
    // Padding tokens belong to no sequence (slot -1): they write no cache and attend nothing.
    for (int t = 0; t < bucket; ++t) {
      const bool real = t < T;
      st.tokens.get()[t] = real ? plan.tokens[std::size_t(t)] : 0;
      st.positions.get()[t] = real ? plan.positions[std::size_t(t)] : 0;
      st.seqs.get()[t] = real ? plan.slots[std::size_t(t)] : -1;
    }
    for (int r = 0; r < rows; ++r) st.last_index.get()[r] = r < sampled ? plan.sample[std::size_t(r)] : 0;
    std::copy(batcher.block_table().begin(), batcher.block_table().end(), st.block_table.get());
    copy_in(s.tokens, st.tokens, std::size_t(bucket), stream);
    copy_in(s.positions, st.positions, std::size_t(bucket), stream);
    copy_in(s.seq_of_token, st.seqs, std::size_t(bucket), stream);
    copy_in(s.last_index, st.last_index, std::size_t(rows), stream);
    copy_in(s.block_table, st.block_table, batcher.block_table().size(), stream);
    SAMPLE_CHECK(cudaEventRecord(start.get(), stream));
    family.launch(T, stream);
    SAMPLE_CHECK(cudaEventRecord(stop.get(), stream));
    SAMPLE_CHECK(cudaMemcpyAsync(st.next.get(), s.next.get(), std::size_t(sampled) * sizeof(i32), cudaMemcpyDeviceToHost,
                                 stream));
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    float ms = 0;
    SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    gpu_ms += ms;
    ++steps;
    ++bucket_steps[bucket];

    const double done_ms = ms_since(t0);
    std::vector<i32> next(st.next.get(), st.next.get() + sampled);
    for (const int slot : plan.sample_slots) {
      times[std::size_t(batcher.request_in(slot))].token_ms.push_back(done_ms);
    }
    tokens_out += next.size();
    finished += batcher.complete(plan, next).size();
  }
  const double wall_ms = ms_since(t0);

  std::vector<double> ttft, tpot;
  for (const Timeline& t : times) {
    ttft.push_back(t.token_ms.front() - t.arrival_ms);
    if (t.token_ms.size() > 1) tpot.push_back((t.token_ms.back() - t.token_ms.front()) / double(t.token_ms.size() - 1));
  }
  nlohmann::json out = {{"rate", rate},
                        {"requests", requests.size()},
                        {"steps", steps},
                        {"wall_ms", wall_ms},
                        {"gpu_busy", gpu_ms / wall_ms},
                        {"output_tokens", tokens_out},
                        {"tokens_per_s", double(tokens_out) / wall_ms * 1e3},
                        {"ttft_ms", {{"p50", percentile(ttft, 50)}, {"p99", percentile(ttft, 99)}}},
                        {"tpot_ms", {{"p50", percentile(tpot, 50)}, {"p99", percentile(tpot, 99)}}}};
  for (const auto& [b, n] : bucket_steps) out["bucket_steps"][std::to_string(b)] = n;
  std::printf("rate %6.1f/s: %zu requests in %.0f ms, %zu steps; TTFT p50 %.1f p99 %.1f ms; TPOT p50 %.2f p99 %.2f ms; "
              "%.0f tokens/s; GPU busy %.0f%%\n",
              rate, requests.size(), wall_ms, steps, percentile(ttft, 50), percentile(ttft, 99), percentile(tpot, 50),
              percentile(tpot, 99), double(tokens_out) / wall_ms * 1e3, 100.0 * gpu_ms / wall_ms);
  return out;
}

std::vector<double> parse_rates(const std::string& text) {
  std::vector<double> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(std::stod(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Serving a Llama model: Poisson arrivals, continuous batching, a family of step graphs"};
  app.add_option("--model", o.model, "checkpoint folder (config.json, model.safetensors); default: a random tiny model");
  app.add_option("--slots", o.slots, "sequences at once");
  app.add_option("--page-size", o.page_size, "tokens a page of the KV cache");
  app.add_option("--max-step-tokens", o.max_step_tokens, "tokens a step at most: the largest bucket");
  app.add_option("--prefill-chunk", o.prefill_chunk, "prompt tokens a sequence a step at most");
  app.add_option("--max-context", o.max_context, "positions a sequence at most");
  app.add_option("--requests", o.requests, "requests at each rate");
  app.add_option("--prompt-min", o.prompt_min, "shortest prompt");
  app.add_option("--prompt-max", o.prompt_max, "longest prompt");
  app.add_option("--output-min", o.output_min, "fewest tokens a request asks for");
  app.add_option("--output-max", o.output_max, "most tokens a request asks for");
  app.add_option("--rates", o.rates, "arrival rates, requests a second");
  app.add_option("--linear", o.linear, "projections: gemv (flowdsl's), cublaslt, or auto")
      ->check(CLI::IsMember({"auto", "gemv", "cublaslt"}));
  app.add_option("--gemv-max", o.gemv_max, "auto: the matrix-vector kernel up to this many tokens");
  app.add_option("--end-token", o.end_token, "the token that ends a request (-1: none, every request runs to its limit)");
  app.add_option("--seed", o.seed, "requests, pages and random model");
  app.add_option("--json", o.json_path, "figures as JSON");
  CLI11_PARSE(app, argc, argv);
  if (!sample::have_device()) return sample::skipped;
  try {
    fk::ensure_builtins();
    double read_ms = 0;
    Model m = o.model.empty() ? random_model(Config{}, o.seed, false) : load_model(o.model, false, read_ms);
    const Config& c = m.config;
    if (o.prompt_min < 1 || o.prompt_max < o.prompt_min || o.output_min < 1 || o.output_max < o.output_min ||
        o.prompt_max + o.output_max > o.max_context) {
      throw std::runtime_error("prompt and output lengths must be ordered, positive, and fit --max-context");
    }
    State s(c, o.slots, o.max_step_tokens, o.max_context, o.page_size, o.seed);
    BatcherLimits limits;
    limits.slots = o.slots;
    limits.page_size = o.page_size;
    limits.pages_per_seq = s.kv.pages_per_seq;
    limits.pages = s.kv.pages;
    limits.max_step_tokens = o.max_step_tokens;
    limits.prefill_chunk = o.prefill_chunk;

    auto stream = flowdsl::make_stream();
    flowdsl::RuntimeOptions options;
    flowdsl::Runtime runtime(options);
    const auto kind_for = [&](int tokens) {
      if (o.linear == "gemv") return LinearKind::gemv;
      if (o.linear == "cublaslt") return LinearKind::cublaslt;
      return tokens <= o.gemv_max ? LinearKind::gemv : LinearKind::cublaslt;
    };
    // A step of T tokens (decode tokens and prompt chunks together): the LM head on the rows the
    // batcher samples, gathered at last_index; their next tokens in s.next.
    flowdsl::Family family(runtime, flowdsl::Family::powers_of_two(o.max_step_tokens), [&](int tokens) {
      flowdsl::Graph g;
      declare_step(g, m, s, tokens, std::min(tokens, o.slots), false, false, kind_for(tokens), 0.0f, 0, 1.0f, o.seed,
                   nullptr);
      g.programmatic_edges(true);
      return g;
    });
    const auto t0 = Clock::now();
    family.prepare(stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    const double ready_ms = ms_since(t0);
    const flowdsl::FamilyStatistics fs = family.statistics();
    std::size_t free_bytes = 0, total_bytes = 0;
    SAMPLE_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    std::printf("model: %d layers, hidden %d, vocabulary %d; %d slots, %d pages of %d tokens; %zu step graphs ready in "
                "%.1f ms, executables %.1f MiB, activations %.1f MiB; device memory in use %.2f GiB\n",
                c.layers, c.hidden, c.vocab, o.slots, limits.pages, o.page_size, fs.buckets.size(), ready_ms,
                double(fs.device_memory) / (1 << 20), double(s.activation_bytes()) / (1 << 20),
                double(total_bytes - free_bytes) / double(1 << 30));

    Staging st(o.max_step_tokens, o.slots, o.slots * limits.pages_per_seq);
    nlohmann::json out = {{"ready_ms", ready_ms},
                          {"executable_bytes", fs.device_memory},
                          {"activation_bytes", s.activation_bytes()},
                          {"device_bytes_in_use", total_bytes - free_bytes}};
    for (const double rate : parse_rates(o.rates)) {
      out["rates"].push_back(serve(o, c, limits, family, s, st, stream.get(), rate));
    }
    if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llm_serving: %s\n", e.what());
    return 1;
  }
}
