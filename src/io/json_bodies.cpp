// SPDX-License-Identifier: Apache-2.0
// Graph files' named bodies: each use names a declared body, no body uses itself, and the graph
// the uses expand to stays within the reader's limits on nodes and nesting however they
// multiply. Each named body is measured once, so the check is linear in the file.
#include <algorithm>
#include <limits>
#include <map>
#include <string_view>

#include "flowdsl/json.hpp"
#include "json_facets.hpp"

namespace flowdsl::json_detail {
namespace {

// A body once every use in it is written out: its nodes, and how many levels of arrays and
// objects it nests (its own array is one).
struct Size {
  std::uint64_t nodes = 0;  ///< saturates at the largest value
  std::size_t levels = 0;
};

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  return a > max - b ? max : a + b;
}

std::vector<io::BodyMember> members_of(std::string_view kind) {
  std::vector<io::BodyMember> members;
  io::with_kind(kind, [&](auto tag) { members = io::json_bodies(tag); });
  return members;
}

class NamedBodies {
 public:
  explicit NamedBodies(const GraphSpec& spec) : spec_(spec) {
    for (const auto& [name, nodes] : spec.bodies) {
      index_.emplace(name, named_.size());
      named_.push_back(Named{&name, &nodes, {}, {}});
    }
  }

  std::vector<JsonProblem> check(const JsonLimits* limits) {
    for (Named& n : named_) collect(*n.nodes, "/bodies" + token(*n.name), n.uses);
    std::vector<Use> top;
    collect(spec_.nodes, "/nodes", top);
    std::vector<std::size_t> order;
    if (!problems_.empty() || !ordered(order) || limits == nullptr) return std::move(problems_);
    for (std::size_t i : order) named_[i].size = measure(*named_[i].nodes);
    const Size graph = measure(spec_.nodes);
    if (graph.nodes > limits->max_nodes) {
      const bool saturated = graph.nodes == std::numeric_limits<std::uint64_t>::max();
      problems_.push_back({"/nodes", (saturated ? std::string("over 2^64") : std::to_string(graph.nodes)) +
                                         " nodes, counting those of every body and each named body at each of its "
                                         "uses, exceed the limit of " + std::to_string(limits->max_nodes)});
    }
    if (1 + graph.levels > limits->max_depth) {  // 1: the file's object
      problems_.push_back({"/nodes", "with each named body written out at its uses, the nodes nest " +
                                         std::to_string(1 + graph.levels) + " levels deep, over the limit of " +
                                         std::to_string(limits->max_depth)});
    }
    return std::move(problems_);
  }

 private:
  struct Use {
    std::size_t body;     ///< the named body used
    std::string pointer;  ///< where: "/nodes/3/body/use"
  };
  struct Named {
    const std::string* name;
    const std::vector<NodeSpec>* nodes;
    std::vector<Use> uses;  ///< in the body, at any depth of its inline bodies
    Size size;
  };

  // Appends the uses in `nodes` (the array at `array`) and its inline bodies; reports the
  // names no body has.
  void collect(const std::vector<NodeSpec>& nodes, const std::string& array, std::vector<Use>& uses) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const NodeSpec& node = nodes[i];
      if (node.bodies.empty()) continue;
      const std::vector<io::BodyMember> members = members_of(node.kind);
      for (std::uint32_t b = 0; b < node.bodies.size(); ++b) {
        const io::BodyPlace place = io::body_place(members, b);
        if (place.member == nullptr) break;
        const BodySpec& body = node.bodies[b];
        const std::string at = array + token(i) + place.pointer();
        if (body.use.empty()) {
          collect(body.nodes, at, uses);
        } else if (const auto it = index_.find(body.use); it != index_.end()) {
          uses.push_back({it->second, at + "/use"});
        } else {
          problems_.push_back(
              {at + "/use", "unknown body " + quoted_name(body.use) + " (not declared under \"bodies\")"});
        }
      }
    }
  }

  // Orders the named bodies so that each comes after those it uses (a depth-first walk with a
  // stack of its own: a chain of uses may be long). False, after reporting it, at a body that
  // uses itself.
  bool ordered(std::vector<std::size_t>& order) {
    enum : std::uint8_t { unseen, open, done };
    std::vector<std::uint8_t> state(named_.size(), unseen);
    std::vector<std::pair<std::size_t, std::size_t>> stack;  // (body, its next use to follow)
    for (std::size_t root = 0; root < named_.size(); ++root) {
      if (state[root] != unseen) continue;
      state[root] = open;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        const std::size_t body = stack.back().first;
        if (stack.back().second == named_[body].uses.size()) {
          state[body] = done;
          order.push_back(body);
          stack.pop_back();
          continue;
        }
        const Use& use = named_[body].uses[stack.back().second++];
        if (state[use.body] == done) continue;
        if (state[use.body] == open) {
          report_cycle(stack, use);
          return false;
        }
        state[use.body] = open;
        stack.push_back({use.body, 0});
      }
    }
    return true;
  }

  void report_cycle(const std::vector<std::pair<std::size_t, std::size_t>>& stack, const Use& use) {
    auto from = stack.begin();
    while (from->first != use.body) ++from;
    std::string path;
    for (auto it = from; it != stack.end(); ++it) path += quoted_name(*named_[it->first].name) + " -> ";
    path += quoted_name(*named_[use.body].name);
    problems_.push_back({use.pointer, "body " + quoted_name(*named_[use.body].name) + " uses itself: " + path +
                                          " (a body cannot hold a copy of itself)"});
  }

  // The size of `nodes` with each use written out (the named bodies it uses are measured).
  Size measure(const std::vector<NodeSpec>& nodes) const {
    Size out{nodes.size(), 1};
    for (const NodeSpec& node : nodes) {
      std::size_t levels = 1;  // the node's object
      if (!node.bodies.empty()) {
        const std::vector<io::BodyMember> members = members_of(node.kind);
        for (std::uint32_t b = 0; b < node.bodies.size(); ++b) {
          const io::BodyPlace place = io::body_place(members, b);
          if (place.member == nullptr) break;
          const BodySpec& body = node.bodies[b];
          const Size inner = body.use.empty() ? measure(body.nodes) : named_[index_.at(body.use)].size;
          out.nodes = saturating_add(out.nodes, inner.nodes);
          levels = std::max(levels, 1 + inner.levels + (place.member->many ? 1 : 0));
        }
      }
      out.levels = std::max(out.levels, 1 + levels);
    }
    return out;
  }

  const GraphSpec& spec_;
  std::vector<Named> named_;                         ///< in the order of spec_.bodies
  std::map<std::string_view, std::size_t, std::less<>> index_;  ///< name -> index in named_
  std::vector<JsonProblem> problems_;
};

}  // namespace

std::vector<JsonProblem> check_named_bodies(const GraphSpec& spec, const JsonLimits* limits) {
  return NamedBodies(spec).check(limits);
}

}  // namespace flowdsl::json_detail
