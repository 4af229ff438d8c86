// SPDX-License-Identifier: Apache-2.0
// The module's exception types, one per flowdsl error, and the translation of C++ errors into
// them (details kept as attributes).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace flowdsl::python {
namespace {

// A Python error type per flowdsl error, keeping the details as attributes.
nb::object validation_error, json_error, usage_error, cuda_error, debug_error, profiler_error, flowdsl_error;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ValidationError& e) {
    nb::list diagnostics;
    for (const Diagnostic& d : e.diagnostics()) {
      nb::dict item;
      item["nodes"] = nb::cast(d.nodes);
      item["message"] = d.message;
      item["member"] = d.member;
      diagnostics.append(item);
    }
    nb::object error = validation_error(e.what());
    error.attr("diagnostics") = diagnostics;
    PyErr_SetObject(validation_error.ptr(), error.ptr());
  } catch (const JsonError& e) {
    nb::list problems;
    for (const JsonProblem& j : e.problems()) {
      nb::dict item;
      item["pointer"] = j.pointer;
      item["message"] = j.message;
      problems.append(item);
    }
    nb::object error = json_error(e.what());
    error.attr("diagnostics") = problems;
    error.attr("source") = e.source();
    PyErr_SetObject(json_error.ptr(), error.ptr());
  } catch (const UsageError& e) {
    PyErr_SetString(usage_error.ptr(), e.what());
  } catch (const CudaError& e) {
    PyErr_SetString(cuda_error.ptr(), e.what());
  } catch (const DebugError& e) {
    nb::object error = debug_error(e.what());
    error.attr("node") = e.node();
    error.attr("kernel") = e.kernel();
    PyErr_SetObject(debug_error.ptr(), error.ptr());
  } catch (const ProfilerError& e) {
    nb::object error = profiler_error(e.what());
    error.attr("call") = e.call();
    PyErr_SetObject(profiler_error.ptr(), error.ptr());
  } catch (const Error& e) {
    PyErr_SetString(flowdsl_error.ptr(), e.what());
  }
}


}  // namespace

void bind_errors(nb::module_& m) {
  flowdsl_error = nb::borrow(PyExc_RuntimeError);
  nb::object base = nb::module_::import_("builtins").attr("type")("Error", nb::make_tuple(nb::handle(PyExc_RuntimeError)), nb::dict());
  base.attr("__module__") = "flowdsl";
  base.attr("__doc__") = "Every error flowdsl raises.";
  flowdsl_error = base;
  auto subclass = [&](const char* name, nb::handle parent, const char* doc) {
    nb::object t = nb::module_::import_("builtins").attr("type")(name, nb::make_tuple(base, parent), nb::dict());
    t.attr("__module__") = "flowdsl";
    t.attr("__doc__") = doc;
    m.attr(name) = t;
    return t;
  };
  m.attr("Error") = base;
  usage_error = subclass("UsageError", PyExc_ValueError, "A call the API does not allow (named node and parameter).");
  validation_error = subclass("ValidationError", PyExc_ValueError,
                              "The graph is not valid; `diagnostics` lists every problem (nodes, message, member).");
  json_error = subclass("JsonError", PyExc_ValueError,
                        "A graph file is malformed or invalid; `diagnostics` lists each problem at its JSON pointer.");
  cuda_error = subclass("CudaError", PyExc_RuntimeError, "A CUDA call failed (the call and node are in the message).");
  debug_error = subclass("DebugError", PyExc_RuntimeError,
                         "A debug-mode launch found a node at fault (failed, faulted or wrote a NaN); `node` and `kernel` name it.");
  profiler_error = subclass("ProfilerError", PyExc_RuntimeError,
                            "CUPTI could not be loaded or refused a call (`call` names it; empty when it did not load).");
  nb::register_exception_translator(translate);
}

}  // namespace flowdsl::python
