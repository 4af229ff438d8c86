// SPDX-License-Identifier: Apache-2.0
// The kernels of a transformer decoder step against their host references, through a Graph and
// Runtime: rms_norm and add_rms_norm, silu_mul, and rope_kv_append with decode_attention over a
// paged KV cache (odd lengths, page boundaries, GQA ratios 1, 4 and 8, batch 1 to 256, a chunk of
// prefill, pages shuffled, out-of-bounds tables that must touch nothing).
#include <numeric>
#include <random>

#include "kernel_test_support.cuh"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {
using i32 = std::int32_t;

template <class T>
std::vector<float> rounded(const std::vector<double>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_float(from_float<T>(static_cast<float>(x[i])));
  return out;
}

std::vector<float> inverse_frequencies(int head_dim, double theta) {
  std::vector<float> f(static_cast<std::size_t>(head_dim / 2));
  for (int j = 0; j < head_dim / 2; ++j) f[j] = static_cast<float>(std::pow(theta, -2.0 * j / head_dim));
  return f;
}

void upload_ints(DeviceBuffer<i32>& d, const std::vector<i32>& v) {
  REQUIRE(v.size() <= d.size());
  CUDA_REQUIRE(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(i32), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

// A decode or prefill step's tokens: `lengths[s]` tokens already cached for sequence s, then
// `new_tokens` new ones each, at the next positions; pages handed out shuffled from the pool.
struct Step {
  fk::PagedKv kv;
  std::vector<i32> positions, seq_of_token, block_table;
  int tokens = 0;
  int max_context = 0;
};

Step make_step(int q_heads, int kv_heads, int head_dim, int page_size, const std::vector<int>& lengths, int new_tokens,
               unsigned seed) {
  Step s;
  s.kv.q_heads = q_heads;
  s.kv.kv_heads = kv_heads;
  s.kv.head_dim = head_dim;
  s.kv.page_size = page_size;
  s.kv.sequences = static_cast<i32>(lengths.size());
  for (const int l : lengths) s.max_context = std::max(s.max_context, l + new_tokens);
  s.kv.pages_per_seq = (s.max_context + page_size - 1) / page_size;
  s.kv.pages = s.kv.pages_per_seq * s.kv.sequences + 3;  // a few pages spare
  std::vector<i32> pool(static_cast<std::size_t>(s.kv.pages));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  s.block_table.assign(static_cast<std::size_t>(s.kv.sequences) * s.kv.pages_per_seq, -1);
  std::size_t next = 0;
  for (int q = 0; q < s.kv.sequences; ++q) {
    const int pages = (lengths[q] + new_tokens + page_size - 1) / page_size;
    for (int p = 0; p < pages; ++p) s.block_table[static_cast<std::size_t>(q) * s.kv.pages_per_seq + p] = pool[next++];
    for (int t = 0; t < new_tokens; ++t) {
      s.positions.push_back(lengths[q] + t);
      s.seq_of_token.push_back(q);
    }
  }
  s.tokens = static_cast<int>(s.positions.size());
  return s;
}

ref::PagedKv reference_kv(const fk::PagedKv& kv) {
  return ref::PagedKv{kv.q_heads, kv.kv_heads, kv.head_dim, kv.page_size, kv.pages_per_seq, kv.sequences, kv.pages};
}

// Runs rope_kv_append then decode_attention on a cache already holding each sequence's earlier
// positions (random), and checks q, the cache and the output against the references.
template <class T>
void check_step(const Step& s, unsigned seed) {
  const fk::PagedKv& kv = s.kv;
  const std::size_t pool = static_cast<std::size_t>(kv.pages) * kv.kv_heads * kv.page_size * kv.head_dim;
  const int heads = kv.q_heads + 2 * kv.kv_heads;
  const std::vector<float> qkv = random_values<T>(static_cast<std::size_t>(s.tokens) * heads * kv.head_dim, seed);
  std::vector<float> k_cache = random_values<T>(pool, seed + 1), v_cache = random_values<T>(pool, seed + 2);
  const std::vector<float> inv_freq = inverse_frequencies(kv.head_dim, 500000.0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kv.head_dim));

  DeviceBuffer<T> dqkv(qkv.size()), dq(static_cast<std::size_t>(s.tokens) * kv.q_heads * kv.head_dim), dk(pool), dv(pool),
      dout(dq.size());
  DeviceBuffer<float> dfreq(inv_freq.size()),
      dwork(static_cast<std::size_t>(fk::attention_workspace_floats(s.tokens, kv, s.max_context)));
  upload(dqkv, qkv);
  upload(dk, k_cache);
  upload(dv, v_cache);
  upload(dfreq, inv_freq);
  dq.poison();
  dout.poison();
  dwork.poison();
  DeviceBuffer<i32> dpos(s.positions.size()), dseq(s.seq_of_token.size()), dtable(s.block_table.size());
  upload_ints(dpos, s.positions);
  upload_ints(dseq, s.seq_of_token);
  upload_ints(dtable, s.block_table);
  const fk::DecodeTokens batch{s.tokens, dpos.get(), dseq.get(), dtable.get()};

  flowdsl::Graph g;
  auto rope = fk::rope_kv_append(g, "rope", kv, batch, static_cast<const T*>(dqkv.get()), static_cast<const float*>(dfreq.get()),
                                 dq.get(), dk.get(), dv.get());
  fk::decode_attention(g, "attention", kv, batch, s.max_context, scale, static_cast<const T*>(dq.get()),
                       static_cast<const T*>(dk.get()), static_cast<const T*>(dv.get()), dwork.get(), dout.get())
      .after(rope);
  Runner runner;
  runner.run(g);

  std::vector<float> q;
  const ref::PagedKv rkv = reference_kv(kv);
  ref::rope_kv_append(rkv, s.tokens, qkv, s.positions, s.seq_of_token, s.block_table, inv_freq, q, k_cache, v_cache);
  // What the kernel stored: the rotated values rounded to T; the reference attends over those.
  const std::vector<float> got_q = download(dq), got_k = download(dk), got_v = download(dv);
  // The kernel forms each angle position * inv_freq in float, as Hugging Face does: its rounding,
  // about 6e-8 of the angle, grows with the position and shows at float's own tolerance.
  const double rotation_tol =
      tolerance<T>() + 2.4e-7 * std::max<double>(s.max_context, *std::max_element(s.positions.begin(), s.positions.end()));
  CHECK(mismatches(got_q, q, rotation_tol) == 0);
  CHECK(mismatches(got_k, k_cache, rotation_tol) == 0);
  CHECK(mismatches(got_v, v_cache, 0.0) == 0);
  const std::vector<double> want =
      ref::paged_attention(rkv, s.tokens, scale, got_q, s.positions, s.seq_of_token, s.block_table, got_k, got_v);
  std::int64_t first = -1;
  const std::size_t bad = mismatches(download(dout), want, tolerance<T>(), &first);
  INFO("first mismatch at " << first);
  CHECK(bad == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("RMS normalisation matches the host reference", "[kernels][decoder][rms_norm]", KERNEL_TYPES) {
  using T = TestType;
  for (const auto& [rows, cols] : {std::pair{1, 2048}, std::pair{7, 31}, std::pair{256, 2048}, std::pair{3, 5000},
                                  std::pair{1, 1}, std::pair{33, 4096 + 3}}) {
    INFO("type " << type_name<T>() << ", " << rows << " x " << cols);
    const std::size_t n = std::size_t(rows) * cols;
    const std::vector<float> x = random_values<T>(n, 21, -2.0f, 2.0f), w = random_values<T>(cols, 22, 0.5f, 1.5f),
                             y_in = random_values<T>(n, 23);
    DeviceBuffer<T> dx(n), dw(cols), dy(n), dres(n), dadd(n), dh(n);
    upload(dx, x);
    upload(dw, w);
    upload(dres, x);
    upload(dadd, y_in);
    dy.poison();
    dh.poison();
    flowdsl::Graph g;
    fk::rms_norm(g, "norm", rows, cols, 1e-5f, static_cast<const T*>(dx.get()), static_cast<const T*>(dw.get()), dy.get());
    fk::add_rms_norm(g, "add_norm", rows, cols, 1e-5f, dres.get(), static_cast<const T*>(dadd.get()),
                     static_cast<const T*>(dw.get()), dh.get());
    Runner runner;
    runner.run(g);
    // The kernel rounds the normalised value to T before the weight (as Llama's RMSNorm does):
    // two roundings, hence twice the type's tolerance.
    CHECK(mismatches(download(dy), ref::rms_norm(rows, cols, 1e-5f, x, w), 2 * tolerance<T>()) == 0);
    std::vector<double> sum(n);
    for (std::size_t i = 0; i < n; ++i) sum[i] = double(x[i]) + y_in[i];
    const std::vector<float> residual = rounded<T>(sum);
    CHECK(mismatches(download(dres), residual, 0.0) == 0);
    CHECK(mismatches(download(dh), ref::rms_norm(rows, cols, 1e-5f, residual, w), 2 * tolerance<T>()) == 0);
  }
}

TEMPLATE_TEST_CASE("silu_mul is SwiGLU's gate times up", "[kernels][decoder][silu_mul]", KERNEL_TYPES) {
  using T = TestType;
  for (const std::int64_t n : sizes) {
    INFO("type " << type_name<T>() << ", n " << n);
    const std::vector<float> gate = random_values<T>(n, 31, -6.0f, 6.0f), up = random_values<T>(n, 32);
    DeviceBuffer<T> dg(n), du(n), dout(n);
    upload(dg, gate);
    upload(du, up);
    dout.poison();
    flowdsl::Graph g;
    fk::silu_mul(g, "swiglu", n, static_cast<const T*>(dg.get()), static_cast<const T*>(du.get()), dout.get());
    Runner runner;
    runner.run(g);
    CHECK(mismatches(download(dout), ref::silu_mul(gate, up), tolerance<T>()) == 0);
  }
}

TEMPLATE_TEST_CASE("Paged decode attention matches the reference across GQA ratios, pages and batches",
                   "[kernels][decoder][attention]", __half, __nv_bfloat16, float) {
  using T = TestType;
  struct Case {
    int q_heads, kv_heads, head_dim, page_size;
    std::vector<int> lengths;
    int new_tokens;
  };
  std::vector<int> batch256(256);
  for (int i = 0; i < 256; ++i) batch256[i] = (i * 37) % 300;
  const Case cases[] = {
      {32, 8, 64, 16, {511}, 1},                   // batch 1, Llama-3.2-1B's heads, context 512
      {8, 8, 64, 16, {0, 15, 16, 17}, 1},          // GQA 1; first token, page boundaries
      {32, 4, 128, 32, {100, 3, 1000}, 1},         // GQA 8, a longer context
      {32, 8, 64, 16, {47, 200, 5, 16, 31, 64, 1, 90}, 1},  // batch 8
      {32, 8, 64, 16, {0, 40}, 64},                // a 64-token chunk of prefill for each of 2 sequences
      {4, 4, 80, 16, {33}, 3},                     // head_dim not a power of two
      {32, 8, 64, 16, batch256, 1},                // batch 256
  };
  unsigned seed = 40;
  for (const Case& c : cases) {
    const Step s = make_step(c.q_heads, c.kv_heads, c.head_dim, c.page_size, c.lengths, c.new_tokens, seed);
    INFO("type " << type_name<T>() << ", heads " << c.q_heads << "/" << c.kv_heads << ", head_dim " << c.head_dim
                 << ", sequences " << c.lengths.size() << ", new tokens " << c.new_tokens);
    check_step<T>(s, seed);
    seed += 10;
  }
}

TEMPLATE_TEST_CASE("Prefill tiles holding the tokens of two sequences attend each over its own",
                   "[kernels][decoder][attention]", __half, __nv_bfloat16) {
  using T = TestType;
  // 3 x 5 new tokens over 4 sequences (the last with no tokens): a block takes 4 tokens, so a
  // tile holds the end of one sequence's tokens and the start of the next's; GQA 4 and 8,
  // head_dim 64 and 128.
  for (const auto& [q_heads, kv_heads, head_dim] : {std::tuple{32, 8, 64}, std::tuple{16, 2, 128}}) {
    Step s = make_step(q_heads, kv_heads, head_dim, 16, {10, 70, 33}, 5, 120);
    s.kv.sequences += 1;
    s.block_table.resize(s.block_table.size() + static_cast<std::size_t>(s.kv.pages_per_seq), -1);
    INFO("type " << type_name<T>() << ", heads " << q_heads << "/" << kv_heads << ", head_dim " << head_dim);
    check_step<T>(s, 121);
  }
}

TEST_CASE("Out-of-bounds positions, sequences and pages are read and written nowhere", "[kernels][decoder][attention]") {
  using T = __nv_bfloat16;
  Step s = make_step(8, 2, 64, 16, {20, 5, 9, 40}, 1, 90);
  s.block_table[1] = s.kv.pages + 5;  // sequence 0's second page: past the pool
  s.positions[1] = -7;                // a negative position
  s.seq_of_token[2] = 99;             // no such sequence
  s.positions[3] = s.kv.pages_per_seq * s.kv.page_size + 3;  // past the block table's row
  check_step<T>(s, 91);
  // A position near the largest int: nothing past the block table's row is visited (the test
  // would otherwise run for minutes).
  s.positions[3] = 2147483000;
  check_step<T>(s, 92);  // the references skip the same: the kernels match them (and memcheck sees no access)
}

TEST_CASE("The decoder kernels are registered by name with their extents", "[kernels][decoder][registry]") {
  flowdsl::KernelRegistry registry;
  fk::register_builtins(registry);
  for (const char* name : {"rms_norm.bf16", "add_rms_norm.f16", "silu_mul.f32", "rope_kv_append.bf16",
                           "decode_attention_partial.bf16", "decode_attention_combine.bf16", "linear.bf16",
                           "linear_gated.f16", "linear_norm.bf16", "linear_residual.f32", "linear_gated_residual.bf16",
                           "advance_positions.i32"}) {
    const flowdsl::KernelInfo* info = registry.find(name);
    REQUIRE(info != nullptr);
    CHECK(info->checked());  // every pointer declares its extent
  }
  CHECK(!registry.find("silu_mul.bf16")->element.empty());  // fusable
}
