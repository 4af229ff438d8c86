// SPDX-License-Identifier: Apache-2.0
// Applied parameters: what an executable holds, node by node, so that a Graph of its topology
// that it was not last synchronised with (a rebuilt one) updates only the nodes that differ.
#pragma once

#include <cstdint>
#include <vector>

#include "flowdsl/description.hpp"
#include "flowdsl/plan.hpp"

namespace flowdsl::lowering {

/// The parameters last applied to one executable, saved as bytes by plan position (a few bytes a
/// node: a kernel's argument values), with what the symbols among them stood for. Either known
/// exactly, or unknown (from begin_updates() to end_updates(), which an update that fails
/// part-way never reaches): then every node counts as differing.
class AppliedParameters {
 public:
  /// Every node's parameters of `d`: an executable made, or made again, from it.
  void assign(const Description& d, const Plan& plan);

  /// Updates of the executable begin: until end_updates(), the parameters it holds are not known
  /// (an update that fails part-way leaves them so).
  void begin_updates() noexcept { known_ = false; }
  /// Node `id`'s parameters of `d`, just applied to the executable.
  void assign(const Description& d, const Plan& plan, NodeId id);
  /// Every node that differed from `d`, or changed in it, has been applied: the executable holds
  /// `d`'s parameters. `compared`: they were found by comparison with a description it was not
  /// synchronised with before, whose symbols the parameters held now use.
  void end_updates(const Description& d, const Plan& plan, bool compared);

  /// Appends to `out`, in id order, the nodes of `d` (of the same topology) whose parameters
  /// differ from those held: every node when they are unknown.
  void differing(const Description& d, const Plan& plan, std::vector<NodeId>& out) const;

 private:
  struct Span {
    std::uint32_t start, size;
  };
  std::vector<unsigned char> bytes_;    ///< every node's saved parameters
  std::vector<Span> spans_;             ///< by plan position: where its bytes are
  std::vector<std::uint32_t> symbols_;  ///< by symbol index: the plan position of its node
  std::vector<unsigned char> scratch_;  ///< one node's bytes while they are saved
  bool known_ = false;
};

}  // namespace flowdsl::lowering
