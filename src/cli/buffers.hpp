// Initial contents of a graph file's buffers, computed on the host (deterministic for a seed).
#pragma once

#include <string>
#include <vector>

#include "flowdsl/json.hpp"

namespace flowdsl::cli {

/// \brief The bytes a buffer starts with: zeros, a constant, seeded uniform or normal values
/// (std::mt19937_64 seeded with `seed`, libstdc++'s distributions over doubles, converted to
/// the element type), or a .npy file (path relative to `base_dir` unless absolute).
/// \throws std::runtime_error for a .npy file that is unreadable or does not match.
std::vector<unsigned char> initial_contents(const BufferSpec& buffer, const std::string& base_dir);

}  // namespace flowdsl::cli
