// SPDX-License-Identifier: Apache-2.0
// Binding a graph spec to buffers: buffers, dependencies and bodies are resolved here, each
// kind binds its own members (src/kinds/<kind>/json.cpp); every problem is collected at its JSON
// pointer, core validation included.
#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "flowdsl/hazards.hpp"
#include "flowdsl/json.hpp"
#include "json_facets.hpp"
#include "log_internal.hpp"
#include "name_index.hpp"

namespace flowdsl {
namespace {

using json_detail::token;

// Builds a Graph from a spec, collecting problems instead of stopping at the first.
class Binder final : public io::NodeBinder {
 public:
  /// `file_kernels`: the file's own kernels, while checking it without loading them (then events
  /// the externals lack get placeholders).
  Binder(const GraphSpec& spec, const BufferAddresses& addresses, const KernelRegistry& registry,
         const Externals& externals, const KernelRegistry* file_kernels = nullptr)
      : spec_(spec), addresses_(addresses), registry_(registry), file_kernels_(file_kernels), externals_(externals) {}

  Graph run(const std::string& source) {
    // A spec not read from a file may use bodies it lacks, or hold a body in itself.
    std::vector<JsonProblem> uses = json_detail::check_named_bodies(spec_, nullptr);
    if (!uses.empty()) throw JsonError(std::move(uses), source);
    index_buffers();
    index_allocs(spec_.nodes, "/nodes");
    for (const auto& [name, nodes] : spec_.bodies) index_allocs(nodes, "/bodies" + token(name), true);
    graph_.check_hazards(spec_.check_hazards);
    graph_.programmatic_edges(spec_.programmatic_edges);
    graph_.fuse(spec_.fuse);
    reserve();
    Body top(&graph_.state(), no_node, 0);
    add_nodes(spec_.nodes, top, "/nodes");
    if (problems_.empty() && spec_.infer_edges) {
      const EdgeInference made = infer_edges(graph_);
      detail::log().info("{}: inferred {} edges from the accesses, removed {} redundant ones{}", source,
                                made.added, made.removed, made.reduced ? "" : " (reduction skipped)");
    }
    if (problems_.empty()) validate();
    if (!problems_.empty()) {
      if (!spec_.bodies.empty()) drop_repeated_problems();
      throw JsonError(std::move(problems_), source);
    }
    return std::move(graph_);
  }

