// SPDX-License-Identifier: Apache-2.0
// The matrix multiply against a double-precision host product, for float (FMA units) and
// half/bfloat16 (tensor cores, float accumulation), at shapes with edges in every dimension,
// with and without bias and activation. Half and bfloat16 on Hopper take the copy-engine (TMA)
// and wgmma path when a and b are 16-byte aligned with k and n multiples of 8, the generic
// path of the same kernel otherwise; both are covered here, as is the cast variant (c in the
// operands' type) and an update that re-derives the tensor maps.
#include "kernel_test_support.cuh"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {
struct Dims {
  int m, n, k;
};
/// Rows `rows` of act(a b + bias) in double, and of sum over k of |a[i, p] b[p, j]| (the scale of
/// the rounding error of entry (i, j)), row after row.
struct RowsReference {
  std::vector<double> want, scale;
};
RowsReference reference_rows(const Dims& d, const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& bias, int act, const std::vector<int>& rows) {
  RowsReference r{std::vector<double>(rows.size() * d.n, 0.0), std::vector<double>(rows.size() * d.n, 0.0)};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double* want = r.want.data() + i * d.n;
    double* scale = r.scale.data() + i * d.n;
    for (int p = 0; p < d.k; ++p) {
      const double av = a[std::size_t(rows[i]) * d.k + p];
      const float* brow = b.data() + std::size_t(p) * d.n;
      for (int j = 0; j < d.n; ++j) {
        want[j] += av * brow[j];
        scale[j] += std::fabs(av * brow[j]);
      }
    }
    for (int j = 0; j < d.n; ++j) want[j] = ref::activate(act, want[j] + (bias.empty() ? 0.0 : bias[j]));
  }
  return r;
}
std::vector<int> all_rows(int m) {
  std::vector<int> rows(m);
  for (int i = 0; i < m; ++i) rows[i] = i;
  return rows;
}
/// Every row of a small product; of a large one (the host reference would take seconds), the
/// first, last and tile-edge rows and a few others.
std::vector<int> checked_rows(const Dims& d) {
  if (std::int64_t{d.m} * d.n * d.k <= (std::int64_t{1} << 26)) return all_rows(d.m);
  std::vector<int> rows = {0, 1, 7, 8, 63, 64, 65, 127, 128, 129, d.m / 2, d.m - 129, d.m - 128, d.m - 2, d.m - 1};
  for (int i = 1; i <= 8; ++i) rows.push_back(static_cast<int>((std::uint64_t(i) * 2654435761u) % std::uint64_t(d.m)));
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](int r) { return r < 0 || r >= d.m; }), rows.end());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

/// Elements of rows `rows` of got (m x n) farther from the reference than `tol` sum |a b| plus
/// `relative` |want| (the rounding of c to its type); NaN (the poison) always counts.
std::size_t bad_entries(const std::vector<float>& got, const Dims& d, const std::vector<int>& rows, const RowsReference& r,
                        double tol, double relative) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (int j = 0; j < d.n; ++j) {
      const double g = got[std::size_t(rows[i]) * d.n + j], w = r.want[i * d.n + j];
      if (!(std::fabs(g - w) <= tol * std::max(1.0, r.scale[i * d.n + j]) + relative * std::fabs(w))) ++bad;
    }
  }
  return bad;
}
std::size_t unwritten(const std::vector<float>& got) {
  return static_cast<std::size_t>(std::count_if(got.begin(), got.end(), [](float x) { return std::isnan(x); }));
}

/// Products of the inputs are exact in float; only the float accumulation rounds: float FMA
/// chains stay within 1e-5 of sum |a b|, the tensor cores' adds within 1e-3.
template <class T>
constexpr double accumulation_tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-3;
}
/// The relative rounding of c to T (half: 11 bits, bfloat16: 8), with a little room.
template <class T>
constexpr double rounding_of() {
  return std::is_same_v<T, __half> ? 1.0 / 1024 : std::is_same_v<T, __nv_bfloat16> ? 1.0 / 128 : 0.0;
}

