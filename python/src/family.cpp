// SPDX-License-Identifier: Apache-2.0
// Families of batch buckets from Python: the builder is a Python callable giving a Graph for a
// bucket, and each bucket's Graph stays the Python object it gave, whose parameters the caller
// sets between launches (family.graph_for(batch)).
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "flowdsl/family.hpp"

using namespace nanobind::literals;

namespace flowdsl::python {
namespace {

class PyFamily {
 public:
  PyFamily(Runtime& runtime, std::vector<int> buckets, nb::callable build)
      : build_(std::move(build)), family_(runtime, std::move(buckets), [this](int b) { return graph_of(b); }) {}

  Family& family() { return family_; }
  const Family& family() const { return family_; }

  // For Python's garbage collector: the builder (often a bound method of an object that holds
  // this family: a cycle) and the graphs it gave.
  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(build_.ptr());
    for (const auto& entry : graphs_) Py_VISIT(entry.second.ptr());
    return 0;
  }
  void clear() {
    build_ = nb::callable();
    graphs_.clear();
  }

  // The Python Graph of the bucket holding `batch`, built now (with the GIL) when it was not.
  nb::object graph_for(int batch) {
    family_.graph_for(batch);
    return graphs_.at(family_.bucket_for(batch));
  }

  void prepare(nb::handle stream) {
    const cudaStream_t s = stream_of(stream);
    for (int b : family_.buckets()) (void)nb::cast<const PyGraph&>(graph_for(b)).graph.plan();
    nb::gil_scoped_release release;
    family_.prepare(s);
  }

  Report launch(int batch, nb::handle stream) {
    const PyGraph& g = nb::cast<const PyGraph&>(graph_for(batch));  // built with the GIL
    return enqueue_for(g, stream, [&](cudaStream_t s) { return family_.launch(batch, s); });
  }

 private:
  // Called by the family, with the GIL held (graph_for and prepare build before releasing it).
  std::shared_ptr<Graph> graph_of(int bucket) {
    if (!build_.is_valid()) usage("family: its builder was released (the family is being collected)");
    nb::object g = build_(bucket);
    if (!nb::isinstance<PyGraph>(g)) {
      usage("family: the builder gave " + nb::cast<std::string>(nb::str(g.type())) + " for bucket " +
            std::to_string(bucket) + ", not a flowdsl.Graph");
    }
    std::shared_ptr<PyGraph> owner = nb::cast<std::shared_ptr<PyGraph>>(g);
    graphs_[bucket] = std::move(g);
    return std::shared_ptr<Graph>(owner, &owner->graph);
  }

  nb::callable build_;
  std::map<int, nb::object> graphs_;  // each bucket's Graph as the builder gave it
  Family family_;                     // declared last: made once the members it calls back into are
};

int family_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  return nb::inst_ptr<PyFamily>(self)->traverse(visit, arg);
}
int family_clear(PyObject* self) {
  nb::inst_ptr<PyFamily>(self)->clear();
  return 0;
}
PyType_Slot family_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(family_traverse)},
                              {Py_tp_clear, reinterpret_cast<void*>(family_clear)},
                              {0, nullptr}};

nb::dict bucket_dict(const BucketStatistics& b) {
  nb::dict d;
  d["bucket"] = b.bucket;
  d["built"] = b.built;
  d["ready"] = b.ready;
  d["launches"] = b.launches;
  d["device_memory"] = b.device_memory;
  d["build_ms"] = b.build_ms;
  d["instantiate_ms"] = b.instantiate_ms;
  return d;
}

}  // namespace

void bind_family(nb::module_& m) {
  nb::class_<PyFamily>(m, "Family",
                       "The graphs of one step for a set of batch buckets (1, 2, 4, ...): a launch for a batch runs the\n"
                       "graph of the smallest bucket that holds it. build(bucket) gives a bucket's Graph on its first\n"
                       "use, or for every bucket at once with prepare(); each gets executables of its own.",
                       nb::type_slots(family_slots))
      .def(nb::init<Runtime&, std::vector<int>, nb::callable>(), "runtime"_a, "buckets"_a, "build"_a,
           nb::keep_alive<1, 2>(),
           "runtime: launches the graphs (kept alive by the family); buckets: positive, increasing;\n"
           "build(bucket) -> Graph taking up to `bucket` rows.")
      .def_static("powers_of_two", &Family::powers_of_two, "largest"_a,
                  "[1, 2, 4, ... largest], with largest itself when it is not a power of two.")
      .def_prop_ro("buckets", [](const PyFamily& self) { return self.family().buckets(); })
      .def("bucket_for", [](const PyFamily& self, int batch) { return self.family().bucket_for(batch); }, "batch"_a,
           "The smallest bucket holding `batch`; UsageError past the largest.")
      .def("graph_for", &PyFamily::graph_for, "batch"_a,
           "The Graph of the bucket holding `batch` (built now if it was not), to set its parameters.")
      .def("prepare", &PyFamily::prepare, "stream"_a = nb::none(),
           "Builds every bucket's Graph and instantiates every executable the runtime does not hold, on `stream`.")
      .def("launch", &PyFamily::launch, "batch"_a, "stream"_a = nb::none(),
           "Launches the graph of the bucket holding `batch` on `stream`; returns a LaunchReport.")
      .def_prop_ro(
          "stats",
          [](const PyFamily& self) {
            const FamilyStatistics s = self.family().statistics();
            nb::list buckets;
            for (const BucketStatistics& b : s.buckets) buckets.append(bucket_dict(b));
            nb::dict d;
            d["buckets"] = buckets;
            d["device_memory"] = s.device_memory;
            d["largest_device_memory"] = s.largest_device_memory;
            return d;
          },
          "Each bucket (built, ready, launches, device_memory, build_ms, instantiate_ms) and the family's\n"
          "device_memory and largest_device_memory, in bytes.");
}

}  // namespace flowdsl::python
