// SPDX-License-Identifier: Apache-2.0
// The fusion pass: walks a plan's bodies and closes a run of element-wise kernels at each node
// that cannot join it (fusion_parts.hpp: members, runs, touches; fusion_source.cpp: the kernel of
// a run), checks on parameter changes that a plan's groups still stand, and hashes them.
#include <functional>
#include <memory>
#include <variant>

#include "fusion_parts.hpp"
#include "hasher.hpp"

namespace flowdsl::lowering {

using namespace fusion_parts;

namespace {

// Walks the steps of one body, closing a run at each node that cannot join it.
class Finder {
 public:
  Finder(const Description& d, FusionPlan& out) : d_(d), out_(out) {}

  void walk(const std::vector<PlanStep>& steps) {
    for (const PlanStep& step : steps) {
      Member m;
      const std::string why_not = as_member(d_, step.node, kernels_, m);
      if (!why_not.empty()) {
        close();
        if (why_not != not_a_kernel) out_.notes.push_back(FusionNote{step.node, why_not});
        continue;
      }
      std::string why;
      if (!run_.accepts(d_, m, why)) {
        close();
        run_reason_ = why;
      }
      run_.add(std::move(m));
    }
    close();
  }

 private:
  void close() {
    std::vector<Member>& members = run_.members();
    if (members.size() >= 2) {
      if (!touches_) {
        touches_ = std::make_unique<Touches>(d_, kernels_);
        out_.stores_all = touches_->unknown();
      }
      out_.groups.push_back(generate(members, *touches_, out_.stores_all));
      for (const Member& m : members) out_.group_of.emplace(m.id, static_cast<std::uint32_t>(out_.groups.size() - 1));
    } else if (members.size() == 1) {
      out_.notes.push_back(FusionNote{
          members.front().id, run_reason_.empty() ? "no element-wise kernel next to it in its body's plan order" : run_reason_});
    }
    run_.clear();
    run_reason_.clear();
  }

  const Description& d_;
  FusionPlan& out_;
  KernelInfos kernels_;
  RunBuilder run_;
  std::string run_reason_;  // why the run's first member did not join the run before it
  std::unique_ptr<Touches> touches_;
};

}  // namespace

bool fusion_holds(const Description& d, const FusionPlan& fusion, const std::vector<NodeId>& changed) {
  KernelInfos kernels;
  BufferIndex buffers(d);
  std::vector<std::uint32_t> touched;
  bool any_elided = false;
  for (const FusedGroup& g : fusion.groups) any_elided = any_elided || !g.elided.empty();
  std::vector<Access> accesses;
  for (NodeId id : changed) {
    const auto member = fusion.group_of.find(id);
    const std::uint32_t own = member == fusion.group_of.end() ? ~0u : member->second;
    if (own != ~0u) touched.push_back(own);
    if (!any_elided) continue;
    const Node& node = d.nodes[id];
    accesses.assign(node.accesses.begin(), node.accesses.end());
    std::visit([&](const auto& op) { lowering_of(op).derived_accesses(op, kernels, accesses); }, node.op);
    for (std::uint32_t gi = 0; gi < fusion.groups.size(); ++gi) {
      if (gi == own) continue;
      for (const Access& kept : fusion.groups[gi].elided) {
        const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(kept.ptr));
        for (const Access& a : accesses) {
          const auto from = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
          const std::uint64_t to = access_end(a, buffers);
          if (from < begin + kept.bytes && begin < to) return false;
        }
      }
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (std::uint32_t gi : touched) {
    const FusedGroup& before = fusion.groups[gi];
    RunBuilder run;
    for (NodeId id : before.members) {
      Member m;
      std::string why;
      if (!as_member(d, id, kernels, m).empty() || !run.accepts(d, m, why)) return false;
      run.add(std::move(m));
    }
    // The same pointers equal each other: the same kernel and arguments (generate reads the
    // pointers through this alone), the same outputs overwritten. Outputs kept in registers must
    // also be where they were, since other nodes were checked against those ranges.
    if (wiring_pattern(run.members()) != before.pattern) return false;
    std::size_t elided = 0;
    for (std::size_t k = 0; k < before.members.size(); ++k) {
      const Member& m = run.members()[k];
      const bool overwritten = std::any_of(run.members().begin() + static_cast<std::ptrdiff_t>(k) + 1, run.members().end(),
                                           [&](const Member& later) { return later.word(later.output) == m.word(m.output); });
      if (before.stored[k] || overwritten) continue;
      if (elided == before.elided.size() ||
          reinterpret_cast<std::uintptr_t>(before.elided[elided].ptr) != m.word(m.output) ||
          before.elided[elided].bytes != m.bytes(m.output)) {
        return false;
      }
      ++elided;
    }
    if (elided != before.elided.size()) return false;
  }
  return true;
}

std::uint64_t hash_fusion(std::uint64_t topology, const Description&, const Plan& plan, const FusionPlan& fusion) {
  Hasher h;
  h.add(topology);
  for (const FusedGroup& g : fusion.groups) {
    h.add(plan.position[g.members.front()]);
    h.add(g.members.size());
    h.add(std::hash<std::string>{}(g.source));
    std::uint64_t stored = 0;
    for (std::size_t k = 0; k < g.stored.size(); ++k) {
      if (g.stored[k]) stored |= std::uint64_t{1} << (k % 64);
    }
    h.add(stored);
  }
  return h.finish();
}

}  // namespace flowdsl::lowering

namespace flowdsl {

FusionPlan plan_fusion(const Description& d, const Plan& plan) {
  FusionPlan out;
  lowering::Finder finder(d, out);
  finder.walk(plan.steps);
  for (const std::vector<PlanStep>& body : plan.bodies) finder.walk(body);
  return out;
}

std::string describe_fusion(const Description& d, const FusionPlan& fusion) {
  std::size_t fused = 0;
  for (const FusedGroup& g : fusion.groups) fused += g.members.size();
  std::string text = "fusion: " + std::to_string(fusion.groups.size()) + (fusion.groups.size() == 1 ? " group" : " groups") +
                     " of " + std::to_string(fused) + " kernels\n";
  for (std::size_t i = 0; i < fusion.groups.size(); ++i) {
    const FusedGroup& g = fusion.groups[i];
    text += "  group " + std::to_string(i + 1) + ":";
    std::string kept;
    for (std::size_t k = 0; k < g.members.size(); ++k) {
      text += (k == 0 ? " " : " > ") + quoted_name(node_path(d, g.members[k]));
      if (!g.stored[k]) kept += (kept.empty() ? "" : ", ") + quoted_name(node_path(d, g.members[k]));
    }
    text += "; one kernel of " + std::to_string(g.arguments.size()) + " parameters";
    text += kept.empty() ? std::string("; every output stored") : "; kept in registers, not stored: " + kept;
    text += "\n";
  }
  for (const FusionNote& note : fusion.notes) {
    text += "  not fused: " + quoted_name(node_path(d, note.node)) + ": " + note.reason + "\n";
  }
  if (!fusion.stores_all.empty()) text += "  every output stored: " + fusion.stores_all + "\n";
  return text;
}

}  // namespace flowdsl