template <class T>
struct Operands {
  Dims d;
  std::vector<float> a, b, bias;
  DeviceBuffer<T> da, db;
  DeviceBuffer<float> dbias;
  Operands(Dims dims, bool with_bias, unsigned seed)
      : d(dims),
        a(random_values<T>(std::size_t(d.m) * d.k, seed)),
        b(random_values<T>(std::size_t(d.k) * d.n, seed + 1)),
        bias(with_bias ? random_values<float>(d.n, seed + 2) : std::vector<float>{}),
        da(a.size() + 8),
        db(b.size() + 8),
        dbias(std::max(1, d.n)) {
    upload(da, a);
    upload(db, b);
    if (with_bias) dbias.upload(bias);
  }
  const float* bias_ptr() const { return bias.empty() ? nullptr : dbias.get(); }
};
}  // namespace

TEMPLATE_TEST_CASE("Matmul matches a double-precision product at every shape", "[kernels][matmul]", KERNEL_TYPES) {
  using T = TestType;
  // For half and bfloat16, n % 8 != 0 or k % 8 != 0 take the generic path; the others the TMA path.
  const Dims shapes[] = {{1, 1, 1},       {31, 31, 31},   {33, 65, 17},     {128, 128, 128}, {1000, 96, 64},
                         {257, 1000, 136}, {130, 8, 1000}, {1027, 1021, 64}, {64, 64, 0},     {127, 129, 65},
                         {300, 260, 72},  {129, 264, 8},  {200, 520, 1032}, {8, 8, 8}};
  for (const Dims d : shapes) {
    for (const fk::Activation act : {fk::Activation::none, fk::Activation::gelu, fk::Activation::relu, fk::Activation::silu}) {
      const bool with_bias = act != fk::Activation::none;
      INFO("type " << type_name<T>() << ", m " << d.m << " n " << d.n << " k " << d.k << ", activation " << static_cast<int>(act));
      Operands<T> in(d, with_bias, 31);
      DeviceBuffer<float> dc(std::max<std::size_t>(1, std::size_t(d.m) * d.n));
      dc.poison();
      flowdsl::Graph g;
      fk::matmul(g, "matmul", d.m, d.n, d.k, in.da.get(), in.db.get(), in.bias_ptr(), act, dc.get());
      Runner runner;
      runner.run(g);
      const std::vector<int> rows = all_rows(d.m);
      const std::vector<float> got = dc.download();
      CHECK(bad_entries(got, d, rows, reference_rows(d, in.a, in.b, in.bias, static_cast<int>(act), rows),
                        accumulation_tolerance<T>(), 0.0) == 0);
    }
  }
}

TEMPLATE_TEST_CASE("Matmul on tensor cores is right at 1024^3 and at 128 x 4096 x 4096", "[kernels][matmul][large]", __half,
                   __nv_bfloat16) {
  using T = TestType;
  for (const Dims d : {Dims{1024, 1024, 1024}, Dims{128, 4096, 4096}, Dims{1000, 1048, 2056}}) {
    INFO("type " << type_name<T>() << ", m " << d.m << " n " << d.n << " k " << d.k);
    Operands<T> in(d, true, 41);
    DeviceBuffer<float> dc(std::size_t(d.m) * d.n);
    dc.poison();
    flowdsl::Graph g;
    fk::matmul(g, "matmul", d.m, d.n, d.k, in.da.get(), in.db.get(), in.bias_ptr(), fk::Activation::gelu, dc.get());
    Runner runner;
    runner.run(g);
    const std::vector<float> got = dc.download();
    CHECK(unwritten(got) == 0);
    const std::vector<int> rows = checked_rows(d);
    CHECK(bad_entries(got, d, rows, reference_rows(d, in.a, in.b, in.bias, 2, rows), 1e-3, 0.0) == 0);
  }
}

