// SPDX-License-Identifier: Apache-2.0
// Library nodes, lowering side: the call is recorded (stream capture, thread-local mode) into a
// child graph of the node's own. Every use of stream capture in flowdsl is in this file. An
// update records the call again and hands the recording to the executable in place
// (cudaGraphExecChildGraphNodeSetParams) when it holds the nodes of the first recording.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "extent_checks.hpp"
#include "lowering_facets.hpp"
#include "recording.hpp"

namespace flowdsl::lowering {
namespace {

// This thread's stream for recording calls on the current device. It synchronises with the
// legacy stream, so that a call that touches the legacy stream while it is recorded fails
// (cudaErrorStreamCaptureImplicit) instead of running outside the graph.
cudaStream_t recording_stream(const std::string& path) {
  struct OnDevice {
    int device;
    StreamHandle stream;
  };
  thread_local std::vector<OnDevice> streams;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice", path.c_str());
  for (const OnDevice& s : streams) {
    if (s.device == device) return s.stream.get();
  }
  streams.push_back({device, make_stream(cudaStreamDefault)});
  return streams.back().stream.get();
}

// What a failed recording means, from the error the call's own CUDA calls left (`during`) or
// its status (a call that checks its CUDA calls returns their error itself).
std::string recording_detail(cudaError_t during, CallStatus status) {
  std::string detail;
  if (status != 0) detail = "the call returned status " + std::to_string(status) + " (0 is success)";
  const auto is = [&](cudaError_t e) { return during == e || status == static_cast<CallStatus>(e); };
  const auto add = [&](const std::string& text) { detail += (detail.empty() ? "" : "; ") + text; };
  if (is(cudaErrorStreamCaptureUnsupported) || is(cudaErrorStreamCaptureInvalidated)) {
    add("a CUDA call it made (" + std::string(cudaGetErrorName(is(cudaErrorStreamCaptureUnsupported)
                                                                  ? cudaErrorStreamCaptureUnsupported
                                                                  : cudaErrorStreamCaptureInvalidated)) +
        ") cannot be recorded: a library call may only enqueue work on the stream it is given, never "
        "synchronise or allocate with cudaMalloc");
  } else if (is(cudaErrorStreamCaptureImplicit)) {
    add("it used the legacy default stream (cudaErrorStreamCaptureImplicit): enqueue on the stream given");
  } else if (is(cudaErrorStreamCaptureUnjoined)) {
    add("it forked work to another stream and did not join it back (cudaErrorStreamCaptureUnjoined)");
  } else if (during != cudaSuccess) {
    add(std::string("a CUDA call it made returned ") + cudaGetErrorName(during));
  }
  if (detail.empty()) detail = "the call could not be recorded";
  return detail + " (while flowdsl recorded it into the graph)";
}

// Points `pointers` at the node's arguments, resolved into `resolved` when some hold symbols.
void argument_pointers(const LibraryOp& op, const Symbols& symbols, std::optional<ArgumentPack>& resolved,
                       std::vector<void*>& pointers) {
  if (op.args.has_symbols()) {
    resolved.emplace(symbols.resolve(op.args));
    resolved->pointers(pointers);
  } else {
    op.args.pointers(pointers);
  }
}

// Calls the node's function on `stream`; a throw is passed on naming the node.
CallStatus call(const LibraryOp& op, const Symbols& symbols, cudaStream_t stream, const std::string& path) {
  thread_local std::vector<void*> pointers;
  std::optional<ArgumentPack> resolved;  // made only when some argument holds a symbol
  argument_pointers(op, symbols, resolved, pointers);
  // A refusal of the arguments stays a usage error, and a CUDA failure a CudaError with its code,
  // so that callers (the flowdsl tool's exit codes among them) can tell bad input from the rest.
  try {
    return op.invoke(op.function, stream, pointers.empty() ? nullptr : pointers.data());
  } catch (const UsageError& e) {
    std::throw_with_nested(UsageError("flowdsl: node " + quoted_name(path) + " (library): its call refused its arguments: " + e.what()));
  } catch (const CudaError& e) {
    std::throw_with_nested(CudaError(e.code(), "the library call", path, e.what()));
  } catch (const std::exception& e) {
    std::throw_with_nested(Error("flowdsl: node " + quoted_name(path) + " (library): its call threw: " + e.what()));
  } catch (...) {
    std::throw_with_nested(Error("flowdsl: node " + quoted_name(path) + " (library): its call threw"));
  }
}

// Records the node's call into a native graph of its own. The capture is ended whatever the
// call does, so that a failure leaves no capture open on this thread.
NativeGraph record(const LibraryOp& op, const Symbols& symbols, const std::string& path) {
  const cudaStream_t stream = recording_stream(path);
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate", path.c_str());
  NativeGraph body(graph);
  (void)cudaGetLastError();  // from here on, an error is the call's
  check(cudaStreamBeginCaptureToGraph(stream, graph, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCaptureToGraph", path.c_str());
  CallStatus status = 0;
  std::exception_ptr thrown;
  try {
    status = call(op, symbols, stream, path);
  } catch (...) {
    thrown = std::current_exception();
  }
  const cudaError_t during = cudaGetLastError();
  cudaGraph_t ended = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &ended);
  // A capture that failed takes the graph it recorded into with it (CUDA destroys it).
  if (end != cudaSuccess) (void)body.release();
  (void)cudaGetLastError();
  if (thrown) std::rethrow_exception(thrown);
  if (end != cudaSuccess || status != 0) {
    const cudaError_t code = end != cudaSuccess ? end : during != cudaSuccess ? during : cudaErrorUnknown;
    throw CudaError(code, end != cudaSuccess ? "cudaStreamEndCapture" : "the library call", path,
                    recording_detail(during, status));
  }
  return body;
}

}  // namespace

void check_structure(const LibraryOp& op, NodeCheck& diag) {
  if (op.function == nullptr || op.invoke == nullptr) diag.report("library call is null");
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (op.args.bound(i)) continue;
    const bool named = op.info != nullptr && i < op.info->params.size();
    diag.report("argument " + (named ? quoted_name(op.info->params[i].name) : std::to_string(i)) +
                    " was never set (call args(...))",
                named ? "args/" + op.info->params[i].name : "");
  }
}

void check_parameters(const LibraryOp& op, NodeCheck& diag) {
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (op.args.kind(i) == SlotKind::pointer && op.args.bound(i) && symbol::is_symbol(op.args.word(i))) {
      const bool named = op.info != nullptr && i < op.info->params.size();
      check_pointer(diag, op.args.word(i),
                    "argument " + (named ? quoted_name(op.info->params[i].name) : std::to_string(i)),
                    named ? "args/" + op.info->params[i].name : "");
    }
  }
  if (op.info == nullptr && diag.buffers().empty()) return;  // as a kernel node's
  if (const KernelInfo* info = registered_entry(op.info, op.function, op.args, diag.kernels())) {
    check_arguments(op.args, LaunchShape{}, *info, diag);
  }
}

