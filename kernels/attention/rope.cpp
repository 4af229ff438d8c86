// SPDX-License-Identifier: Apache-2.0
// The inverse frequencies of rotary position embedding, plain and with Llama 3's scaling, as
// Hugging Face's `_compute_llama3_parameters` computes them.
#include "flowdsl/rope.hpp"

#include <cmath>
#include <string>

#include "flowdsl/error.hpp"

namespace flowdsl::kernels {

std::vector<float> rope_inverse_frequencies(int head_dim, double theta, const RopeScaling& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw UsageError("flowdsl: rope: head_dim is " + std::to_string(head_dim) + " (a positive even number)");
  }
  if (!(theta > 1.0)) throw UsageError("flowdsl: rope: theta is " + std::to_string(theta) + " (above 1)");
  const bool llama3 = scaling.kind == RopeScaling::Kind::llama3;
  if (llama3 && !(scaling.factor > 0 && scaling.low_freq_factor > 0 &&
                  scaling.high_freq_factor > scaling.low_freq_factor && scaling.original_max_position > 0)) {
    throw UsageError("flowdsl: rope: llama3 scaling needs factor and low_freq_factor above 0, high_freq_factor above "
                     "low_freq_factor and original_max_position above 0");
  }
  constexpr double two_pi = 6.283185307179586476925286766559;
  std::vector<float> out(static_cast<std::size_t>(head_dim / 2));
  for (int j = 0; j < head_dim / 2; ++j) {
    double f = std::pow(theta, -2.0 * j / head_dim);
    if (llama3) {
      const double wavelength = two_pi / f;
      const double low_wavelength = scaling.original_max_position / scaling.low_freq_factor;
      const double high_wavelength = scaling.original_max_position / scaling.high_freq_factor;
      if (wavelength > low_wavelength) {
        f /= scaling.factor;  // long wavelengths: stretched
      } else if (wavelength >= high_wavelength) {
        // Between: interpolated from the stretched to the kept frequency.
        const double smooth = (scaling.original_max_position / wavelength - scaling.low_freq_factor) /
                              (scaling.high_freq_factor - scaling.low_freq_factor);
        f = (1.0 - smooth) * f / scaling.factor + smooth * f;
      }
    }
    out[static_cast<std::size_t>(j)] = static_cast<float>(f);
  }
  return out;
}

}  // namespace flowdsl::kernels