  // io::NodeBinder, for the node being bound.
  Body& builder() override { return *body_; }
  const std::string& pointer() const override { return pointer_; }
  std::uint32_t bodies() const override { return static_cast<std::uint32_t>(node_->bodies.size()); }
  void problem(const std::string& suffix, std::string message) override {
    problems_.push_back(JsonProblem{pointer_ + suffix, std::move(message)});
  }
  const BufferSpec* buffer(const BufferRef& ref, const std::string& suffix) override {
    const KnownBuffer* known = find_buffer(ref, suffix);
    return known != nullptr ? known->spec : nullptr;
  }
  bool names_alloc(const BufferRef& ref) const override { return allocs_.count(ref.buffer) != 0; }
  void* address(const BufferRef& ref, std::uint64_t bytes, std::uint64_t align, const std::string& suffix) override {
    if (const auto alloc = allocs_.find(ref.buffer); alloc != allocs_.end()) return alloc_address(alloc->second, ref, bytes, align, suffix);
    const KnownBuffer* known = find_buffer(ref, suffix);
    if (known == nullptr) return nullptr;
    const BufferSpec* b = known->spec;
    if (ref.offset > b->bytes() || bytes > b->bytes() - ref.offset) {
      problem(suffix, "out of range: " + std::to_string(bytes) + " bytes at offset " + std::to_string(ref.offset) +
                          " overrun buffer " + quoted_name(b->name) + " of " + std::to_string(b->bytes()) + " bytes");
      return nullptr;
    }
    if (align > 1 && ref.offset % align != 0) {
      problem(suffix, "offset " + std::to_string(ref.offset) + " into buffer " + quoted_name(b->name) +
                          " is not a multiple of " + std::to_string(align) + " bytes");
      return nullptr;
    }
    if (known->address == nullptr) return nullptr;  // reported by index_buffers
    return static_cast<unsigned char*>(known->address) + ref.offset;
  }
  const KernelInfo* find_kernel(std::string_view name) const override {
    const KernelInfo* info = registry_.find(name);
    return info != nullptr || file_kernels_ == nullptr ? info : file_kernels_->find(name);
  }
  std::optional<std::uint64_t> alloc_memory(const std::string& name, const std::string& suffix) override {
    if (const auto alloc = allocs_.find(name); alloc != allocs_.end()) return alloc->second.memory;
    problem(suffix, buffers_.count(name) != 0
                        ? quoted_name(name) + " is a buffer, not an alloc: a free releases an alloc node's memory"
                        : "unknown alloc " + quoted_name(name));
    return std::nullopt;
  }
  void declared_alloc(const std::string& name, NodeId id) override {
    const auto alloc = allocs_.find(name);
    if (alloc != allocs_.end() && alloc->second.pointer == pointer_) detail::bind_symbol(graph_.state(), alloc->second.memory, id);
  }
  CudaEvent event(const std::string& name, const std::string& suffix) override {
    if (const auto it = externals_.events.find(name); it != externals_.events.end()) return it->second;
    if (file_kernels_ != nullptr) {  // checking without a device: a placeholder, never used
      const auto [it, added] = placeholder_events_.emplace(name, nullptr);
      if (added) it->second = reinterpret_cast<CudaEvent>(std::uintptr_t{16} * placeholder_events_.size());
      return it->second;
    }
    std::string known;
    for (const auto& entry : externals_.events) known += (known.empty() ? "" : ", ") + entry.first;
    problem(suffix, "unknown event " + quoted_name(name) + " (known: " + (known.empty() ? "none" : known) + ")");
    return nullptr;
  }
  const GraphSpec& spec() const override { return spec_; }
  const HostFunctions& hosts() const override { return externals_.hosts; }

 private:
  // An alloc node of the file: its memory is referenced by the node's name, like a buffer.
  struct Alloc {
    std::uint64_t bytes;
    std::uint64_t memory;  ///< the symbol of its memory, reserved before the node is declared
    std::string pointer;   ///< the node's JSON pointer
  };

  // Every alloc of the file, inline bodies included, so that a node may name one declared after
  // it. A named body is declared again at each use, so it may hold no alloc (its name would
  // stand for several); `named` says the nodes are those of one.
  void index_allocs(const std::vector<NodeSpec>& nodes, const std::string& array, bool named = false) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const NodeSpec& node = nodes[i];
      const std::string at = array + token(i);
      std::vector<io::BodyMember> members;
      bool allocates = false;
      io::with_kind(node.kind, [&](auto tag) {
        members = io::json_bodies(tag);
        allocates = io::allocates_memory(tag);
      });
      for (std::uint32_t b = 0; b < node.bodies.size(); ++b) {
        const io::BodyPlace place = io::body_place(members, b);
        if (place.member == nullptr) break;
        if (node.bodies[b].use.empty()) index_allocs(node.bodies[b].nodes, at + place.pointer(), named);
      }
      if (!allocates) continue;
      if (named) {
        problems_.push_back({at + "/kind", "alloc " + quoted_name(node.name) +
                                               " sits in a named body: each use declares the body again, and an "
                                               "alloc's name must stand for one allocation; declare it inline"});
        continue;
      }
      // A spec made by a program rather than read may lack the size the reader requires.
      const std::optional<CompactJson::Ref> bytes = node.fields.root().find("bytes");
      if (!bytes || !bytes->is_number_unsigned()) {
        problems_.push_back({at + "/bytes", "expected the size of the alloc's memory in bytes"});
      } else if (buffers_.count(node.name) != 0) {
        problems_.push_back(
            {at + "/name", "alloc " + quoted_name(node.name) +
                               " has the name of a buffer: buffers and allocs are referenced by name alike"});
      } else if (const auto [it, added] = allocs_.try_emplace(node.name); added) {
        it->second = Alloc{bytes->get_unsigned(), detail::reserve_symbol(graph_.state()), at};
      } else {
        problems_.push_back(
            {at + "/name", "alloc " + quoted_name(node.name) + " is declared twice (also at " + it->second.pointer +
                               "): allocs are referenced by name, so their names are unique in a file"});
      }
    }
  }