// What it records depends on its arguments, so only the call and its arity are structure: a
// recording of other nodes is found when the call is recorded again, and refuses the update.
void hash_structure(const LibraryOp& op, StructureWords& h) {
  h.add(reinterpret_cast<std::uintptr_t>(op.function));
  h.add(reinterpret_cast<std::uintptr_t>(op.invoke));
  h.add(op.args.size());
}

void describe_structure(const LibraryOp& op, std::vector<StructureField>& out) {
  std::string name = call_name_of(op);
  if (name.empty()) {
    char address[32];
    std::snprintf(address, sizeof address, "%p", op.function);
    name = address;
  }
  out.push_back({"call", std::move(name)});
  out.push_back({"argument count", std::to_string(op.args.size())});
}

cudaGraphNode_t add_native(const LibraryOp& op, NativeNode& node) {
  NativeGraph body = record(op, node.symbols, node.path);
  if (node.in_conditional_body) {
    if (const std::optional<cudaGraphNodeType> refused = refused_in_conditional_body(body.get(), node.path)) {
      std::string detail = "its call recorded " + node_type_name(*refused) +
                           ", which CUDA does not allow inside a conditional node's body (kernel, copy, memset, "
                           "empty, child and conditional nodes only): call it outside the conditional node, or make "
                           "it enqueue only kernels, copies and fills";
      if (*refused == cudaGraphNodeTypeWaitEvent || *refused == cudaGraphNodeTypeEventRecord) {
        // What NCCL records for several ranks: its own ordering of the communicator's launches.
        detail += " (NCCL with several ranks orders each call after the communicator's other launches with event "
                  "nodes; NCCL_GRAPH_MIXING_SUPPORT=0, set before NCCL initialises, leaves them out, and then the "
                  "program must not run a communicator's graphs and other calls at once)";
      }
      throw CudaError(cudaErrorNotSupported, "recording the library call", node.path, detail);
    }
  }
  return add_child_graph(node, std::move(body));
}

UpdateStatus update_native(const LibraryOp& op, const NativeUpdate& node) {
  const std::string path = node.description != nullptr ? node_path(*node.description, node.id) : call_name_of(op);
  NativeGraph body;
  try {
    body = record(op, node.symbols, path);
  } catch (const CudaError& e) {
    return {e.code(), "recording the library call", e.what()};
  }
  cudaGraph_t held = nullptr;
  if (const cudaError_t code = cudaGraphChildGraphNodeGetGraph(node.native, &held); code != cudaSuccess) {
    return {code, "cudaGraphChildGraphNodeGetGraph"};
  }
  const Recording before = shape_of(held, path);
  const Recording after = shape_of(body.get(), path);
  if (!before.same_nodes(after)) {
    return {cudaErrorGraphExecUpdateFailure, "cudaGraphExecChildGraphNodeSetParams",
            "recorded body changed: " + to_string(before) + " \u2192 " + to_string(after)};
  }
  return {cudaGraphExecChildGraphNodeSetParams(node.exec, node.native, body.get()),
          "cudaGraphExecChildGraphNodeSetParams"};
}

void launch_eager(const LibraryOp& op, EagerNode& node) {
  (void)cudaGetLastError();  // from here on, an error is the call's
  const CallStatus status = call(op, node.symbols, node.stream, node.path);
  const cudaError_t during = cudaGetLastError();
  if (status != 0) {
    throw CudaError(during != cudaSuccess ? during : cudaErrorUnknown, "the library call", node.path,
                    "the call returned status " + std::to_string(status) + " (0 is success)");
  }
}

void derived_accesses(const LibraryOp& op, KernelInfos& kernels, std::vector<Access>& out) {
  if (const KernelInfo* info = registered_entry(op.info, op.function, op.args, kernels)) {
    extent_accesses(op.args, LaunchShape{}, *info, out);
  }
}

void save_parameters(const LibraryOp& op, std::vector<unsigned char>& out) { save_arguments(op.args, out); }

bool same_parameters(const LibraryOp& wanted, SavedParameters& held, const SymbolMatch& symbols) {
  return same_arguments(wanted.args, held, symbols);
}

FLOWDSL_LOWERING(LibraryOp)

}  // namespace flowdsl::lowering
