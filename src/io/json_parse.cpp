// SPDX-License-Identifier: Apache-2.0
// Graph files: parsing within JsonLimits in one pass over the text (a SAX handler), in time and
// memory linear in its size. The top-level "nodes" are read one at a time: each node is built as
// a CompactJson from the parser's events, read into a NodeSpec (at "/nodes/i") and dropped, so
// that no DOM of a node, nor of the whole file, ever exists.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "flowdsl/json.hpp"
#include "json_expr.hpp"
#include "json_support.hpp"

namespace flowdsl {

using namespace json_detail;

namespace {

// Builds the DOM of the file but for the top-level nodes, which it reads one by one; stops at
// the first limit exceeded. Problems are kept in the order the old whole-file reader found
// them: malformed text or limits, then the node count, then the schema (top-level members
// before nodes), then the uses of named bodies and the size of the graph they expand to.
class GraphFileReader {
 public:
  GraphFileReader(const JsonLimits& limits, const JsonRanks& ranks) : limits_(limits), ranks_(ranks) {}

  // nlohmann's SAX interface (json::sax_parse); false stops the parse.
  bool null() {
    if (in_node()) return node_value("null", [&] { node_.null(); });
    return scalar(nullptr);
  }
  bool boolean(bool v) {
    if (in_node()) return node_value("a boolean", [&] { node_.boolean(v); });
    return scalar(v);
  }
  bool number_integer(json::number_integer_t v) {
    if (in_node()) return node_value("an integer", [&] { node_.integer(v); });
    return scalar(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (in_node()) return node_value("an integer", [&] { node_.unsigned_integer(v); });
    return scalar(v);
  }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) {
    if (in_node()) return node_value("a number with a fraction or exponent", [&] { node_.number(v); });
    return scalar(v);
  }
  bool string(json::string_t& v) {
    if (in_node()) return node_value("a string", [&] { node_.string(v); }, &v);
    return admit(v.size()) && (place(std::move(v)), true);
  }
  bool binary(json::binary_t& v) {  // never in JSON text
    if (in_node()) return node_value("an unsupported value", [&] { node_.null(); });
    return scalar(std::move(v));
  }
  bool key(json::string_t& k) {
    if (!admit(k.size(), true)) return false;
    if (in_node()) {
      Frame& f = frames_.back();
      if (f.members == 0) f.expr = k == "expr";
      node_.key(k);
      key_ = std::move(k);
      return true;
    }
    // A repeated "nodes" replaces the earlier one, as in a DOM.
    if (open_.size() == 1 && open_.back() == &root_ && k == "nodes") restart_nodes();
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t /*elements*/) { return in_node() ? node_open(true) : open(json::object()); }
  bool start_array(std::size_t /*elements*/) { return in_node() ? node_open(false) : open(json::array()); }
  bool end_object() { return in_node() && !frames_.empty() ? node_close() : close(); }
  bool end_array() { return in_node() && !frames_.empty() ? node_close() : close(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& /*token*/, const Exception& e) {
    syntax_ = Syntax{position, e.what(), std::is_same_v<Exception, json::parse_error>};
    return false;
  }

  /// The spec read, or the first problem found (as a JsonError naming `source`).
  GraphSpec finish(std::string_view text, const std::string& source) {
    if (!limit_.empty()) throw JsonError({{limit_pointer_, "input exceeds the reader's limits: " + limit_}}, source);
    if (syntax_) throw JsonError({{"", syntax_message(text)}}, source);
    if (expression_) throw JsonError({*expression_}, source);
    try {
      if (nodes_seen_ > limits_.max_nodes) {
        fail("/nodes", std::to_string(nodes_seen_) + " nodes exceed the limit of " + std::to_string(limits_.max_nodes));
      }
      if (root_.is_object()) {
        const auto buffers = root_.find("buffers");
        if (buffers != root_.end() && buffers->is_array() && buffers->size() > limits_.max_buffers) {
          fail("/buffers",
               std::to_string(buffers->size()) + " buffers exceed the limit of " + std::to_string(limits_.max_buffers));
        }
      }
      GraphSpec spec;
      read_graph(root_, spec);  // "nodes", if an array, holds none here
      if (node_error_) throw *node_error_;
      spec.nodes = take_nodes();
      std::vector<JsonProblem> problems = check_named_bodies(spec, &limits_);
      if (!problems.empty()) throw JsonError(std::move(problems));
      return spec;
    } catch (const JsonError& e) {
      throw JsonError(e.problems(), source);
    }
  }

 private:
  struct Syntax {
    std::size_t byte;   ///< nlohmann's position: one past the character at fault
    std::string what;
    bool positioned;    ///< a parse error (with a place); else a number beyond double's range
  };

  // A container open inside the node being read: where its value starts in the builder, what
  // it is, and whether it is an {"expr": text} object so far.
  struct Frame {
    CompactJson::Builder::Mark mark;
    bool object;
    std::string token;      ///< its JSON pointer token in its parent ("" for the node itself)
    std::size_t members = 0;
    bool expr = false;      ///< an object whose first key is "expr"
    std::string expr_type;  ///< the type of that member's value
    std::optional<std::string> expr_text;  ///< its text, when a string
  };

  // Inside the top-level "nodes" array: events build the node being read.
  bool in_node() const { return !open_.empty() && open_.back() == nullptr; }
  std::size_t depth() const { return open_.size() + frames_.size(); }

  // A value begins in the innermost container of the node: counted, and noted for an expression.
  void value_begins(const char* type, const std::string* text) {
    if (frames_.empty()) return;
    Frame& f = frames_.back();
    if (f.object && f.members == 0 && f.expr) {
      f.expr_type = type;
      if (text != nullptr) f.expr_text = *text;
    }
    ++f.members;
  }

  template <class Emit>
  bool node_value(const char* type, Emit&& emit, const std::string* text = nullptr) {
    if (!admit(text != nullptr ? text->size() : 0)) return false;
    value_begins(type, text);
    emit();
    if (node_.depth() == 0) read_node();
    return true;
  }

  bool node_open(bool object) {
    if (depth() > limits_.max_depth) return exceed("nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
    std::string tok;
    if (!frames_.empty()) tok = frames_.back().object ? token(key_) : token(frames_.back().members);
    value_begins(object ? "an object" : "an array", nullptr);
    Frame f{node_.mark(), object, std::move(tok), 0, false, {}, {}};
    if (object) {
      node_.start_object();
    } else {
      node_.start_array();
    }
    frames_.push_back(std::move(f));
    return true;
  }

  bool node_close() {
    Frame& f = frames_.back();
    std::optional<std::uint64_t> value;
    if (f.object && f.members == 1 && f.expr) value = evaluate(f);
    const CompactJson::Builder::Mark mark = f.mark;
    const bool object = f.object;
    frames_.pop_back();
    if (value) {
      // The object becomes its value, in place.
      node_.rewind(mark);
      node_.unsigned_integer(*value);
      if (!frames_.empty()) {
        Frame& parent = frames_.back();
        if (parent.object && parent.members == 1 && parent.expr) {
          parent.expr_type = "an integer";
          parent.expr_text.reset();
        }
      }
    } else if (object) {
      node_.end_object();
    } else {
      node_.end_array();
    }
    if (node_.depth() == 0) read_node();
    return true;
  }

  // Whether the format takes an expression at `pointer` (an {"expr": ...} object's): an integer
  // argument, or a count, a byte count, an offset or a seed; not a launch shape, a version or a
  // condition's default.
  static bool takes_expression(const std::string& pointer) {
    const std::size_t last = pointer.rfind('/');
    if (last == std::string::npos) return false;
    const std::string_view member = std::string_view(pointer).substr(last + 1);
    const std::size_t before = last == 0 ? std::string::npos : pointer.rfind('/', last - 1);
    const std::string_view parent =
        before == std::string::npos ? std::string_view() : std::string_view(pointer).substr(before + 1, last - before - 1);
    return parent == "args" || member == "count" || member == "bytes" || member == "offset" || member == "seed";
  }
  void refuse_expression(std::string pointer) {
    if (!expression_) {
      expression_ = JsonProblem{std::move(pointer), "an expression ({\"expr\": ...}) is not allowed here: it stands for "
                                                    "an integer argument, a count, bytes, an offset or a seed only"};
    }
  }

  // The value of an {"expr": text} object of a node; none after keeping the first failure.
  std::optional<std::uint64_t> evaluate(const Frame& f) {
    std::string problem;
    std::uint64_t value = 0;
    if (std::string here = pointer_of_innermost(); !takes_expression(here)) {
      refuse_expression(std::move(here));
      return std::nullopt;
    }
    if (!f.expr_text) {
      problem = "an expression is a string, found " + f.expr_type;
    } else if (evaluate_expression(*f.expr_text, ranks_.rank, ranks_.world, value, problem)) {
      return value;
    } else {
      problem = "cannot evaluate " + quoted_name(*f.expr_text) + " with rank " + std::to_string(ranks_.rank) + " and world " +
                std::to_string(ranks_.world) + ": " + problem;
    }
    if (!expression_) expression_ = JsonProblem{pointer_of_innermost(), std::move(problem)};
    return std::nullopt;
  }

  // Counts a key or scalar value and checks its depth and (for strings) its length; a string
  // too long is reported at its member (a key at the object holding it, its text not echoed).
  bool admit(std::size_t string_bytes = 0, bool is_key = false) {
    if (depth() > limits_.max_depth) return exceed("nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
    if (++values_ > limits_.max_values) return exceed("more than " + std::to_string(limits_.max_values) + " values");
    if (string_bytes > limits_.max_string) {
      return exceed(std::string(is_key ? "a member name" : "a string") + " of " + std::to_string(string_bytes) +
                        " bytes, over the limit of " + std::to_string(limits_.max_string),
                    is_key ? pointer_of_innermost() : pointer_of_next_value());
    }
    return true;
  }
  bool exceed(std::string what, std::string pointer = {}) {
    limit_ = std::move(what);
    limit_pointer_ = std::move(pointer);
    return false;
  }

  // The JSON pointer of the value about to be read: the innermost container's, then its key or
  // index there.
  std::string pointer_of_next_value() const {
    std::string pointer = pointer_of_innermost();
    if (in_node()) {
      if (!frames_.empty()) pointer += frames_.back().object ? token(key_) : token(frames_.back().members);
    } else if (!open_.empty()) {
      pointer += open_.back()->is_object() ? token(key_) : token(open_.back()->size());
    }
    return pointer;
  }

  bool scalar(json&& v) {
    if (!admit()) return false;
    place(std::move(v));
    return true;
  }

  // Stores a value where the parse stands; a node of the top-level array is read at once.
  json* place(json&& v) {
    json* at = nullptr;
    if (open_.empty()) {
      at = &root_;
    } else if (open_.back()->is_array()) {
      open_.back()->push_back(std::move(v));
      return &open_.back()->back();
    } else {
      at = &(*open_.back())[key_];
    }
    *at = std::move(v);
    return at;
  }

  bool open(json&& container) {
    if (depth() > limits_.max_depth) return exceed("nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
    if (open_.size() == 1 && open_.back() == &root_ && key_ == "nodes" && container.is_array()) {
      root_["nodes"] = json::array();  // read by from_json(GraphSpec) as no nodes; ours are in node_chunks_
      open_.push_back(nullptr);
      return true;
    }
    open_.push_back(place(std::move(container)));
    return true;
  }

  bool close() {
    json* closed = open_.back();
    if (closed != nullptr && closed->is_object() && closed->size() == 1 && closed->begin().key() == "expr") {
      evaluate(*closed);
    }
    open_.pop_back();
    return true;
  }

  // Replaces an {"expr": text} object by its value; the first that fails is kept, at its pointer.
  void evaluate(json& object) {
    const json& text = object.begin().value();
    std::string problem;
    std::uint64_t value = 0;
    if (std::string here = pointer_of_innermost(); !takes_expression(here)) {
      refuse_expression(std::move(here));
      return;
    }
    if (!text.is_string()) {
      problem = "an expression is a string, found " + type_of(text);
    } else if (evaluate_expression(text.get_ref<const std::string&>(), ranks_.rank, ranks_.world, value, problem)) {
      object = value;
      return;
    } else {
      problem = "cannot evaluate " + quoted_name(text.get_ref<const std::string&>()) + " with rank " + std::to_string(ranks_.rank) +
                " and world " + std::to_string(ranks_.world) + ": " + problem;
    }
    if (!expression_) expression_ = JsonProblem{pointer_of_innermost(), std::move(problem)};
  }

  // The JSON pointer of the innermost open container, found from the stack of open containers
  // (only when an expression fails: the parse keeps no path).
  std::string pointer_of_innermost() const {
    std::string pointer;
    for (std::size_t i = 0; i + 1 < open_.size(); ++i) {
      const json* parent = open_[i];
      const json* child = open_[i + 1];
      if (child == nullptr) continue;  // "/nodes" itself: added with its node
      if (parent->is_array()) {
        pointer += token(static_cast<std::size_t>(child - &(*parent)[0]));
      } else {
        for (auto it = parent->begin(); it != parent->end(); ++it) {
          if (&it.value() == child) {
            pointer += token(it.key());
            break;
          }
        }
      }
    }
    if (in_node()) {
      pointer += "/nodes" + token(nodes_seen_);
      for (const Frame& f : frames_) pointer += f.token;
    }
    return pointer;
  }

  void restart_nodes() {
    node_.clear();
    frames_.clear();
    node_chunks_.clear();
    nodes_seen_ = 0;
    node_error_.reset();
  }

  // Nodes are kept in chunks as they are read, then moved once into a vector of their number:
  // a vector grown by doubling would move each of a million nodes about twice more and keep up
  // to half of itself unused (or copy itself once more to shrink).
  void keep(NodeSpec&& spec) {
    if (node_chunks_.empty() || node_chunks_.back().size() == node_chunks_.back().capacity()) {
      node_chunks_.emplace_back().reserve(std::clamp<std::size_t>(nodes_seen_, 16, 4096));
    }
    node_chunks_.back().push_back(std::move(spec));
  }
  std::vector<NodeSpec> take_nodes() {
    std::size_t count = 0;
    for (const std::vector<NodeSpec>& chunk : node_chunks_) count += chunk.size();
    std::vector<NodeSpec> out;
    out.reserve(count);
    for (std::vector<NodeSpec>& chunk : node_chunks_) {
      std::move(chunk.begin(), chunk.end(), std::back_inserter(out));
      std::vector<NodeSpec>().swap(chunk);  // released as soon as it is moved
    }
    node_chunks_.clear();
    return out;
  }

  // Reads node_ into the kept nodes unless over the limit or after a problem (the count goes on).
  void read_node() {
    const std::size_t i = nodes_seen_++;
    if (i < limits_.max_nodes && !node_error_) {
      const CompactJson node = node_.finish();
      try {
        json_detail::read_node(node.root(), spec_, scratch_);
        keep(std::move(spec_));  // read_node resets it, moved from, for the next node
      } catch (const JsonError& e) {
        std::vector<JsonProblem> problems = e.problems();
        for (JsonProblem& p : problems) p.pointer = "/nodes" + token(i) + p.pointer;
        node_error_.emplace(std::move(problems));
      }
    }
    node_.clear();
  }

  // nlohmann gives the byte position; lines and columns are what a person looks for.
  std::string syntax_message(std::string_view text) const {
    std::string what = syntax_->what;
    if (!syntax_->positioned) {
      // A number beyond double's range: nlohmann reports it without a position.
      const std::size_t detail = what.find("] ");
      if (detail != std::string::npos) what = what.substr(detail + 2);
      return "malformed JSON: " + what;
    }
    const std::size_t end = std::min<std::size_t>(syntax_->byte, text.size());
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i + 1 < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    const std::size_t detail = what.find(": ");
    if (detail != std::string::npos) what = what.substr(detail + 2);
    return "malformed JSON at line " + std::to_string(line) + ", column " +
           std::to_string(end > line_start ? end - line_start : 1) + ": " + what;
  }

  const JsonLimits& limits_;
  const JsonRanks& ranks_;
  std::optional<JsonProblem> expression_;  ///< the first expression that failed
  std::size_t values_ = 0;
  std::string limit_;             ///< the limit exceeded, if any
  std::string limit_pointer_;     ///< where (a string too long), or "" for the whole input
  std::optional<Syntax> syntax_;  ///< malformed text, if so
  json root_;                     ///< the file, its top-level nodes left out
  std::vector<json*> open_;       ///< containers being read, innermost last; null: the top-level nodes
  std::string key_;               ///< the member being read
  CompactJson::Builder node_;     ///< the top-level node being read
  std::vector<Frame> frames_;     ///< its containers open, innermost last
  CompactJson::Builder scratch_;  ///< the fields of the node being read
  NodeSpec spec_;                 ///< the node being read, then kept (moved from)
  std::vector<std::vector<NodeSpec>> node_chunks_;  ///< the nodes read (see keep)
  std::size_t nodes_seen_ = 0;
  std::optional<JsonError> node_error_;  ///< the first node that failed to read (pointer from the top)
};

}  // namespace

GraphSpec parse_graph(std::string_view text, std::string source, const JsonLimits& limits, const JsonRanks& ranks) {
  if (text.size() > limits.max_bytes) {
    throw JsonError({{"", "the text is " + std::to_string(text.size()) + " bytes, over the limit of " +
                              std::to_string(limits.max_bytes)}},
                    source);
  }
  GraphFileReader reader(limits, ranks);
  (void)json::sax_parse(text.begin(), text.end(), &reader);
  return reader.finish(text, source);
}

GraphSpec read_graph_file(const std::string& path, const JsonLimits& limits, const JsonRanks& ranks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JsonError({{"", "cannot open the file"}}, path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw JsonError({{"", "cannot read the file"}}, path);
  if (static_cast<std::uint64_t>(size) > limits.max_bytes) {
    throw JsonError({{"", "the file is " + std::to_string(size) + " bytes, over the limit of " +
                              std::to_string(limits.max_bytes)}},
                    path);
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  in.read(text.data(), size);
  if (!in) throw JsonError({{"", "cannot read the file"}}, path);
  return parse_graph(text, path, limits, ranks);
}

}  // namespace flowdsl
