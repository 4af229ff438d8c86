// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file rope.hpp
/// \brief The inverse frequencies of rotary position embedding, with the scalings checkpoints
/// state in their `config.json` (`rope_theta`, `rope_scaling`): what rope_kv_append's `inv_freq`
/// holds. Host code of the kernel library (flowdsl::kernels).

#include <cstdint>
#include <vector>

namespace flowdsl::kernels {

/// \brief `rope_scaling` of a Hugging Face config: none, or Llama 3's frequency-dependent scaling
/// (`"rope_type": "llama3"`: long wavelengths divided by `factor`, short ones kept, those between
/// interpolated).
struct RopeScaling {
  enum class Kind : std::uint8_t { none, llama3 };
  Kind kind = Kind::none;
  double factor = 1.0;                       ///< `factor`
  double low_freq_factor = 1.0;              ///< `low_freq_factor`
  double high_freq_factor = 4.0;             ///< `high_freq_factor`
  double original_max_position = 8192.0;     ///< `original_max_position_embeddings`
};

/// \brief inv_freq[j] = theta^(-2j / head_dim) for j < head_dim / 2, scaled as `scaling` says,
/// computed in double and rounded to float (Hugging Face computes them in float32: the two agree
/// to about an ulp).
/// \throws UsageError when head_dim is not positive and even, theta is not above 1, or the
///         llama3 factors are not positive with high_freq_factor above low_freq_factor.
std::vector<float> rope_inverse_frequencies(int head_dim, double theta, const RopeScaling& scaling = {});

}  // namespace flowdsl::kernels
