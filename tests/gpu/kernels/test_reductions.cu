// SPDX-License-Identifier: Apache-2.0
// Row-wise reductions, the whole-array sum, softmax and layer normalisation against their
// host references, through a Graph and Runtime, on every element type; rows short enough for
// a warp each and long enough for a block each, none a multiple of the block size.
#include "kernel_test_support.cuh"
#include "reduction/argmax_key.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {
struct Shape {
  int rows, cols;
};
// (1 << 20) + 3 elements in one row, and spread over many short rows.
const Shape shapes[] = {{1, 1}, {1, 31}, {31, 31}, {1000, 7}, {7, 1000}, {1000, 1000}, {33, 1025}, {2, (1 << 20) + 3},
                        {(1 << 20) + 3, 1}};

std::vector<double> row_abs_sums(int rows, int cols, const std::vector<float>& x) {
  std::vector<double> out(rows, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[r] += std::fabs(x[std::size_t(r) * cols + c]);
  return out;
}

/// Float accumulation of a long row: each thread adds cols / 256 terms in float, so the
/// error grows with the row; sums are compared relative to sum |x| of the row.
std::size_t sum_mismatches(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& scale,
                           double rel) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= rel * std::max(1.0, scale[i]))) ++bad;
  }
  return bad;
}
}  // namespace

TEMPLATE_TEST_CASE("Row reductions match the host reference", "[kernels][reduce]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    INFO("type " << type_name<T>() << ", " << s.rows << " x " << s.cols);
    const std::size_t n = std::size_t(s.rows) * s.cols;
    const std::vector<float> x = random_values<T>(n, 11, -10.0f, 10.0f);
    DeviceBuffer<T> dx(n);
    DeviceBuffer<float> sums(s.rows), maxima(s.rows), means(s.rows);
    DeviceBuffer<std::int32_t> argmax(s.rows);
    upload(dx, x);
    for (auto* b : {&sums, &maxima, &means}) b->poison();
    argmax.poison();

    flowdsl::Graph g;
    fk::row_sum(g, "sum", s.rows, s.cols, dx.get(), sums.get());
    fk::row_max(g, "max", s.rows, s.cols, dx.get(), maxima.get());
    fk::row_mean(g, "mean", s.rows, s.cols, dx.get(), means.get());
    fk::row_argmax(g, "argmax", s.rows, s.cols, dx.get(), argmax.get());
    Runner runner;
    runner.run(g);

    const std::vector<double> want_sum = ref::row_sum(s.rows, s.cols, x), scale = row_abs_sums(s.rows, s.cols, x);
    std::vector<double> want_mean(want_sum), mean_scale(scale);
    for (int r = 0; r < s.rows; ++r) {
      want_mean[r] /= s.cols;
      mean_scale[r] /= s.cols;
    }
    CHECK(sum_mismatches(sums.download(), want_sum, scale, 1e-5) == 0);
    CHECK(sum_mismatches(means.download(), want_mean, mean_scale, 1e-5) == 0);
    CHECK(mismatches(maxima.download(), ref::row_max(s.rows, s.cols, x), 0.0) == 0);  // max is exact
    CHECK(argmax.download() == ref::row_argmax(s.rows, s.cols, x));
  }
}

TEMPLATE_TEST_CASE("Argmax keys of a row's column parts give the row's argmax", "[kernels][reduce]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    for (const int parts : {1, 3}) {
      INFO("type " << type_name<T>() << ", " << s.rows << " x " << s.cols << " in " << parts << " parts");
      // Values from few levels (many ties, across parts too); each part is a matrix of its own.
      const std::size_t n = std::size_t(s.rows) * s.cols;
      std::vector<float> x = random_values<T>(n, 13, -4.0f, 4.0f);
      for (float& v : x) v = std::round(v);
      const int width = (s.cols + parts - 1) / parts;
      std::vector<std::uint64_t> best(std::size_t(s.rows), 0);
      DeviceBuffer<std::uint64_t> keys(s.rows);
      DeviceBuffer<std::int32_t> tokens(s.rows);
      for (int p = 0; p < parts; ++p) {
        const int first = p * width, cols = std::max(0, std::min(s.cols, first + width) - first);
        std::vector<float> part(std::size_t(s.rows) * cols);
        for (int r = 0; r < s.rows; ++r) {
          std::copy_n(x.begin() + std::size_t(r) * s.cols + first, cols, part.begin() + std::size_t(r) * cols);
        }
        DeviceBuffer<T> dx(std::max<std::size_t>(1, part.size()));
        upload(dx, part);
        keys.poison();
        tokens.poison();
        flowdsl::Graph g;
        auto key = fk::row_argmax_key(g, "key", s.rows, cols, first, dx.get(), keys.get());
        fk::argmax_key_token(g, "token", s.rows, static_cast<const std::uint64_t*>(keys.get()), tokens.get()).after(key);
        Runner runner;
        runner.run(g);
        const std::vector<std::uint64_t> got = keys.download();
        CHECK(got == ref::row_argmax_key(s.rows, cols, first, part));
        std::vector<std::int32_t> local = ref::row_argmax(s.rows, cols, part);
        for (auto& i : local) i = i < 0 ? -1 : i + first;
        CHECK(tokens.download() == local);
        for (std::size_t r = 0; r < best.size(); ++r) best[r] = std::max(best[r], got[r]);
      }
      std::vector<std::int32_t> combined(best.size());
      for (std::size_t r = 0; r < best.size(); ++r) combined[r] = fk::detail::argmax_key_index(best[r]);
      CHECK(combined == ref::row_argmax(s.rows, s.cols, x));
    }
  }
}