  void* alloc_address(const Alloc& alloc, const BufferRef& ref, std::uint64_t bytes, std::uint64_t align,
                      const std::string& suffix) {
    if (ref.offset > alloc.bytes || bytes > alloc.bytes - ref.offset) {
      problem(suffix, "out of range: " + std::to_string(bytes) + " bytes at offset " + std::to_string(ref.offset) +
                          " overrun alloc " + quoted_name(ref.buffer) + " of " + std::to_string(alloc.bytes) +
                          " bytes");
      return nullptr;
    }
    if (align > 1 && ref.offset % align != 0) {
      problem(suffix, "offset " + std::to_string(ref.offset) + " into alloc " + quoted_name(ref.buffer) +
                          " is not a multiple of " + std::to_string(align) + " bytes");
      return nullptr;
    }
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(alloc.memory + ref.offset));
  }

  void index_buffers() {
    for (std::size_t i = 0; i < spec_.buffers.size(); ++i) {
      const BufferSpec& b = spec_.buffers[i];
      const auto [known, added] = buffers_.emplace(b.name, KnownBuffer{&b, nullptr});
      if (!added) {
        problems_.push_back(
            {"/buffers/" + std::to_string(i) + "/name", "buffer " + quoted_name(b.name) + " is declared twice"});
      } else if (const auto at = addresses_.find(b.name); at == addresses_.end()) {
        problems_.push_back(
            {"/buffers/" + std::to_string(i), "no device address was given for buffer " + quoted_name(b.name)});
      } else {
        known->second.address = at->second;
        // Named in the graph: validation checks every pointer into it against its end.
        try {
          if (b.output) {
            graph_.output(b.name, at->second, b.bytes());  // read after launches: fused kernels store it
          } else {
            graph_.buffer(b.name, at->second, b.bytes());
          }
        } catch (const UsageError& e) {
          problems_.push_back({"/buffers/" + std::to_string(i), std::string(e.what()).substr(9)});
        }
      }
    }
  }

  // Room for every node and edge of the spec, so that the graph's arrays never grow by copying.
  void reserve() {
    std::size_t nodes = 0, edges = 0;
    count(spec_.nodes, nodes, edges);
    detail::reserve(graph_.state(), nodes, edges);
  }
  void count(const std::vector<NodeSpec>& specs, std::size_t& nodes, std::size_t& edges) const {
    nodes += specs.size();
    for (const NodeSpec& node : specs) {
      edges += node.after.size();
      for (const BodySpec& body : node.bodies) count(nodes_of(body), nodes, edges);
    }
  }

  // A body's nodes: inline, or those of the named body it uses (each use binds a copy).
  const std::vector<NodeSpec>& nodes_of(const BodySpec& body) const {
    return body.use.empty() ? body.nodes : spec_.bodies.find(body.use)->second;
  }
  // The pointer of the array of a body's nodes: the node's member, or the named body's.
  static std::string array_of(const BodySpec& body, const std::string& member) {
    return body.use.empty() ? member : "/bodies" + token(body.use);
  }

  // A problem inside a named body is found once per use: each is reported once.
  void drop_repeated_problems() {
    std::unordered_set<std::string> seen;
    std::vector<JsonProblem> kept;
    for (JsonProblem& p : problems_) {
      if (seen.insert(p.pointer + '\n' + p.message).second) kept.push_back(std::move(p));
    }
    problems_ = std::move(kept);
  }

  // One array of nodes being bound (the top level or a body), for the names resolved from it.
  struct Frame {
    struct NameOf {
      const std::vector<NodeSpec>* nodes;
      std::string_view operator()(std::size_t i) const noexcept { return (*nodes)[i].name; }
    };
    explicit Frame(const std::vector<NodeSpec>& specs)
        : nodes(specs), by_name(specs.size(), NameOf{&specs}), handles(specs.size()) {}
    const std::vector<NodeSpec>& nodes;
    detail::NameIndex<NameOf> by_name;  ///< first node with each name
    std::vector<std::optional<NodeHandle>> handles;             ///< per node, once declared
    /// Per node not declared yet: what to do with its condition once it is.
    std::unordered_map<std::size_t, std::vector<std::function<void(Condition)>>> waiting;
  };

  // Declares `nodes` (the array at `array`) in `body`, then their bodies, then their edges.
  void add_nodes(const std::vector<NodeSpec>& nodes, Body& body, const std::string& array) {
    Frame frame(nodes);
    frames_.push_back(&frame);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const NodeSpec& node = nodes[i];
      body_ = &body;
      node_ = &node;
      pointer_ = array + token(i);
      std::vector<io::BodyMember> members;
      std::optional<NodeHandle>& handle = frame.handles[i];
      const bool known = io::with_kind(node.kind, [&](auto tag) {
        // Fields a program wrote (not read from a file) may lack a member or hold another type:
        // a problem of the node, as a file's would be.
        try {
          handle = io::bind_json(tag, node.name, node.fields.root(), *this);
        } catch (const JsonError& e) {
          for (const JsonProblem& p : e.problems()) problem(p.pointer, p.message);
        }
        members = io::json_bodies(tag);
      });
      if (!known)
        problem("/kind", "unknown node kind " + quoted_name(node.kind) + " (expected " + io::kind_names() + ")");
      if (!handle) continue;
      if (const auto waiting = frame.waiting.find(i); waiting != frame.waiting.end()) {
        for (const auto& set : waiting->second) set(detail::condition_of(graph_.state(), handle->id()));
        frame.waiting.erase(waiting);
      }
      add_accesses(node, *handle);
      const std::string at = pointer_;
      for (std::uint32_t b = 0; b < node.bodies.size(); ++b) {
        const io::BodyPlace place = io::body_place(members, b);
        if (place.member == nullptr) break;
        Body inner = handle->body(b);
        add_nodes(nodes_of(node.bodies[b]), inner, array_of(node.bodies[b], at + place.pointer()));
      }
    }
    frames_.pop_back();
    add_edges(frame, array);
  }

  bool condition(const std::string& name, const std::string& suffix, std::function<void(Condition)> set) override {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      Frame& frame = **it;
      const std::optional<std::uint32_t> found = frame.by_name.find(name);
      if (!found) continue;
      const NodeSpec& target = frame.nodes[*found];
      bool conditional = false;
      io::with_kind(target.kind, [&](auto tag) { conditional = io::holds_condition(tag); });
      if (!conditional) {
        problem(suffix, "node " + quoted_name(name) + " (" + target.kind +
                            ") is not a conditional node (if, while or switch): it has no condition to set");
        return false;
      }
      if (const auto& handle = frame.handles[*found]) {
        set(detail::condition_of(graph_.state(), handle->id()));
      } else {
        frame.waiting[*found].push_back(std::move(set));
      }
      return true;
    }
    problem(suffix, "no node named " + quoted_name(name) +
                        " in this kernel's body or a body holding it (a kernel sets the condition of a conditional "
                        "node of its own body or of a body holding it)");
    return false;
  }

  void add_accesses(const NodeSpec& node, NodeHandle& handle) {
    for (std::size_t j = 0; j < node.reads.size(); ++j) {
      const AccessSpec& a = node.reads[j];
      if (void* ptr = address(a.at, a.bytes, 1, "/reads/" + std::to_string(j))) handle.reads(ptr, a.bytes);
    }
    for (std::size_t j = 0; j < node.writes.size(); ++j) {
      const AccessSpec& a = node.writes[j];
      if (void* ptr = address(a.at, a.bytes, 1, "/writes/" + std::to_string(j))) handle.writes(ptr, a.bytes);
    }
  }

  void add_edges(const Frame& frame, const std::string& array) {
    const std::vector<NodeSpec>& nodes = frame.nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const NodeSpec& node = nodes[i];
      const std::optional<NodeHandle>& handle = frame.handles[i];
      for (std::size_t j = 0; j < node.after.size(); ++j) {
        const std::optional<std::uint32_t> found = frame.by_name.find(node.after[j]);
        if (!found) {
          problems_.push_back(
              {array + token(i) + "/after" + token(j), "dependency on unknown node " + quoted_name(node.after[j])});
          continue;
        }
        if (!handle) continue;
        // By handle when the first node of that name was declared: the node a name resolves
        // to, without a lookup in the builder's index of names.
        const bool programmatic = std::binary_search(node.programmatic.begin(), node.programmatic.end(),
                                                     static_cast<std::uint32_t>(j));
        const auto& before = frame.handles[*found];
        if (programmatic && before) {
          NodeHandle(*handle).after(*before, flowdsl::programmatic);
        } else if (programmatic) {
          NodeHandle(*handle).after(node.after[j], flowdsl::programmatic);
        } else if (before) {
          NodeHandle(*handle).after(*before);
        } else {
          NodeHandle(*handle).after(node.after[j]);
        }
      }
    }
  }

  // Core validation, each diagnostic mapped to the node it names.
  void validate() {
    try {
      (void)graph_.plan();
    } catch (const ValidationError& e) {
      const std::unordered_map<std::string, NodePlace> places = node_pointers();
      for (const Diagnostic& d : e.diagnostics()) {
        const auto it = d.nodes.empty() ? places.end() : places.find(d.nodes.front());
        std::string pointer = it == places.end() ? std::string() : it->second.pointer;
        if (!pointer.empty() && !d.member.empty()) pointer += "/" + d.member;
        if (it != places.end() && d.member == "after" && d.nodes.size() == 2) {
          const std::string& from = d.nodes[1];
          const std::string name = from.substr(from.rfind('/') + 1);  // npos + 1: the whole path
          const std::vector<std::string>& after = it->second.spec->after;
          const auto entry = std::find(after.begin(), after.end(), name);
          if (entry != after.end()) pointer += token(static_cast<std::size_t>(entry - after.begin()));
        }
        problems_.push_back({std::move(pointer), d.message});
      }
    }
  }

  // Node path -> JSON pointer of the first node with that path. Built only when validation
  // fails: then every node was bound, in the order add_nodes visits the spec.
  // A problem with an edge (member "after", the predecessor second) points at the entry of
  // `after` that declares it.
  struct NodePlace {
    std::string pointer;
    const NodeSpec* spec;
  };
  std::unordered_map<std::string, NodePlace> node_pointers() const {
    std::unordered_map<std::string, NodePlace> out;
    const auto visit = [&](const auto& self, const std::vector<NodeSpec>& nodes, const std::string& array,
                           const std::string& path) -> void {
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const NodeSpec& node = nodes[i];
        const std::string pointer = array + token(i);
        const std::string node_path = path.empty() ? node.name : path + "/" + node.name;
        out.emplace(node_path, NodePlace{pointer, &node});
        std::vector<io::BodyMember> members;
        io::with_kind(node.kind, [&](auto tag) { members = io::json_bodies(tag); });
        for (std::uint32_t b = 0; b < node.bodies.size(); ++b) {
          const io::BodyPlace place = io::body_place(members, b);
          if (place.member == nullptr) break;
          self(self, nodes_of(node.bodies[b]), array_of(node.bodies[b], pointer + place.pointer()), node_path);
        }
      }
    };
    visit(visit, spec_.nodes, "/nodes", "");
    return out;
  }

  const GraphSpec& spec_;
  const BufferAddresses& addresses_;
  const KernelRegistry& registry_;
  const KernelRegistry* file_kernels_;
  const Externals& externals_;
  std::vector<JsonProblem> problems_;
  // A buffer of the file and its device address (null: none was given, a problem reported).
  struct KnownBuffer {
    const BufferSpec* spec;
    void* address;
  };
  const KnownBuffer* find_buffer(const BufferRef& ref, const std::string& suffix) {
    const auto it = buffers_.find(ref.buffer);
    if (it == buffers_.end()) {
      problem(suffix, "unknown buffer " + quoted_name(ref.buffer));
      return nullptr;
    }
    return &it->second;
  }

  std::unordered_map<std::string_view, KnownBuffer> buffers_;
  std::map<std::string, Alloc, std::less<>> allocs_;
  std::map<std::string, CudaEvent, std::less<>> placeholder_events_;
  Body* body_ = nullptr;  ///< where the node being bound is declared
  const NodeSpec* node_ = nullptr;  ///< the node being bound
  std::vector<Frame*> frames_;      ///< the arrays of nodes being bound, innermost last
  std::string pointer_;   ///< the node being bound
  Graph graph_;
};

