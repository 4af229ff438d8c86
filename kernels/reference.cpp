// SPDX-License-Identifier: Apache-2.0
// Host references of the built-in kernels. Straightforward loops, double accumulation.
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "counter_hash.hpp"
#include "reduction/argmax_key.hpp"
#include "sampling/draw.hpp"

namespace flowdsl::kernels::reference {

double activate(int act, double x) {
  switch (act) {
    case 1: return std::max(x, 0.0);
    case 2: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case 3: return x / (1.0 + std::exp(-x));
    default: return x;
  }
}

Floats iota(std::int64_t n, float start, float step) {
  Floats out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(start + double(step) * double(static_cast<float>(i)));
  return out;
}

Floats axpy(float a, const Floats& x, const Floats& y) {
  Floats out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(double(a) * x[i] + y[i]);
  return out;
}

Floats clamp(float lo, float hi, const Floats& x) {
  Floats out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::min(std::max(x[i], lo), hi);
  return out;
}

Floats bias_activation(std::int64_t rows, int cols, int act, const Floats& x, const Floats& bias) {
  Floats out(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      out[i] = static_cast<float>(activate(act, double(x[i]) + bias[c]));
    }
  }
  return out;
}

float uniform(std::uint64_t seed, std::uint64_t i, float lo, float hi) {
  const std::uint64_t bits = detail::hash(seed, i >> 1);
  return std::fma(hi - lo, (i & 1) ? detail::low_unit_float(bits) : detail::unit_float(bits), lo);
}

double normal(std::uint64_t seed, std::uint64_t i, float mean, float stddev) {
  const std::uint64_t bits = detail::hash(seed, i >> 1);
  const double radius = std::sqrt(-2.0 * std::log(double(detail::open_unit_float(bits))));
  const double angle = 2.0 * 3.14159265358979323846 * double(detail::unit_float(bits));
  return mean + double(stddev) * radius * ((i & 1) ? std::sin(angle) : std::cos(angle));
}

std::vector<double> row_sum(int rows, int cols, const Floats& x) {
  std::vector<double> out(rows, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[r] += x[std::size_t(r) * cols + c];
  return out;
}

Floats row_max(int rows, int cols, const Floats& x) {
  Floats out(rows, -std::numeric_limits<float>::infinity());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[r] = std::max(out[r], x[std::size_t(r) * cols + c]);
  return out;
}

std::vector<std::int32_t> row_argmax(int rows, int cols, const Floats& x) {
  std::vector<std::int32_t> out(rows, -1);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      if (out[r] < 0 || x[std::size_t(r) * cols + c] > x[std::size_t(r) * cols + out[r]]) out[r] = c;
    }
  }
  return out;
}

std::vector<std::uint64_t> row_argmax_key(int rows, int cols, int first, const Floats& x) {
  const std::vector<std::int32_t> index = row_argmax(rows, cols, x);
  std::vector<std::uint64_t> keys(std::size_t(rows), 0);
  for (int r = 0; r < rows; ++r) {
    if (index[r] >= 0) keys[r] = detail::argmax_key(x[std::size_t(r) * cols + index[r]], std::int64_t{first} + index[r]);
  }
  return keys;
}

double sum(const Floats& x, double* abs_sum) {
  long double total = 0, magnitude = 0;
  for (float v : x) {
    total += v;
    magnitude += std::fabs(v);
  }
  if (abs_sum) *abs_sum = static_cast<double>(magnitude);
  return static_cast<double>(total);
}

std::vector<double> softmax(int rows, int cols, const Floats& x) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + std::size_t(r) * cols;
    double* y = out.data() + std::size_t(r) * cols;
    double peak = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < cols; ++c) peak = std::max(peak, double(row[c]));
    double total = 0;
    for (int c = 0; c < cols; ++c) total += y[c] = std::exp(double(row[c]) - peak);
    for (int c = 0; c < cols; ++c) y[c] /= total;
  }
  return out;
}

std::vector<double> layer_norm(int rows, int cols, float eps, const Floats& x, const Floats& gamma, const Floats& beta) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + std::size_t(r) * cols;
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c) mean += row[c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= cols;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int c = 0; c < cols; ++c) out[std::size_t(r) * cols + c] = (row[c] - mean) * inv * gamma[c] + beta[c];
  }
  return out;
}

Padded pad(int batch, int width, float pad_value, const Floats& values, const std::vector<std::int32_t>& offsets) {
  Padded out{Floats(std::size_t(batch) * width, pad_value), std::vector<std::uint8_t>(std::size_t(batch) * width, 0)};
  for (int b = 0; b < batch; ++b) {
    const int length = std::min(offsets[b + 1] - offsets[b], width);
    for (int j = 0; j < length; ++j) {
      out.values[std::size_t(b) * width + j] = values[offsets[b] + j];
      out.mask[std::size_t(b) * width + j] = 1;
    }
  }
  return out;
}

