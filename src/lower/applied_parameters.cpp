// SPDX-License-Identifier: Apache-2.0
// Applied parameters: the parameters an executable holds, saved as bytes node by node through the
// kinds' save_parameters facets, compared with another description of its topology through their
// same_parameters facets.
#include "applied_parameters.hpp"

#include <algorithm>
#include <variant>

#include "lowering_facets.hpp"

namespace flowdsl::lowering {
namespace {

// By symbol index, the plan position of the node owning it.
void symbol_positions(const Description& d, const Plan& plan, std::vector<std::uint32_t>& out) {
  out.resize(d.symbols.size());
  for (std::size_t i = 0; i < d.symbols.size(); ++i) {
    const NodeId owner = d.symbols[i];
    out[i] = owner < plan.position.size() ? plan.position[owner] : SymbolMatch::no_position;
  }
}

void save(const Operation& op, std::vector<unsigned char>& out) {
  std::visit([&out](const auto& o) { lowering_of(o).save_parameters(o, out); }, op);
}

}  // namespace

void AppliedParameters::assign(const Description& d, const Plan& plan) {
  bytes_.clear();
  bytes_.reserve(d.nodes.size() * 24);
  spans_.resize(plan.position.size());
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const auto start = static_cast<std::uint32_t>(bytes_.size());
    save(d.nodes[id].op, bytes_);
    spans_[plan.position[id]] = {start, static_cast<std::uint32_t>(bytes_.size()) - start};
  }
  symbol_positions(d, plan, symbols_);
  known_ = true;
}

void AppliedParameters::assign(const Description& d, const Plan& plan, NodeId id) {
  Span& span = spans_[plan.position[id]];
  scratch_.clear();
  save(d.nodes[id].op, scratch_);
  if (scratch_.size() != span.size) {  // another argument layout under one function: make room
    const auto grown = static_cast<std::int64_t>(scratch_.size()) - span.size;
    bytes_.erase(bytes_.begin() + span.start, bytes_.begin() + span.start + span.size);
    bytes_.insert(bytes_.begin() + span.start, scratch_.size(), 0);
    for (Span& other : spans_) {
      if (other.start > span.start) other.start = static_cast<std::uint32_t>(other.start + grown);
    }
    span.size = static_cast<std::uint32_t>(scratch_.size());
  }
  std::copy(scratch_.begin(), scratch_.end(), bytes_.begin() + span.start);
  // A Graph's symbols keep their index once made; one made since may be among the arguments.
  if (symbols_.size() != d.symbols.size()) symbol_positions(d, plan, symbols_);
}

void AppliedParameters::end_updates(const Description& d, const Plan& plan, bool compared) {
  // After a comparison, correct for every node held: those that differed were copied from `d`,
  // and the others hold only symbols that name the same positions in both (SymbolMatch).
  if (compared) symbol_positions(d, plan, symbols_);
  known_ = true;
}

void AppliedParameters::differing(const Description& d, const Plan& plan, std::vector<NodeId>& out) const {
  if (!known_ || spans_.size() != plan.position.size()) {
    for (NodeId id = 0; id < d.nodes.size(); ++id) out.push_back(id);
    return;
  }
  std::vector<std::uint32_t> wanted;
  symbol_positions(d, plan, wanted);
  const SymbolMatch symbols(symbols_, wanted);
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const Span span = spans_[plan.position[id]];
    SavedParameters held(bytes_.data() + span.start, span.size);
    const bool same = std::visit([&](const auto& op) { return lowering_of(op).same_parameters(op, held, symbols); }, d.nodes[id].op);
    if (!same || !held.done()) out.push_back(id);
  }
}

}  // namespace flowdsl::lowering
