// The matrix multiply against a double-precision host product, for float (FMA units) and
// half/bfloat16 (tensor cores, float accumulation), at shapes with edges in every dimension,
// with and without bias and activation, on the 16-byte copy path and the element path.
#include "kernel_test_support.cuh"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;
using namespace kernel_test;

namespace {
struct Dims {
  int m, n, k;
};
/// Sum over k of |a[i, p] b[p, j]|: the scale of the rounding error of entry (i, j).
std::vector<double> magnitudes(const Dims& d, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> abs_a(a.size()), abs_b(b.size());
  for (std::size_t i = 0; i < a.size(); ++i) abs_a[i] = std::fabs(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) abs_b[i] = std::fabs(b[i]);
  return ref::matmul(d.m, d.n, d.k, abs_a, abs_b, {}, 0);
}
}  // namespace

TEMPLATE_TEST_CASE("Matmul matches a double-precision product at every shape", "[kernels][matmul]", KERNEL_TYPES) {
  using T = TestType;
  // n % 8 != 0 or k % 8 != 0 take the element path; the others the 16-byte cp.async path.
  const Dims shapes[] = {{1, 1, 1},     {31, 31, 31},    {33, 65, 17},    {128, 128, 128}, {1000, 96, 64},
                         {257, 1000, 136}, {130, 8, 1000}, {1027, 1021, 64}, {64, 64, 0}};
  for (const Dims d : shapes) {
    for (const fk::Activation act : {fk::Activation::none, fk::Activation::gelu}) {
      const bool with_bias = act != fk::Activation::none;
      INFO("type " << type_name<T>() << ", m " << d.m << " n " << d.n << " k " << d.k << ", bias and gelu " << with_bias);
      const std::vector<float> a = random_values<T>(std::size_t(d.m) * d.k, 31), b = random_values<T>(std::size_t(d.k) * d.n, 32);
      const std::vector<float> bias = with_bias ? random_values<float>(d.n, 33) : std::vector<float>{};
      DeviceBuffer<T> da(a.size() + 1), db(b.size() + 1);
      DeviceBuffer<float> dbias(d.n), dc(std::size_t(d.m) * d.n);
      upload(da, a);
      upload(db, b);
      if (with_bias) dbias.upload(bias);
      dc.poison();
      flowdsl::Graph g;
      fk::matmul(g, "matmul", d.m, d.n, d.k, da.get(), db.get(), with_bias ? dbias.get() : nullptr, act, dc.get());
      Runner runner;
      runner.run(g);
      const std::vector<double> want = ref::matmul(d.m, d.n, d.k, a, b, bias, static_cast<int>(act));
      const std::vector<double> scale = magnitudes(d, a, b);
      const std::vector<float> got = dc.download();
      // Products of the inputs are exact in float; only the float accumulation rounds:
      // float FMA chains stay within 1e-5 of sum |a b|, the tensor cores' adds within 1e-3.
      const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-3;
      std::size_t bad = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, scale[i]))) ++bad;
      }
      CHECK(bad == 0);
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