Floats crop(int batch, int width, float pad_value, const Floats& padded, const std::vector<std::int32_t>& offsets) {
  Floats out(static_cast<std::size_t>(offsets[batch]), pad_value);
  for (int b = 0; b < batch; ++b) {
    const int length = std::min(offsets[b + 1] - offsets[b], width);
    for (int j = 0; j < length; ++j) out[offsets[b] + j] = padded[std::size_t(b) * width + j];
  }
  return out;
}

Floats gather_rows(int cols, const std::vector<std::int32_t>& index, int src_rows, const Floats& in) {
  Floats out(index.size() * cols, 0.0f);
  for (std::size_t r = 0; r < index.size(); ++r) {
    if (index[r] < 0 || index[r] >= src_rows) continue;
    for (int c = 0; c < cols; ++c) out[r * cols + c] = in[std::size_t(index[r]) * cols + c];
  }
  return out;
}

Floats gather_rows_from(int cols, const std::vector<std::int32_t>& index, int first, int src_rows, const Floats& in) {
  std::vector<std::int32_t> local(index.size());
  for (std::size_t r = 0; r < index.size(); ++r) {
    const std::int64_t at = std::int64_t{index[r]} - first;
    local[r] = at >= 0 && at < src_rows ? static_cast<std::int32_t>(at) : -1;
  }
  return gather_rows(cols, local, src_rows, in);
}

Floats heat2d_step(int nx, int ny, float alpha, const Floats& u, double* residual) {
  Floats next(u);
  double squares = 0;
  for (int i = 1; i + 1 < ny; ++i) {
    for (int j = 1; j + 1 < nx; ++j) {
      const std::size_t k = std::size_t(i) * nx + j;
      const double laplacian = double(u[k - nx]) + u[k + nx] + u[k - 1] + u[k + 1] - 4.0 * u[k];
      next[k] = static_cast<float>(u[k] + alpha * laplacian);
      squares += (double(next[k]) - u[k]) * (double(next[k]) - u[k]);
    }
  }
  if (residual) *residual = std::sqrt(squares);
  return next;
}

CartPole cartpole_initial(std::uint64_t seed, std::uint64_t env, std::uint64_t episode) {
  const std::uint64_t episode_seed = detail::hash(seed, episode);
  float v[4];
  for (int k = 0; k < 4; ++k) v[k] = std::fma(0.1f, detail::unit_float(detail::hash(episode_seed, 4 * env + k)), -0.05f);
  return CartPole{v[0], v[1], v[2], v[3]};
}

bool cartpole_dynamics(CartPole& s, int action) {
  const double gravity = 9.8, masscart = 1.0, masspole = 0.1, length = 0.5, force_mag = 10.0, tau = 0.02;
  const double total_mass = masscart + masspole, polemass_length = masspole * length;
  const double theta_threshold = 12.0 * 2.0 * 3.14159265358979323846 / 360.0, x_threshold = 2.4;
  const double force = action == 1 ? force_mag : -force_mag;
  const double costheta = std::cos(double(s.theta)), sintheta = std::sin(double(s.theta));
  const double temp = (force + polemass_length * double(s.theta_dot) * s.theta_dot * sintheta) / total_mass;
  const double thetaacc =
      (gravity * sintheta - costheta * temp) / (length * (4.0 / 3.0 - masspole * costheta * costheta / total_mass));
  const double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  s.x = static_cast<float>(s.x + tau * s.x_dot);
  s.x_dot = static_cast<float>(s.x_dot + tau * xacc);
  s.theta = static_cast<float>(s.theta + tau * s.theta_dot);
  s.theta_dot = static_cast<float>(s.theta_dot + tau * thetaacc);
  return s.x < -x_threshold || s.x > x_threshold || s.theta < -theta_threshold || s.theta > theta_threshold;
}

void cartpole_step(CartPoleEnv& e, std::uint64_t seed, std::uint64_t env, int max_steps, int action) {
  const bool terminated = cartpole_dynamics(e.state, action);
  e.reward_sum += 1.0f;
  e.episode_steps += 1;
  const bool finished = terminated || (max_steps > 0 && e.episode_steps >= max_steps);
  e.done = finished ? 1 : 0;
  if (finished) {
    e.episodes += 1;
    e.episode_steps = 0;
    e.state = cartpole_initial(seed, env, static_cast<std::uint64_t>(e.episodes));
  }
}