TEMPLATE_TEST_CASE("Matmul with the cast epilogue writes c in the operands' type", "[kernels][matmul][cast]", __half,
                   __nv_bfloat16) {
  using T = TestType;
  const Dims shapes[] = {{1, 1, 1},     {127, 129, 65}, {300, 260, 72}, {64, 64, 0},
                         {256, 512, 1024}, {33, 136, 40}, {130, 7, 64},   {1100, 1031, 96}};
  for (const Dims d : shapes) {
    for (const fk::Activation act : {fk::Activation::none, fk::Activation::silu}) {
      const bool with_bias = act != fk::Activation::none;
      INFO("type " << type_name<T>() << ", m " << d.m << " n " << d.n << " k " << d.k << ", activation " << static_cast<int>(act));
      Operands<T> in(d, with_bias, 51);
      DeviceBuffer<T> dc(std::max<std::size_t>(1, std::size_t(d.m) * d.n));
      dc.poison();
      flowdsl::Graph g;
      fk::matmul_cast(g, "matmul", d.m, d.n, d.k, in.da.get(), in.db.get(), in.bias_ptr(), act, dc.get());
      Runner runner;
      runner.run(g);
      const std::vector<int> rows = checked_rows(d);
      const std::vector<float> got = download(dc);
      CHECK(unwritten(got) == 0);
      CHECK(bad_entries(got, d, rows, reference_rows(d, in.a, in.b, in.bias, static_cast<int>(act), rows), 1e-3,
                        rounding_of<T>()) == 0);
    }
  }
}

TEST_CASE("Matmul relaunches with new operands as a parameter update", "[kernels][matmul][update]") {
  const Dims d{200, 136, 72};
  const std::vector<float> a0 = random_values<__nv_bfloat16>(d.m * d.k, 34), a1 = random_values<__nv_bfloat16>(d.m * d.k, 35);
  const std::vector<float> b = random_values<__nv_bfloat16>(d.k * d.n, 36);
  DeviceBuffer<__nv_bfloat16> da0(a0.size()), da1(a1.size()), db(b.size());
  DeviceBuffer<float> dc(d.m * d.n);
  upload(da0, a0);
  upload(da1, a1);
  upload(db, b);
  flowdsl::Graph g;
  auto k = fk::matmul(g, "matmul", d.m, d.n, d.k, da0.get(), db.get(), static_cast<const float*>(nullptr),
                      fk::Activation::relu, dc.get());
  Runner runner;
  runner.run(g);
  k.arg<3>(static_cast<const __nv_bfloat16*>(da1.get()));
  dc.poison();
  CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
  const std::vector<double> want = ref::matmul(d.m, d.n, d.k, a1, b, {}, 1);
  CHECK(mismatches(dc.download(), want, 1e-3 * d.k) == 0);
}

