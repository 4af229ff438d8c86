// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file json.hpp
/// \brief Graph files in JSON: a pointer-free *graph spec* that binds to device buffers and
/// yields the same description the C++ builder makes.
///
/// \code
///   flowdsl::GraphSpec spec = flowdsl::read_graph_file("diamond.json");   // syntax and schema
///   flowdsl::check_graph(spec, flowdsl::KernelRegistry::global());              // everything, no GPU
///   flowdsl::BufferAddresses at = allocate(spec.buffers);                 // name -> device pointer
///   flowdsl::Graph g = flowdsl::bind_graph(spec, at, flowdsl::KernelRegistry::global());
/// \endcode
///
/// Every error is a JsonError whose problems name a JSON pointer ("/nodes/3/args/alpha").
/// The format is documented in docs/json-format.md; docs/flowdsl.schema.json is its schema.

#include <cstddef>
#include <optional>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "flowdsl/compact_json.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

/// \brief The format version this library reads and writes.
inline constexpr int json_format_version = 1;

/// \brief Largest buffer a graph file may declare, in bytes (1 TiB).
inline constexpr std::uint64_t json_max_buffer_bytes = std::uint64_t{1} << 40;

/// \brief Bounds on what a reader accepts, so that hostile input cannot exhaust memory or time.
struct JsonLimits {
  std::size_t max_bytes = std::size_t{256} << 20;       ///< size of the text
  std::size_t max_depth = 32;                           ///< nesting of arrays and objects
  std::size_t max_values = std::size_t{32} << 20;       ///< values of any kind in the text
  std::size_t max_string = 4096;                        ///< bytes of one string (names, paths)
  std::size_t max_nodes = 1'000'000;
  std::size_t max_buffers = 100'000;
};

/// \brief Where the process reading a graph file stands in a job of several processes: the
/// values of `rank` and `world` in the file's integer expressions (`{"expr": "4096 / world"}`,
/// allowed wherever the file takes an integer). `flowdsl run` takes them from the launcher.
struct JsonRanks {
  std::uint64_t rank = 0;
  std::uint64_t world = 1;
};

/// \brief Initial contents of a buffer.
struct BufferInit {
  enum class Kind : std::uint8_t { zeros, constant, uniform, normal, npy, safetensors };
  Kind kind = Kind::zeros;
  double value = 0;                 ///< constant
  double low = 0, high = 1;         ///< uniform on [low, high)
  double mean = 0, stddev = 1;      ///< normal
  std::uint64_t seed = 0;           ///< uniform, normal
  std::string file;                 ///< npy, safetensors: path, relative to the graph file
  /// safetensors: the names of the tensors in the file whose contents fill the buffer one after
  /// another (one in most files: `"tensor"`; several, `"tensors"`, to fuse weights such as a
  /// layer's q, k and v projections into one matrix).
  std::vector<std::string> tensors;
};

/// \brief A named device buffer of `count` elements of `type`.
struct BufferSpec {
  std::string name;
  ScalarType type = ScalarType::f32;
  std::uint64_t count = 0;
  BufferInit init;
  bool output = false;  ///< written out by `flowdsl run --out`
  std::uint64_t bytes() const noexcept { return count * size_of(type); }
};

/// \brief A byte offset into a named buffer, or into the memory of an alloc node (named by the
/// node's name): how pointers are written.
struct BufferRef {
  std::string buffer;
  std::uint64_t offset = 0;
};

/// \brief A declared access: `bytes` bytes at a buffer offset (0: extent unknown).
struct AccessSpec {
  BufferRef at;
  std::uint64_t bytes = 0;
};

struct NodeSpec;

/// \brief One body of a node in a graph file (a child graph's "nodes", an IF's "then", one of
/// a SWITCH's "cases"): its nodes written inline, or the name of a body the file declares once
/// under "bodies" (written `{"use": "encoder"}`), of which each use is a copy.
struct BodySpec {
  std::vector<NodeSpec> nodes;  ///< inline; empty when `use` names a body
  std::string use;              ///< the named body used, or empty
};

