// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file family.hpp
/// \brief A family of graphs, one per batch bucket, launched by the batch a step is given.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "flowdsl/graph.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/runtime.hpp"

namespace flowdsl {

/// \brief One bucket of a family, as Family::statistics reports it.
struct BucketStatistics {
  int bucket = 0;                   ///< the most rows (sequences, tokens) its graph takes
  bool built = false;               ///< its graph has been built
  bool ready = false;               ///< its executable is cached in the runtime now
  std::uint64_t launches = 0;       ///< launches of it through the family (that reached the stream)
  std::uint64_t device_memory = 0;  ///< of its executable (Executable::device_memory); 0 when not ready
  double build_ms = 0;              ///< the builder's time for its graph
  double instantiate_ms = 0;        ///< the time prepare() or its first launch took to instantiate it; 0 when neither did
};

/// \brief A family as Family::statistics reports it.
struct FamilyStatistics {
  std::vector<BucketStatistics> buckets;  ///< in bucket order
  std::uint64_t device_memory = 0;        ///< of every ready executable together
  std::uint64_t largest_device_memory = 0;  ///< of the largest ready executable alone
};

/// \brief The graphs of one step for a set of batch buckets (e.g. 1, 2, 4, ... 256 sequences), as
/// a serving engine runs a decode step: a launch for a batch runs the graph of the smallest bucket
/// that holds it. Each bucket's graph comes from the builder the family is given, and its
/// executable from the runtime, on the bucket's first launch (lazily) or for every bucket at once
/// (prepare(), up front). Each bucket's graph gets executables of its own (Graph::own_executable),
/// so that launching the buckets in turn updates nothing; they live in the runtime's cache.
///
/// The family's device memory beyond what its graphs name is that of its executables
/// (statistics()). Graphs that read and write buffers the caller owns, sized for the largest
/// bucket and shared by every bucket (a launch runs one bucket at a time on a stream), keep the
/// family's activations at the largest bucket's; graph memory (alloc nodes) is held by each
/// executable apart, so it adds up over the buckets.
///
/// A launch for a batch smaller than its bucket runs the bucket's graph as it is: rows beyond the
/// batch are the caller's to make harmless (padding, or a row count the graph reads from a
/// parameter set through graph_for()).
///
/// Thread-safety: one thread at a time may call a family's members (a serving loop's thread);
/// its runtime may serve other threads meanwhile.
class Family {
 public:
  /// \brief Makes the graph of a bucket: one that takes up to `bucket` rows.
  using Builder = std::function<Graph(int bucket)>;
  /// \brief Gives the graph of a bucket that the caller keeps too (a Python object's graph): the
  /// family holds it as long as it lives, and the caller may set its parameters between launches.
  using SharedBuilder = std::function<std::shared_ptr<Graph>(int bucket)>;

  /// \param runtime launches the family's graphs; must outlive it. Its capacity should hold every
  ///        bucket (a warning is logged otherwise: evicted buckets are instantiated again).
  /// \param buckets the bucket sizes, positive and strictly increasing
  /// \param build makes a bucket's graph
  /// \throws UsageError when the buckets are empty, not positive or not increasing, or build is
  ///         empty
  Family(Runtime& runtime, std::vector<int> buckets, Builder build);
  /// \brief A family whose builder gives graphs it shares with the caller; as above, and
  /// \throws UsageError also when the builder gives a null graph (when it is called).
  Family(Runtime& runtime, std::vector<int> buckets, SharedBuilder build);
  ~Family();
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;
  Family(Family&&) noexcept;
  Family& operator=(Family&&) noexcept;

  /// \brief 1, 2, 4, ... up to `largest`, and `largest` itself when it is not a power of two.
  /// \throws UsageError when largest is not positive
  static std::vector<int> powers_of_two(int largest);

  const std::vector<int>& buckets() const noexcept;

  /// \brief The smallest bucket that holds `batch` rows.
  /// \throws UsageError when batch is not positive or exceeds the largest bucket
  int bucket_for(int batch) const;

  /// \brief The graph of the bucket that holds `batch`, built now when it was not: for setting
  /// the parameters of the next launch of that batch.
  /// \throws UsageError as bucket_for(); whatever the builder throws (the family is unchanged)
  Graph& graph_for(int batch);

  /// \brief Builds every bucket's graph not built yet, and instantiates and uploads on `stream`
  /// every executable the runtime does not hold (Runtime::prepare), smallest bucket first.
  /// \throws whatever the builder or Runtime::prepare throws; the buckets made ready before stay so
  void prepare(cudaStream_t stream = nullptr);

  /// \brief Launches the graph of the bucket that holds `batch` on `stream` (Runtime::launch).
  /// \throws UsageError as bucket_for(); whatever building or Runtime::launch throws
  LaunchReport launch(int batch, cudaStream_t stream = nullptr);

  /// \brief Each bucket's state and device memory, and the family's total.
  FamilyStatistics statistics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flowdsl
