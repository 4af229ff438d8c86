// A Backend for cpu tests of the runtime: it records what the runtime asks of it (instantiations,
// per-node updates with their plan positions, launches, live executables) and can refuse the
// update of chosen nodes or fail it, without a GPU.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
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
};

class RecordingExecutable final : public flowdsl::Executable {
 public:
  explicit RecordingExecutable(Record& r) : r_(r) { ++r_.live; }
  ~RecordingExecutable() override { --r_.live; }
  std::optional<std::string> update(const flowdsl::Description& d, const flowdsl::Plan& plan,
                                    flowdsl::NodeId id) override {
    const std::uint32_t position = plan.position[id];
    r_.asked.push_back(position);
    if (r_.refuse.count(id) != 0 || r_.refuse_position == position) return std::string("refused by the test");
    if (r_.fail_position == position) throw flowdsl::CudaError(cudaErrorInvalidValue, "update", d.nodes[id].name);
    ++r_.updates;
    r_.updated.emplace_back(d.nodes[id].name, position);
    return std::nullopt;
  }
  void launch(cudaStream_t) override { ++r_.launches; }

 private:
  Record& r_;
};

class RecordingBackend final : public flowdsl::Backend {
 public:
  explicit RecordingBackend(Record& r) : r_(r) {}
  std::unique_ptr<flowdsl::Executable> instantiate(const flowdsl::Description&, const flowdsl::Plan&,
                                                   cudaStream_t) override {
    ++r_.instantiations;
    return std::make_unique<RecordingExecutable>(r_);
  }

 private:
  Record& r_;
};

flowdsl::Runtime make_runtime(Record& r, std::size_t capacity = 8) {
  return flowdsl::Runtime(flowdsl::RuntimeOptions{capacity}, std::make_unique<RecordingBackend>(r));
}

}  // namespace flowdsl_test
