// SPDX-License-Identifier: Apache-2.0
// A Backend for cpu tests of the runtime: it records what the runtime asks of it (instantiations,
// per-node updates with their plan positions, launches and the streams they ran on, live
// executables, marked launch ends), can refuse or fail the update of chosen nodes, says which
// marked launches have ended as the test decides, and counts executables used by two threads at
// once, without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flowdsl/flowdsl.hpp"

namespace flowdsl_test {

/// What the recording backend saw, and which updates it refuses.
struct Record {
  std::atomic<int> instantiations{0};
  std::atomic<int> updates{0};
  std::atomic<int> launches{0};
  std::atomic<int> live{0};          // executables alive now
  std::set<flowdsl::NodeId> refuse;  // nodes whose update is refused (read under the runtime lock)
  std::optional<std::uint32_t> refuse_position;  // a plan position whose update is refused
  std::optional<std::uint32_t> fail_position;    // a plan position whose update throws CudaError
  std::vector<std::pair<std::string, std::uint32_t>> updated;  // (node name, plan position)
  std::vector<std::uint32_t> asked;  // every plan position asked to update, refused ones too

  // Launch ends: every mark_end() gets the next number; the marked launches numbered below
  // `ended` have ended (end_all() ends every one marked so far).
  std::atomic<int> marks{0};
  std::atomic<int> ended{0};
  void end_all() { ended = marks.load(); }

  // Launches, as (executable: its instantiation's number from 0, stream); launch() runs outside
  // the runtime's lock, hence the mutex.
  std::mutex launch_mutex;
  std::vector<std::pair<int, cudaStream_t>> launched;
  std::chrono::microseconds launch_time{0};  // how long each launch() takes
  std::atomic<int> overlaps{0};              // calls on one executable from two threads at once
  std::atomic<int> failing_launches{0};      // the next this many launch() calls throw CudaError
  std::atomic<int> failing_marks{0};         // the next this many mark_end() calls throw CudaError
  std::uint64_t memory_per_node = 0;         // each executable's device_memory(): this much a node
  std::atomic<int> failing_instantiations{0};  // the next this many instantiate() calls throw CudaError
};

class RecordingExecutable final : public flowdsl::Executable {
 public:
  RecordingExecutable(Record& r, int number, std::uint64_t memory) : r_(r), number_(number), memory_(memory) {
    ++r_.live;
  }
  ~RecordingExecutable() override { --r_.live; }
  std::optional<std::string> update(const flowdsl::Description& d, const flowdsl::Plan& plan,
                                    flowdsl::NodeId id) override {
    const Using in_use(*this);
    const std::uint32_t position = plan.position[id];
    r_.asked.push_back(position);
    if (r_.refuse.count(id) != 0 || r_.refuse_position == position) return std::string("refused by the test");
    if (r_.fail_position == position) throw flowdsl::CudaError(cudaErrorInvalidValue, "update", d.nodes[id].name);
    ++r_.updates;
    r_.updated.emplace_back(d.nodes[id].name, position);
    return std::nullopt;
  }
  void launch(cudaStream_t stream) override {
    const Using in_use(*this);
    if (r_.launch_time.count() > 0) std::this_thread::sleep_for(r_.launch_time);
    if (r_.failing_launches > 0) {
      --r_.failing_launches;
      throw flowdsl::CudaError(cudaErrorLaunchFailure, "cudaGraphLaunch");
    }
    ++r_.launches;
    const std::lock_guard lock(r_.launch_mutex);
    r_.launched.emplace_back(number_, stream);
  }
  void mark_end(cudaStream_t) override {
    const Using in_use(*this);
    if (r_.failing_marks > 0) {
      --r_.failing_marks;
      throw flowdsl::CudaError(cudaErrorLaunchFailure, "cudaEventRecord");
    }
    mark_ = r_.marks++;
  }
  bool ended() const override { return mark_ >= 0 && mark_ < r_.ended; }
  std::uint64_t device_memory() const noexcept override { return memory_; }

 private:
  // Counts a call that starts while another call on this executable runs.
  struct Using {
    explicit Using(const RecordingExecutable& e) : e_(e) {
      if (e_.busy_.exchange(true)) ++e_.r_.overlaps;
    }
    ~Using() { e_.busy_ = false; }
    const RecordingExecutable& e_;
  };

  Record& r_;
  int number_;
  std::uint64_t memory_;
  int mark_ = -1;
  mutable std::atomic<bool> busy_{false};
};

class RecordingBackend final : public flowdsl::Backend {
 public:
  explicit RecordingBackend(Record& r) : r_(r) {}
  std::unique_ptr<flowdsl::Executable> instantiate(const flowdsl::Description& d, const flowdsl::Plan&,
                                                   cudaStream_t) override {
    if (r_.failing_instantiations > 0) {
      --r_.failing_instantiations;
      throw flowdsl::CudaError(cudaErrorMemoryAllocation, "cudaGraphInstantiateWithParams");
    }
    return std::make_unique<RecordingExecutable>(r_, r_.instantiations++, r_.memory_per_node * d.nodes.size());
  }

 private:
  Record& r_;
};

inline flowdsl::Runtime make_runtime(Record& r, std::size_t capacity = 8) {
  return flowdsl::Runtime(flowdsl::RuntimeOptions{capacity}, std::make_unique<RecordingBackend>(r));
}

}  // namespace flowdsl_test
