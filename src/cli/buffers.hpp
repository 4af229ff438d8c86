// SPDX-License-Identifier: Apache-2.0
// Initial contents of a graph file's buffers, produced on the host in bounded chunks
// (deterministic for a seed), and the check that the buffers fit on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "flowdsl/json.hpp"

namespace flowdsl::cli {

/// \brief Host staging used by `flowdsl run` per chunk of initial contents.
inline constexpr std::size_t staging_bytes = std::size_t{64} << 20;

/// \brief "512 GiB", "139.2 GiB", "12 B": binary units, one decimal when not whole.
std::string format_bytes(std::uint64_t bytes);

/// \brief Why the buffers of `spec` cannot be allocated on device `device` with `free_bytes`
/// free: one sentence, e.g. "the buffers need 512 GiB but device 0 has 139.2 GiB free";
/// nothing when they fit.
std::optional<std::string> memory_refusal(const GraphSpec& spec, std::uint64_t free_bytes, int device);

/// \brief Receives one chunk of a buffer's initial contents: `bytes` bytes at `data`, to be
/// placed at byte `offset` of the buffer.
using ChunkSink = std::function<void(const unsigned char* data, std::size_t bytes, std::uint64_t offset)>;

/// \brief Checks what a buffer's initialisation needs before anything is read or allocated:
/// for a .npy file, that it opens and that its header's dtype and shape match the buffer.
/// \throws std::runtime_error saying what differs.
void check_initial_contents(const BufferSpec& buffer, const std::string& base_dir);

/// \brief Produces the bytes a buffer starts with, in order, in chunks of at most `chunk_bytes`
/// (rounded down to whole elements, at least one element): zeros, a constant, seeded uniform or
/// normal values (std::mt19937_64 seeded with `seed`, libstdc++'s distributions over doubles,
/// converted to the element type, element by element, so the values do not depend on the chunk
/// size), or a .npy file (path relative to `base_dir` unless absolute).
/// \throws std::runtime_error for a .npy file that is unreadable or does not match.
void produce_initial_contents(const BufferSpec& buffer, const std::string& base_dir, std::size_t chunk_bytes,
                              const ChunkSink& sink);

/// \brief The whole initial contents of a (small) buffer at once, as produce_initial_contents.
std::vector<unsigned char> initial_contents(const BufferSpec& buffer, const std::string& base_dir);

}  // namespace flowdsl::cli