std::uint32_t condition_case(std::int32_t value, std::int32_t lower, std::int32_t upper) {
  if (lower <= value && value <= upper) return static_cast<std::uint32_t>(std::int64_t{value} - lower);
  const std::int64_t span = std::int64_t{upper} - lower + 1;
  return span >= 1 && span < 0xFFFFFFFFll ? static_cast<std::uint32_t>(span) : 0xFFFFFFFFu;
}

std::uint32_t condition_bucket(std::int32_t count, std::int32_t cases) {
  std::uint32_t bucket = 0;
  while (bucket < 31 && (std::int64_t{1} << bucket) < count) ++bucket;
  return std::min<std::uint32_t>(bucket, cases < 1 ? 0u : static_cast<std::uint32_t>(cases - 1));
}

std::vector<double> matmul(int m, int n, int k, const Floats& a, const Floats& b, const Floats& bias, int act) {
  std::vector<double> c(std::size_t(m) * n, 0.0);
  for (int i = 0; i < m; ++i) {
    double* row = c.data() + std::size_t(i) * n;
    for (int p = 0; p < k; ++p) {
      const double av = a[std::size_t(i) * k + p];
      const float* brow = b.data() + std::size_t(p) * n;
      for (int j = 0; j < n; ++j) row[j] += av * brow[j];
    }
    for (int j = 0; j < n; ++j) row[j] = activate(act, row[j] + (bias.empty() ? 0.0 : bias[j]));
  }
  return c;
}

std::vector<double> rms_norm(int rows, int cols, float eps, const Floats& x, const Floats& w) {
  std::vector<double> y(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const std::size_t row = static_cast<std::size_t>(r) * cols;
    double squares = 0;
    for (int c = 0; c < cols; ++c) squares += double(x[row + c]) * x[row + c];
    const double inverse = 1.0 / std::sqrt(squares / cols + eps);
    for (int c = 0; c < cols; ++c) y[row + c] = x[row + c] * inverse * w[c];
  }
  return y;
}

std::vector<double> silu_mul(const Floats& gate, const Floats& up) {
  std::vector<double> out(gate.size());
  for (std::size_t i = 0; i < gate.size(); ++i) out[i] = activate(3, gate[i]) * up[i];
  return out;
}

namespace {
// The element offset of (seq, pos, kv_head) in a pool, or -1 where an index is out of bounds.
std::int64_t cache_slot(const PagedKv& kv, std::int32_t seq, std::int32_t pos, int kv_head,
                        const std::vector<std::int32_t>& block_table) {
  if (seq < 0 || seq >= kv.sequences || pos < 0 || kv.page_size <= 0 || pos / kv.page_size >= kv.pages_per_seq) return -1;
  const std::int32_t page = block_table[static_cast<std::size_t>(seq) * kv.pages_per_seq + pos / kv.page_size];
  if (page < 0 || page >= kv.pages) return -1;
  return ((std::int64_t{page} * kv.kv_heads + kv_head) * kv.page_size + pos % kv.page_size) * kv.head_dim;
}
}  // namespace

void rope_kv_append(const PagedKv& kv, int tokens, const Floats& qkv, const std::vector<std::int32_t>& positions,
                    const std::vector<std::int32_t>& seq_of_token, const std::vector<std::int32_t>& block_table,
                    const Floats& inv_freq, Floats& q, Floats& k_cache, Floats& v_cache) {
  const int d = kv.head_dim, half = d / 2, heads = kv.q_heads + 2 * kv.kv_heads;
  q.assign(static_cast<std::size_t>(tokens) * kv.q_heads * d, 0.0f);
  for (int t = 0; t < tokens; ++t) {
    const float* in = qkv.data() + static_cast<std::size_t>(t) * heads * d;
    for (int head = 0; head < kv.q_heads + 2 * kv.kv_heads; ++head) {
      std::vector<float> out(in + head * d, in + head * d + d);
      if (head < kv.q_heads + kv.kv_heads) {
        for (int j = 0; j < half; ++j) {
          const double angle = double(positions[t]) * inv_freq[j];
          const double c = std::cos(angle), s = std::sin(angle);
          out[j] = static_cast<float>(in[head * d + j] * c - in[head * d + j + half] * s);
          out[j + half] = static_cast<float>(in[head * d + j + half] * c + in[head * d + j] * s);
        }
      }
      if (head < kv.q_heads) {
        std::copy(out.begin(), out.end(), q.begin() + (static_cast<std::ptrdiff_t>(t) * kv.q_heads + head) * d);
        continue;
      }
      const bool is_key = head < kv.q_heads + kv.kv_heads;
      const int kv_head = is_key ? head - kv.q_heads : head - kv.q_heads - kv.kv_heads;
      const std::int64_t slot = cache_slot(kv, seq_of_token[t], positions[t], kv_head, block_table);
      if (slot < 0) continue;
      std::copy(out.begin(), out.end(), (is_key ? k_cache : v_cache).begin() + slot);
    }
  }
}