TEMPLATE_TEST_CASE("Matmul updated to other buffers and sizes re-derives its tensor maps", "[kernels][matmul][update]", __half,
                   __nv_bfloat16) {
  using T = TestType;
  // One node, updated in its executable: new operands (maps re-encoded), then a misaligned a
  // (no maps: the generic path), then aligned again with a smaller k and m, then the cast node.
  const Dims big{300, 264, 136};
  Operands<T> first(big, true, 61), second(big, true, 71);
  DeviceBuffer<float> dc(std::size_t(big.m) * big.n);
  flowdsl::Graph g;
  auto node = fk::matmul(g, "matmul", big.m, big.n, big.k, first.da.get(), first.db.get(), first.bias_ptr(),
                         fk::Activation::gelu, dc.get());
  Runner runner;
  auto check_against = [&](const Dims& d, const std::vector<float>& a, const std::vector<float>& b,
                           const std::vector<float>& bias) {
    const std::vector<int> rows = all_rows(d.m);
    std::vector<float> got = dc.download();
    got.resize(std::size_t(d.m) * d.n);
    CHECK(bad_entries(got, d, rows, reference_rows(d, a, b, bias, 2, rows), 1e-3, 0.0) == 0);
  };
  dc.poison();
  runner.run(g);
  check_against(big, first.a, first.b, first.bias);

  SECTION("new operand buffers") {
    node.template arg<3>(static_cast<const T*>(second.da.get())).template arg<4>(static_cast<const T*>(second.db.get()));
    dc.poison();
    CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
    check_against(big, second.a, second.b, first.bias);
  }
  SECTION("a misaligned a, then an aligned one with smaller sizes") {
    // a shifted by one element: not 16-byte aligned, so no tensor maps; same values from there.
    std::vector<float> shifted(first.a.size() + 1, 0.5f);
    std::copy(first.a.begin(), first.a.end(), shifted.begin() + 1);
    upload(second.da, shifted);
    node.template arg<3>(static_cast<const T*>(second.da.get() + 1));
    dc.poison();
    CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
    check_against(big, first.a, first.b, first.bias);

    const Dims small{100, 264, 64};  // within the grid declared for big
    Operands<T> third(small, true, 81);
    node.template arg<0>(small.m).template arg<2>(small.k).template arg<3>(static_cast<const T*>(third.da.get()));
    node.template arg<4>(static_cast<const T*>(third.db.get()));
    dc.poison();
    CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
    check_against(small, third.a, third.b, first.bias);
  }
}

TEMPLATE_TEST_CASE("Matmul with the cast epilogue updates its operands", "[kernels][matmul][cast][update]", __half,
                   __nv_bfloat16) {
  using T = TestType;
  const Dims d{192, 320, 256};
  Operands<T> first(d, true, 91), second(d, true, 101);
  DeviceBuffer<T> dc(std::size_t(d.m) * d.n);
  flowdsl::Graph g;
  auto node = fk::matmul_cast(g, "matmul", d.m, d.n, d.k, first.da.get(), first.db.get(), first.bias_ptr(),
                              fk::Activation::relu, dc.get());
  Runner runner;
  dc.poison();
  runner.run(g);
  const std::vector<int> rows = all_rows(d.m);
  CHECK(bad_entries(download(dc), d, rows, reference_rows(d, first.a, first.b, first.bias, 1, rows), 1e-3, rounding_of<T>()) == 0);
  node.template arg<3>(static_cast<const T*>(second.da.get())).template arg<4>(static_cast<const T*>(second.db.get()));
  dc.poison();
  CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
  CHECK(bad_entries(download(dc), d, rows, reference_rows(d, second.a, second.b, first.bias, 1, rows), 1e-3, rounding_of<T>()) == 0);
}

namespace {
/// The launch shape the node was given (its kernel's rule for these arguments).
flowdsl::LaunchShape launch_of(const flowdsl::Graph& g, flowdsl::NodeId id) {
  return flowdsl::launch_fields(g.description().nodes[id].op)->launch;
}
}  // namespace