/// \brief One node of a graph file: what every node has, its kind's own members as read
/// (checked against the kind's schema; binding checks the rest) and its bodies.
struct NodeSpec {
  std::string name;
  std::string kind;                 ///< "kernel", "memcpy", ... (flowdsl/kinds.hpp)
  /// The kind's own members, e.g. {"dst": ..., "bytes": 64}, kept compactly (a file may hold a
  /// million nodes): `fields.root().find("bytes")`, or `fields.to_json()` for a DOM.
  CompactJson fields = CompactJson::object();
  /// The node's bodies in the kind's order: a child's "nodes"; an IF's "then", then its "else"
  /// if it has one; a WHILE's "body"; each of a SWITCH's "cases".
  std::vector<BodySpec> bodies;
  std::vector<std::string> after;   ///< names of the nodes (of the same body) this one runs after
  /// Indices into `after` of the programmatic edges (`{"node": "k1", "programmatic": true}`),
  /// ascending; the others are full.
  std::vector<std::uint32_t> programmatic;
  std::vector<AccessSpec> reads, writes;
};

/// \brief A kernel loaded at run time from a cubin, fatbin or PTX file, with its parameters
/// declared in the file (a compiled kernel does not carry them).
struct KernelFileSpec {
  std::string name;    ///< registry name the nodes use
  std::string file;    ///< path, relative to the graph file
  std::string symbol;  ///< the kernel's symbol in the file (extern "C" name or mangled)
  std::vector<KernelParam> params;
};

/// \brief A whole graph file: pointer-free, so it can be checked without a GPU.
struct GraphSpec {
  std::string name;
  int version = json_format_version;
  std::vector<KernelFileSpec> kernel_files;
  std::vector<BufferSpec> buffers;
  std::vector<NodeSpec> nodes;
  /// Bodies declared once by name, for nodes to use (BodySpec::use); each use is a copy.
  std::map<std::string, std::vector<NodeSpec>, std::less<>> bodies;
  bool check_hazards = true;  ///< validation reports hazards (Graph::check_hazards)
  bool infer_edges = false;   ///< binding adds the edges the accesses imply (flowdsl::infer_edges)
  /// Edges between built-in kernels are programmatic (Graph::programmatic_edges).
  bool programmatic_edges = false;
  /// Runs of element-wise kernels run as one generated kernel each (Graph::fuse).
  bool fuse = false;
  /// Items (requests, samples, images) one launch processes, for throughput in items/s
  /// (`flowdsl bench`); 0: not declared. Not part of the graph.
  std::uint64_t items_per_launch = 0;
};

/// \brief Host functions known by name, for host nodes (a file cannot carry code).
struct HostFunction {
  void (*fn)(void*) = nullptr;
  void* user_data = nullptr;
};
using HostFunctions = std::map<std::string, HostFunction, std::less<>>;

/// \brief Events known by name, for event record and wait nodes (a file cannot carry an event).
using Events = std::map<std::string, CudaEvent, std::less<>>;

/// \brief What a graph file names but cannot carry, supplied by the program: host functions
/// (host nodes' "function") and events (event nodes' "event"). Converts from HostFunctions, for
/// files without event nodes.
struct Externals {
  HostFunctions hosts;
  Events events;

  Externals() = default;
  Externals(HostFunctions hosts_, Events events_ = {}) : hosts(std::move(hosts_)), events(std::move(events_)) {}
};

/// \brief The names of the events the event nodes of `spec` name (bodies included), sorted, each
/// once: what Externals::events must hold to bind it.
std::vector<std::string> event_names(const GraphSpec& spec);

/// \brief Device address of each buffer, by buffer name.
using BufferAddresses = std::map<std::string, void*, std::less<>>;

/// \brief Checks memory given for buffer `b` of a graph file before binding it: it holds the
/// buffer's element type, where that is known, and at least its bytes, where those are known.
/// \param type the element type of the memory (a tensor's dtype), or none (an address)
/// \param bytes the size of the memory, 0 when unknown
/// \param what the memory as messages name it ("a float32 tensor of 4096 elements")
/// \param source the file name, for messages (may be empty)
/// \throws UsageError naming the file, the buffer and the memory.
void check_buffer_memory(const BufferSpec& b, std::optional<ScalarType> type, std::uint64_t bytes,
                         std::string_view what, std::string_view source = {});

/// \brief Parses "f32", "const f32*", "bf16*".
/// \return false when `text` names no parameter type.
bool parse_param_type(std::string_view text, ParamType& out);