// The function of kernels declared in kernel_files while checking without loading them.
const unsigned char placeholder_kernel = 0;

}  // namespace

void check_buffer_memory(const BufferSpec& b, std::optional<ScalarType> type, std::uint64_t bytes,
                         std::string_view what, std::string_view source) {
  const std::string where = "flowdsl: " + (source.empty() ? std::string() : std::string(source) + ": ") + "buffer " +
                            quoted_name(b.name);
  if (type && *type != b.type) {
    throw UsageError(where + " holds " + std::string(to_string(b.type)) + " elements, got " + std::string(what));
  }
  // b.count * size_of(b.type) without wrapping: counts are bounded by the reader, but not by this call.
  if (bytes != 0 && b.count > bytes / size_of(b.type)) {
    throw UsageError(where + " holds " + std::to_string(b.count) + " " + std::string(to_string(b.type)) +
                     " elements, got " + std::string(what));
  }
}

Graph bind_graph(const GraphSpec& spec, const BufferAddresses& addresses, const KernelRegistry& registry,
                 const Externals& externals, const std::string& source) {
  return Binder(spec, addresses, registry, externals).run(source);
}

Graph inspect_graph(const GraphSpec& spec, const KernelRegistry& registry, const Externals& externals,
                    const std::string& source) {
  // Placeholder addresses: disjoint, non-null, never dereferenced (nothing is launched).
  BufferAddresses addresses;
  std::uintptr_t next = 1u << 16;
  for (const BufferSpec& b : spec.buffers) {
    addresses.emplace(b.name, reinterpret_cast<void*>(next));
    next += (b.bytes() + 255) / 256 * 256;
  }
  std::vector<JsonProblem> problems;
  KernelRegistry scratch;  // the file's kernels, unloaded: checked by their declared parameters
  for (std::size_t i = 0; i < spec.kernel_files.size(); ++i) {
    const KernelFileSpec& f = spec.kernel_files[i];
    if (registry.find(f.name) != nullptr) {
      problems.push_back(
          {"/kernel_files/" + std::to_string(i) + "/name", "kernel " + quoted_name(f.name) + " is already registered"});
      continue;
    }
    try {
      scratch.add(KernelInfo{f.name, &placeholder_kernel, f.params, {}, {}, false, {}, nullptr, {}, {}, nullptr});
    } catch (const UsageError& e) {
      problems.push_back({"/kernel_files/" + std::to_string(i), e.what()});
    }
  }
  try {
    Graph graph = Binder(spec, addresses, registry, externals, &scratch).run(source);
    if (problems.empty()) {
      // Nodes of the file's kernels must not point into `scratch`, which ends here.
      for (NodeId id = 0; id < graph.size(); ++id) {
        const LaunchFields* op = launch_fields(graph.description().nodes[id].op);
        if (op != nullptr && op->info != nullptr && scratch.find(op->info->name) == op->info) {
          launch_fields(detail::structure_of(graph.state(), id))->info = nullptr;
        }
      }
      return graph;
    }
  } catch (const JsonError& e) {
    problems.insert(problems.end(), e.problems().begin(), e.problems().end());
  }
  throw JsonError(std::move(problems), source);
}

void check_graph(const GraphSpec& spec, const KernelRegistry& registry, const Externals& externals,
                 const std::string& source) {
  (void)inspect_graph(spec, registry, externals, source);
}

}  // namespace flowdsl
