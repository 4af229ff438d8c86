// SPDX-License-Identifier: Apache-2.0
// Event nodes (record, wait): the event is a parameter, checked, kept out of conditional bodies,
// named in graph files and supplied by the program, drawn in DOT.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "graphviz.hpp"
#include "flowdsl/flowdsl.hpp"
#include "recording_backend.hpp"

using flowdsl_test::contains;

using flowdsl_test::require_dot_accepts;

namespace {

void scale(float*, float, int) {}
float x[64];

// Stand-ins for cudaEvent_t values: the recording backend never hands them to CUDA.
flowdsl::CudaEvent fake_event(std::uintptr_t at) { return reinterpret_cast<flowdsl::CudaEvent>(at); }

std::vector<std::string> messages(const flowdsl::Graph& g) {
  std::vector<std::string> out;
  for (const auto& d : flowdsl::validate(g.description())) out.push_back(d.message);
  return out;
}

/// write -> ready (record); go (wait) -> read.
struct Signals {
  Signals() {
    auto write = g.kernel("write", scale).launch(1, 64).args(x, 2.0f, 64);
    record = g.record_event("ready", fake_event(0x1000)).after(write);
    wait = g.wait_event("go", fake_event(0x2000)).after(record);
    g.kernel("read", scale).launch(1, 64).args(x, 0.5f, 64).after(wait);
  }
  flowdsl::Graph g;
  flowdsl::EventRecordNode record{nullptr, 0};
  flowdsl::EventWaitNode wait{nullptr, 0};
};


const std::string event_file = R"({"version": 1, "name": "t", "buffers": [],
  "nodes": [{"name": "go", "kind": "event_wait", "event": "ready"},
            {"name": "join", "kind": "empty", "after": ["go"]},
            {"name": "done", "kind": "event_record", "event": "finished", "after": ["join"]}]})";

}  // namespace

TEST_CASE("An event is a parameter: another one updates the node in place", "[event][runtime]") {
  Signals a, b;
  CHECK(a.g.topology_hash() == b.g.topology_hash());
  b.record.set(fake_event(0x3000));
  CHECK(a.g.topology_hash() == b.g.topology_hash());
  CHECK(messages(a.g).empty());
  CHECK_FALSE(a.g.plan().graph_memory);

  flowdsl_test::Record record;
  flowdsl::Runtime rt = flowdsl_test::make_runtime(record);
  rt.launch(a.g);
  a.wait.set(fake_event(0x4000));
  const flowdsl::LaunchReport report = rt.launch(a.g);
  CHECK(report.kind == flowdsl::LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  REQUIRE(record.updated.size() == 1);
  CHECK(record.updated[0].first == "go");
  CHECK(std::get<flowdsl::EventWaitOp>(a.g.description().nodes[a.wait.id()].op).event == fake_event(0x4000));
  // Graphs of equal topology share the executable: events are parameters.
  rt.launch(b.g);
  CHECK(record.instantiations == 1);
}

TEST_CASE("A null event is reported, and event nodes stay out of conditional bodies", "[event][validation]") {
  flowdsl::Graph g;
  g.record_event("nowhere", nullptr);
  auto loop = g.if_then("maybe", flowdsl::ConditionDefault{1});
  loop.body().wait_event("inside", fake_event(0x1000));
  const auto all = messages(g);
  CHECK(std::count(all.begin(), all.end(), "node 'nowhere' (event_record): event is null") == 1);
  CHECK(std::count(all.begin(), all.end(),
                   "node 'maybe/inside' (event_wait): cannot run inside conditional node 'maybe' (CUDA allows "
                   "kernel, memcpy, memset, empty, child, library and conditional nodes there)") == 1);
  CHECK(all.size() == 2);

  flowdsl::Graph fixed;
  auto r = fixed.record_event("r", fake_event(0x1000));
  CHECK_NOTHROW(fixed.plan());
  r.set(nullptr);  // a parameter: checked again before an update
  CHECK(flowdsl::validate_parameters(fixed.description(), {r.id()}).at(0).message ==
        "node 'r' (event_record): event is null");
}

TEST_CASE("Graph files name their events; the program supplies them", "[event][json]") {
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(event_file);
  CHECK(flowdsl::event_names(spec) == std::vector<std::string>{"finished", "ready"});

  // Checking needs no device, so no events: placeholders stand for them.
  flowdsl::check_graph(spec, flowdsl::KernelRegistry{});

  // Binding needs every one, and names the node that lacks one.
  const flowdsl::Externals some({}, {{"ready", fake_event(0x1000)}});
  try {
    (void)flowdsl::bind_graph(spec, {}, flowdsl::KernelRegistry{}, some);
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    REQUIRE(e.problems().size() == 1);
    CHECK(e.pointer() == "/nodes/2/event");
    CHECK_THAT(e.what(), contains("unknown event 'finished' (known: ready)"));
  }

  const flowdsl::Externals all({}, {{"ready", fake_event(0x1000)}, {"finished", fake_event(0x2000)}});
  const flowdsl::Graph g = flowdsl::bind_graph(spec, {}, flowdsl::KernelRegistry{}, all);
  CHECK(std::get<flowdsl::EventWaitOp>(g.description().nodes[0].op).event == fake_event(0x1000));
  CHECK(std::get<flowdsl::EventRecordOp>(g.description().nodes[2].op).event == fake_event(0x2000));

  // Written back, events are named by the externals that hold them.
  const flowdsl::GraphSpec written = flowdsl::describe_graph(g, "t", {}, {}, flowdsl::KernelRegistry{}, all);
  CHECK(written.nodes[0].fields.to_json() == nlohmann::json{{"event", "ready"}});
  CHECK(flowdsl::to_json_text(written) == flowdsl::to_json_text(spec));
  try {
    (void)flowdsl::describe_graph(g, "t", {}, {}, flowdsl::KernelRegistry{}, some);
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/2/event");
    CHECK_THAT(e.what(), contains("the event matches no named event"));
  }

  // A missing or mistyped event is a schema problem.
  std::string untyped = event_file;
  untyped.replace(untyped.find("\"event\": \"ready\""), 16, "\"event\": 7");
  try {
    (void)flowdsl::parse_graph(untyped);
    FAIL("no JsonError");
  } catch (const flowdsl::JsonError& e) {
    CHECK(e.pointer() == "/nodes/0/event");
  }
}

TEST_CASE("DOT draws event nodes in their own shapes", "[event][dot]") {
  Signals s;
  flowdsl::DotOptions options;
  options.show_arguments = true;
  const std::string dot = flowdsl::to_dot(s.g, options);
  CHECK_THAT(dot, contains(R"(n1 [label="ready\nrecord event\n0x1000", fillcolor=plum, shape=cds];)"));
  CHECK_THAT(dot, contains(R"(n2 [label="go\nwait for event\n0x2000", fillcolor=plum, shape=invhouse];)"));
  require_dot_accepts(dot, "dot_events.dot");
}