std::vector<double> paged_attention(const PagedKv& kv, int tokens, float scale, const Floats& q,
                                    const std::vector<std::int32_t>& positions,
                                    const std::vector<std::int32_t>& seq_of_token,
                                    const std::vector<std::int32_t>& block_table, const Floats& k_cache,
                                    const Floats& v_cache) {
  const int d = kv.head_dim, group = kv.q_heads / kv.kv_heads;
  std::vector<double> out(static_cast<std::size_t>(tokens) * kv.q_heads * d, 0.0);
  for (int t = 0; t < tokens; ++t) {
    for (int head = 0; head < kv.q_heads; ++head) {
      const int kv_head = head / group;
      const float* query = q.data() + (static_cast<std::size_t>(t) * kv.q_heads + head) * d;
      std::vector<double> scores;
      std::vector<std::int64_t> slots;
      // Positions 0 .. the token's, none past the block table's row (which has no slots).
      const std::int64_t context =
          std::min<std::int64_t>(std::int64_t{positions[t]} + 1, std::int64_t{kv.pages_per_seq} * kv.page_size);
      for (std::int32_t p = 0; p < context; ++p) {
        const std::int64_t slot = cache_slot(kv, seq_of_token[t], p, kv_head, block_table);
        if (slot < 0) continue;
        double dot = 0;
        for (int j = 0; j < d; ++j) dot += double(query[j]) * scale * k_cache[slot + j];
        scores.push_back(dot);
        slots.push_back(slot);
      }
      if (scores.empty()) continue;
      const double max = *std::max_element(scores.begin(), scores.end());
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - max));
      double* o = out.data() + (static_cast<std::size_t>(t) * kv.q_heads + head) * d;
      for (std::size_t i = 0; i < scores.size(); ++i) {
        for (int j = 0; j < d; ++j) o[j] += scores[i] / total * v_cache[slots[i] + j];
      }
    }
  }
  return out;
}

std::vector<std::int32_t> sample_top_p(int rows, int cols, float temperature, int top_k, float top_p,
                                       std::uint64_t seed, std::int32_t step, const Floats& logits) {
  std::vector<std::int32_t> out(rows, -1);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> x(static_cast<std::size_t>(cols));
    for (int c = 0; c < cols; ++c) {
      const float v = logits[std::size_t(r) * cols + c];
      x[c] = std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
    }
    // Largest first, the first index first among equal logits.
    std::vector<int> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    if (cols <= 0 || x[order[0]] == -std::numeric_limits<double>::infinity()) continue;
    if (!(temperature > 0.0f)) {
      out[r] = order[0];
      continue;
    }
    std::vector<double> p(x.size());
    for (std::size_t c = 0; c < x.size(); ++c) {
      p[c] = x[c] == x[order[0]] ? 1.0 : std::exp((x[c] - x[order[0]]) / temperature);
      if (!(p[c] > 0.0)) p[c] = 0.0;  // -inf, and NaN from -inf / inf
    }
    // The first n of `order`, and every element tied with the last of them.
    const auto through_ties = [&](std::size_t n) {
      while (n < order.size() && x[order[n]] == x[order[n - 1]]) ++n;
      return n;
    };
    std::size_t kept = order.size();
    if (top_k > 0 && top_k < cols) kept = through_ties(static_cast<std::size_t>(top_k));
    if (top_p < 1.0f) {
      double mass = 0, running = 0;
      for (std::size_t i = 0; i < kept; ++i) mass += p[order[i]];
      std::size_t n = 0;
      do {
        running += p[order[n++]];
      } while (n < kept && running < top_p * mass);
      kept = through_ties(n);
    }
    const double threshold = x[order[kept - 1]];
    double total = 0;
    for (std::size_t c = 0; c < x.size(); ++c) total += x[c] >= threshold ? p[c] : 0.0;
    const double target = detail::sampling_draw(seed, step, r) / 16777216.0 * total;
    double running = 0;
    for (std::size_t c = 0; c < x.size(); ++c) {
      if (x[c] < threshold || p[c] == 0.0) continue;
      running += p[c];
      out[r] = static_cast<std::int32_t>(c);  // the last kept one, should rounding leave the target unreached
      if (running > target) break;
    }
  }
  return out;
}

}  // namespace flowdsl::kernels::reference