/// \brief Parses a graph file's text and reads its schema (no registry, no GPU).
/// \param source the file name, for messages (may be empty)
/// \throws JsonError for malformed JSON (with line and column), limits exceeded (the node limit
///         counts every node of every body, a named body once per use), a missing or mistyped
///         member, an unknown member or kind, an unsupported version, a use of an undeclared
///         body, a named body that uses itself, an expression that cannot be evaluated with `ranks`
///         (`{"expr": ...}` objects are replaced by their values as the text is read).
GraphSpec parse_graph(std::string_view text, std::string source = {}, const JsonLimits& limits = {},
                      const JsonRanks& ranks = {});

/// \brief Reads and parses a graph file.
/// \throws JsonError as parse_graph, or when the file cannot be read or exceeds max_bytes.
GraphSpec read_graph_file(const std::string& path, const JsonLimits& limits = {}, const JsonRanks& ranks = {});

/// \brief Checks everything binding would check, without device memory: kernels (registered
/// or declared in kernel_files), arguments (unknown, missing, wrong type, out of range),
/// buffers, allocs and their bounds, host functions, dependencies, and core validation. Events
/// the externals do not hold are not reported: making one needs a device, so placeholders stand
/// for them (bind_graph reports them).
/// \param source the file name, for messages (may be empty)
/// \throws JsonError listing every problem, each at its JSON pointer.
void check_graph(const GraphSpec& spec, const KernelRegistry& registry, const Externals& externals = {},
           const std::string& source = {});

/// \brief The graph check_graph builds: bound to placeholder addresses (disjoint, never
/// dereferenced) with kernels of kernel_files standing for themselves, and placeholder events
/// for those the externals do not hold. For dumps and inspection only: it must never be launched.
/// \throws JsonError as check_graph.
Graph inspect_graph(const GraphSpec& spec, const KernelRegistry& registry, const Externals& externals = {},
                    const std::string& source = {});

/// \brief Builds the graph of `spec` on the given buffers. The kernels of kernel_files must
/// already be in `registry` (see load_kernel_files). The graph is validated (its plan is built).
/// \param addresses a device address for every buffer of the spec
/// \param externals every host function and event the file names
/// \throws JsonError listing every problem, each at its JSON pointer; no graph is returned.
Graph bind_graph(const GraphSpec& spec, const BufferAddresses& addresses, const KernelRegistry& registry,
           const Externals& externals = {}, const std::string& source = {});

/// \brief The JSON Schema of graph files (docs/flowdsl.schema.json is this, written out), with
/// one entry per node kind.
nlohmann::json graph_file_schema();

/// \brief Writes a C++-built graph as a spec. Every pointer must lie in one of `buffers`
/// (located through `addresses`) or in an alloc's memory (named by the alloc node, whose name
/// must then be unique among allocs and buffers); kernels are named by the registry entry with
/// the node's function (else by the node's kernel_name); host functions by the entry of
/// `externals.hosts` with the node's function and user data; events by the entry of
/// `externals.events` with the node's event.
/// \throws JsonError naming the node ("/nodes/i") when a pointer, kernel, host function or event
///         has no name, or an argument does not fit the registered parameters.
GraphSpec describe_graph(const Graph& graph, std::string name, std::vector<BufferSpec> buffers,
                   const BufferAddresses& addresses, const KernelRegistry& registry, const Externals& externals = {});

/// \brief The spec as indented JSON text (what read_graph_file reads back).
std::string to_json_text(const GraphSpec& spec);

// ADL serialisers, beside the types (nlohmann/json finds them). from_json throws JsonError
// whose pointer is relative to the value read.
void to_json(nlohmann::json& j, const BufferInit& v);
void from_json(const nlohmann::json& j, BufferInit& v);
void to_json(nlohmann::json& j, const BufferSpec& v);
void from_json(const nlohmann::json& j, BufferSpec& v);
void to_json(nlohmann::json& j, const BufferRef& v);
void from_json(const nlohmann::json& j, BufferRef& v);
void to_json(nlohmann::json& j, const AccessSpec& v);
void from_json(const nlohmann::json& j, AccessSpec& v);
void to_json(nlohmann::json& j, const BodySpec& v);
void from_json(const nlohmann::json& j, BodySpec& v);
void to_json(nlohmann::json& j, const NodeSpec& v);
void from_json(const nlohmann::json& j, NodeSpec& v);
void to_json(nlohmann::json& j, const KernelFileSpec& v);
void from_json(const nlohmann::json& j, KernelFileSpec& v);
void to_json(nlohmann::json& j, const GraphSpec& v);
/// Checks what parse_graph checks, within the default JsonLimits.
void from_json(const nlohmann::json& j, GraphSpec& v);

}  // namespace flowdsl