TEMPLATE_TEST_CASE("The whole-array sum matches the host and is deterministic", "[kernels][reduce]", KERNEL_TYPES) {
  using T = TestType;
  for (const std::int64_t n : sizes) {
    INFO("type " << type_name<T>() << ", n = " << n);
    const std::vector<float> x = random_values<T>(n, 12);
    DeviceBuffer<T> dx(n + 1);
    DeviceBuffer<double> partials(fk::sum_max_partials);
    DeviceBuffer<float> out(1);
    upload(dx, x);
    out.poison();
    partials.poison();
    flowdsl::Graph g;
    fk::sum(g, "sum", n, dx.get(), partials.get(), out.get());
    Runner runner;
    runner.run(g);
    double magnitude = 0;
    const double want = ref::sum(x, &magnitude);
    const float first = out.download()[0];
    // Double accumulation across threads; within a thread up to 16 values are added in float
    // first (one 16-byte vector pair), hence a bound of 2e-6 of sum |x|.
    CHECK(std::fabs(first - want) <= 2e-6 * std::max(1.0, magnitude));
    out.poison();
    runner.run(g);
    CHECK(out.download()[0] == first);  // same grid, same bits
  }
}

TEMPLATE_TEST_CASE("Softmax matches the host reference and is stable on large inputs", "[kernels][softmax]", KERNEL_TYPES) {
  using T = TestType;
  for (const Shape s : shapes) {
    for (const float range : {3.0f, 30000.0f}) {  // 30000: exp would overflow without the max shift
      INFO("type " << type_name<T>() << ", " << s.rows << " x " << s.cols << ", inputs in +-" << range);
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const std::vector<float> x = random_values<T>(n, 13, -range, range);
      DeviceBuffer<T> dx(n), dy(n);
      upload(dx, x);
      dy.poison();
      flowdsl::Graph g;
      fk::softmax(g, "softmax", s.rows, s.cols, dx.get(), dy.get());
      Runner runner;
      runner.run(g);
      CHECK(mismatches(download(dy), ref::softmax(s.rows, s.cols, x), tolerance<T>()) == 0);
    }
  }
}

TEMPLATE_TEST_CASE("Layer normalisation matches the host reference", "[kernels][layer_norm]", KERNEL_TYPES) {
  using T = TestType;
  // Besides the shared shapes, rows between 1024 and 4096 columns (16-bit: a warp a row when
  // cols % 8 == 0, the block otherwise) and just past 4096 (streamed).
  std::vector<Shape> all(std::begin(shapes), std::end(shapes));
  for (const Shape s : {Shape{33, 4096}, Shape{300, 1032}, Shape{17, 2056}, Shape{9, 4095}, Shape{5, 4104}}) all.push_back(s);
  for (const Shape s : all) {
    INFO("type " << type_name<T>() << ", " << s.rows << " x " << s.cols);
    const std::size_t n = std::size_t(s.rows) * s.cols;
    // An offset of 5 against a spread of 1: the shifted statistics must not cancel.
    const std::vector<float> x = random_values<T>(n, 14, 4.0f, 6.0f);
    const std::vector<float> gamma = random_values<float>(s.cols, 15, 0.5f, 1.5f), beta = random_values<float>(s.cols, 16);
    DeviceBuffer<T> dx(n), dy(n);
    DeviceBuffer<float> dgamma(s.cols), dbeta(s.cols);
    upload(dx, x);
    upload(dgamma, gamma);
    upload(dbeta, beta);
    dy.poison();
    flowdsl::Graph g;
    fk::layer_norm(g, "layer_norm", s.rows, s.cols, 1e-5f, dx.get(), dgamma.get(), dbeta.get(), dy.get());
    Runner runner;
    runner.run(g);
    // A one-element row has zero variance: output beta exactly; float rows of a million
    // elements accumulate cols / 256 terms per thread in float, hence 5e-5 there.
    const double tol = std::is_same_v<T, float> && s.cols > 4096 ? 5e-5 : tolerance<T>();
    CHECK(mismatches(download(dy), ref::layer_norm(s.rows, s.cols, 1e-5f, x, gamma, beta), tol) == 0);
  }
}

TEMPLATE_TEST_CASE("Layer normalisation of long rows is correct off the 16-byte boundary", "[kernels][layer_norm]", KERNEL_TYPES) {
  using T = TestType;
  const int rows = 21, cols = 4096;
  const std::size_t n = std::size_t(rows) * cols;
  const std::vector<float> x = random_values<T>(n + 8, 17, 4.0f, 6.0f);
  const std::vector<float> gamma = random_values<float>(cols, 18, 0.5f, 1.5f), beta = random_values<float>(cols, 19);
  for (const int offset : {1, 8}) {  // 8: aligned for float only; 1: aligned for none
    INFO("type " << type_name<T>() << ", x and y offset by " << offset);
    DeviceBuffer<T> dx(n + 8), dy(n + 8);
    DeviceBuffer<float> dgamma(cols), dbeta(cols);
    upload(dx, x);
    upload(dgamma, gamma);
    upload(dbeta, beta);
    dy.poison();
    flowdsl::Graph g;
    fk::layer_norm(g, "layer_norm", rows, cols, 1e-5f, dx.get() + offset, dgamma.get(), dbeta.get(), dy.get() + offset);
    Runner runner;
    runner.run(g);
    const std::vector<float> got = download(dy), xs(x.begin() + offset, x.begin() + offset + n);
    CHECK(mismatches(std::vector<float>(got.begin() + offset, got.begin() + offset + n),
                     ref::layer_norm(rows, cols, 1e-5f, xs, gamma, beta), tolerance<T>()) == 0);
    for (int i = 0; i < offset; ++i) CHECK(std::isnan(got[i]));
  }
}