TEMPLATE_TEST_CASE("Matmul at inference shapes splits k across a cluster and matches the reference",
                   "[kernels][matmul][split]", __half, __nv_bfloat16) {
  using T = TestType;
  // The serving MLP's shapes (16 to 128 rows by 1024 x 4096, 4096 x 1024 and 1024 x 16 weights),
  // and shapes that are not multiples of the tiles or of the k-tiles each block takes.
  std::vector<Dims> shapes;
  for (const int m : {16, 32, 64, 128}) {
    for (const Dims nk : {Dims{0, 4096, 1024}, Dims{0, 1024, 4096}, Dims{0, 16, 1024}}) shapes.push_back({m, nk.n, nk.k});
  }
  shapes.insert(shapes.end(), {{7, 4096, 1032}, {50, 1000, 2056}, {129, 200, 3000}, {1, 8, 4096}, {100, 72, 8}});
  for (const Dims d : shapes) {
    for (const bool cast : {false, true}) {
      INFO("type " << type_name<T>() << ", m " << d.m << " n " << d.n << " k " << d.k << (cast ? ", cast" : ""));
      Operands<T> in(d, true, 111);
      const std::vector<int> rows = checked_rows(d);
      const RowsReference want = reference_rows(d, in.a, in.b, in.bias, 2, rows);
      flowdsl::Graph g;
      std::vector<float> got;
      if (cast) {
        DeviceBuffer<T> dc(std::size_t(d.m) * d.n);
        dc.poison();
        fk::matmul_cast(g, "matmul", d.m, d.n, d.k, in.da.get(), in.db.get(), in.bias_ptr(), fk::Activation::gelu, dc.get());
        Runner runner;
        runner.run(g);
        got = download(dc);
      } else {
        DeviceBuffer<float> dc(std::size_t(d.m) * d.n);
        dc.poison();
        fk::matmul(g, "matmul", d.m, d.n, d.k, in.da.get(), in.db.get(), in.bias_ptr(), fk::Activation::gelu, dc.get());
        Runner runner;
        runner.run(g);
        got = dc.download();
      }
      const flowdsl::LaunchShape shape = launch_of(g, 0);
      INFO("grid " << flowdsl::to_string(shape.grid) << " cluster " << flowdsl::to_string(shape.cluster));
      if (d.m <= 128 && d.n >= 1024 && d.k >= 1024) CHECK(shape.cluster.z > 1);  // the split variant is what runs
      CHECK(unwritten(got) == 0);
      CHECK(bad_entries(got, d, rows, want, 1e-3, cast ? rounding_of<T>() : 0.0) == 0);
    }
  }
}

TEMPLATE_TEST_CASE("Matmul of at most 64 rows swaps the operands' roles at both tile widths and every split",
                   "[kernels][matmul][split][swap]", __half, __nv_bfloat16) {
  using T = TestType;
  // m on wgmma's N side (16, 32 or 64, rows past m stale or zero), b's columns on its M side:
  // tiles of 128 columns (two consumers) and of 64 (one), k whole or split across a cluster;
  // the grid and cluster set by hand, as the launch rule would for other shapes.
  for (const Dims d : {Dims{1, 200, 136}, Dims{9, 1000, 520}, Dims{16, 72, 1024}, Dims{20, 136, 264}, Dims{33, 260, 700},
                       Dims{64, 128, 64}}) {
    Operands<T> in(d, true, 171);
    const std::vector<int> rows = all_rows(d.m);
    const RowsReference want = reference_rows(d, in.a, in.b, in.bias, 1, rows);
    const int k_tiles = (d.k + 63) / 64;
    for (const int bn : {128, 64}) {
      for (const int split : {1, 2, 3, 8}) {
        if (split > k_tiles) continue;
        INFO("type " << type_name<T>() << ", m " << d.m << " n " << d.n << " k " << d.k << ", tiles of " << bn
                     << " columns, k split in " << split);
        DeviceBuffer<float> dc(std::size_t(d.m) * d.n);
        dc.poison();
        flowdsl::Graph g;
        fk::matmul(g, "matmul", d.m, d.n, d.k, in.da.get(), in.db.get(), in.bias_ptr(), fk::Activation::relu, dc.get())
            .grid(flowdsl::Dim3(static_cast<unsigned>((d.n + bn - 1) / bn), 1, static_cast<unsigned>(split)))
            .cluster(flowdsl::Dim3(1, 1, static_cast<unsigned>(split)));
        Runner runner;
        runner.run(g);
        const std::vector<float> got = dc.download();
        CHECK(unwritten(got) == 0);
        CHECK(bad_entries(got, d, rows, want, 1e-3, 0.0) == 0);
      }
    }
  }
}

TEMPLATE_TEST_CASE("A split matmul updates its operands in place", "[kernels][matmul][split][update]", __half,
                   __nv_bfloat16) {
  using T = TestType;
  const Dims d{64, 4096, 1024};
  Operands<T> first(d, true, 121), second(d, true, 131);
  DeviceBuffer<float> dc(std::size_t(d.m) * d.n);
  flowdsl::Graph g;
  auto node = fk::matmul(g, "matmul", d.m, d.n, d.k, first.da.get(), first.db.get(), first.bias_ptr(),
                         fk::Activation::relu, dc.get());
  REQUIRE(launch_of(g, node.id()).cluster.z > 1);
  Runner runner;
  const std::vector<int> rows = checked_rows(d);
  dc.poison();
  runner.run(g);
  CHECK(bad_entries(dc.download(), d, rows, reference_rows(d, first.a, first.b, first.bias, 1, rows), 1e-3, 0.0) == 0);
  node.template arg<3>(static_cast<const T*>(second.da.get())).template arg<4>(static_cast<const T*>(second.db.get()));
  dc.poison();
  CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
  CHECK(bad_entries(dc.download(), d, rows, reference_rows(d, second.a, second.b, first.bias, 1, rows), 1e-3, 0.0) == 0);
  SECTION("a smaller k: fewer k-tiles than blocks in the cluster for some") {
    const Dims small{64, 4096, 72};
    Operands<T> third(small, true, 141);
    node.template arg<2>(small.k).template arg<3>(static_cast<const T*>(third.da.get()));
    node.template arg<4>(static_cast<const T*>(third.db.get()));
    dc.poison();
    CHECK(runner.run(g).kind == flowdsl::LaunchKind::updated);
    const std::vector<int> small_rows = checked_rows(small);
    CHECK(bad_entries(dc.download(), small, small_rows,
                      reference_rows(small, third.a, third.b, first.bias, 1, small_rows), 1e-3, 0.0) == 0);
  }
}

TEMPLATE_TEST_CASE("Two split matmuls on a programmatic edge compute the two-layer product", "[kernels][matmul][split][programmatic]",
                   __half, __nv_bfloat16) {
  using T = TestType;
  // x[m, 1024] -> gelu(x w1 + b1) [m, 4096] in T -> h w2 + b2 [m, 1024] in float: the serving MLP's first two layers.
  const int m = 32, hidden = 4096, width = 1024;
  const Dims first{m, hidden, width}, second{m, width, hidden};
  Operands<T> layer1(first, true, 151);
  const std::vector<float> w2 = random_values<T>(std::size_t(hidden) * width, 161);
  const std::vector<float> b2 = random_values<float>(width, 162);
  DeviceBuffer<T> dh(std::size_t(m) * hidden), dw2(w2.size());
  DeviceBuffer<float> db2(width), dy(std::size_t(m) * width);
  upload(dw2, w2);
  db2.upload(b2);
  dh.poison();
  dy.poison();
  flowdsl::Graph g;
  g.programmatic_edges(true);
  auto l1 = fk::matmul_cast(g, "l1", m, hidden, width, layer1.da.get(), layer1.db.get(), layer1.bias_ptr(),
                            fk::Activation::gelu, dh.get());
  fk::matmul(g, "l2", m, width, hidden, static_cast<const T*>(dh.get()), dw2.get(), db2.get(), fk::Activation::none, dy.get())
      .after(l1);
  REQUIRE(g.plan().steps.size() == 2);
  CHECK(g.plan().steps[1].programmatic.size() == 1);  // the edge l1 -> l2 is programmatic
  Runner runner;
  runner.run(g);
  // The reference of layer 2 takes layer 1's output as the device rounded it to T.
  const std::vector<float> h = download(dh);
  CHECK(unwritten(h) == 0);
  const std::vector<int> rows = all_rows(m);
  CHECK(bad_entries(h, first, rows, reference_rows(first, layer1.a, layer1.b, layer1.bias, 2, rows), 1e-3,
                    rounding_of<T>()) == 0);
  CHECK(bad_entries(dy.download(), second, rows, reference_rows(second, h, w2, b2, 0, rows), 1e-3, 0.0) == 0);
}
