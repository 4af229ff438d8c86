# SPDX-License-Identifier: Apache-2.0
"""flowdsl's Python API without a GPU: building, validation, DOT, JSON and every error type.

Device arrays are stand-ins (objects with __cuda_array_interface__ at made-up addresses): these
tests declare and validate graphs, which reads no memory; nothing is launched.
"""

import json

import pytest

import flowdsl


class FakeArray:
    """A device array as CuPy and Numba describe theirs; the address is never dereferenced."""

    def __init__(self, address, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (address, False),
            "strides": strides,
            "version": 3,
        }


N = 4096


@pytest.fixture
def arrays():
    return FakeArray(0x7F0000000000, (N,)), FakeArray(0x7F0000100000, (N,)), FakeArray(0x7F0000200000, (N,))


def test_registry_names_the_builtin_kernels():
    names = flowdsl.kernels()
    assert "scale.f32" in names and "random_normal.bf16" in names
    params = dict(flowdsl.kernel_params("scale.f32"))
    assert params["x"] == "const f32*" and params["y"] == "f32*" and params["a"] == "f32"


def test_launch_reports_are_made_by_launches_only():
    assert "LaunchReport" in flowdsl.__all__
    with pytest.raises(TypeError):
        flowdsl.LaunchReport()
    assert {"kind", "nodes_updated", "reason", "as_dict"} <= set(dir(flowdsl.LaunchReport))


def test_a_chain_validates_and_draws(arrays):
    x, y, z = arrays
    g = flowdsl.Graph()
    a = g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    b = g.kernel("shift", "scale.f32", n=N, a=0.5, x=y, y=z).after(a)
    assert len(g) == 2 and a.name == "scale" and b.kernel == "scale.f32"
    g.validate()
    assert isinstance(g.topology_hash, int)
    dot = g.to_dot()
    assert dot.lstrip().startswith("digraph") and "scale" in dot and "shift" in dot and "->" in dot


def test_edges_by_name_and_programmatic(arrays):
    x, y, _ = arrays
    g = flowdsl.Graph()
    g.kernel("first", "scale.f32", n=N, a=2.0, x=x, y=y)
    second = g.kernel("second", "scale.f32", n=N, a=2.0, x=y, y=x)
    second.after("first", programmatic=True)
    g.validate()
    plain = flowdsl.Graph()
    plain.kernel("first", "scale.f32", n=N, a=2.0, x=x, y=y)
    plain.kernel("second", "scale.f32", n=N, a=2.0, x=y, y=x).after("first")
    assert plain.topology_hash != g.topology_hash


def test_dtype_of_a_pointer_argument_is_checked(arrays):
    x, y, _ = arrays
    g = flowdsl.Graph()
    half = FakeArray(0x7F0000300000, (N,), typestr="<f2")
    with pytest.raises(flowdsl.UsageError, match=r"node 'scale', parameter 'x'.*float32.*float16"):
        g.kernel("scale", "scale.f32", n=N, a=2.0, x=half, y=y)


def test_extents_are_checked_against_the_tensors(arrays):
    x, _, _ = arrays
    short = FakeArray(0x7F0000400000, (100,))
    g = flowdsl.Graph()
    with pytest.raises(flowdsl.UsageError, match=r"node 'scale': argument 'y' writes 4096 elements \(n\) "
                                                 r"of a tensor of 100"):
        g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=short)
    k = g.kernel("fits", "scale.f32", n=100, a=2.0, x=x, y=short)
    with pytest.raises(flowdsl.UsageError, match="of a tensor of 100"):
        k.set(n=101)
    # A set() checks what its arguments affect: a tensor given, or an extent reading a scalar given.
    with pytest.raises(flowdsl.UsageError, match=r"argument 'x' reads 100 elements \(n\) of a tensor of 99"):
        k.set(x=FakeArray(0x7F0000500000, (99,)))
    assert k.set(a=3.0) is k
    k.set(n=100, y=x)
    with pytest.raises(flowdsl.UsageError, match=r"argument 'y'.*of a tensor of 100"):
        k.set(n=N, y=short)  # both change: checked against each other
    # Named buffers: validation checks every kernel's pointer into them against their end.
    named = flowdsl.Graph()
    named.buffer("y", short)
    named.kernel("scale", "scale.f32", grid=16, block=256, n=N, a=2.0, x=x, y=0x7F0000400000)
    with pytest.raises(flowdsl.ValidationError) as error:
        named.validate()
    assert any("scale" in p["nodes"] for p in error.value.diagnostics)


def test_library_calls_are_checked_like_kernels():
    m, n, k = 64, 32, 128
    a = FakeArray(0x7F0000000000, (m, k), "<f2")
    b = FakeArray(0x7F0000100000, (k, n), "<f2")
    bias = FakeArray(0x7F0000200000, (n,))
    c = FakeArray(0x7F0000300000, (m, n))
    g = flowdsl.Graph()
    gemm = g.library("gemm", "cublaslt.matmul.f16.f32", m=m, n=n, k=k, a=a, b=b, bias=bias, epilogue="bias", c=c)
    assert gemm.kernel == "cublaslt.matmul.f16.f32"
    g.validate()
    with pytest.raises(flowdsl.UsageError, match=r"node 'gemm': argument 'c' writes 2048 elements "
                                                 r"\(m \* n\) of a tensor of 2047"):
        gemm.set(c=FakeArray(0x7F0000400000, (m * n - 1,)))
    with pytest.raises(flowdsl.UsageError, match="elements .* of a tensor of"):
        gemm.set(m=m + 1)  # a[m * k] and c[m * n] no longer fit
    with pytest.raises(flowdsl.UsageError, match="float16"):
        g.library("wrong", "cublaslt.matmul.f16.f32", m=m, n=n, k=k, a=c, b=b, bias=bias, epilogue="bias", c=c)
    with pytest.raises(flowdsl.UsageError, match="library call"):
        g.kernel("not_a_kernel", "cublaslt.matmul.f16.f32", m=m)
    g.validate()  # the refused calls left the graph as it was


def test_every_problem_is_reported_at_once(arrays):
    x, y, _ = arrays
    g = flowdsl.Graph()
    g.kernel("a", "scale.f32", n=N, a=2.0, x=x, y=y).after("b")
    g.kernel("b", "scale.f32", n=N, a=2.0, x=y, y=x).after("a")
    g.kernel("c", "scale.f32", grid=4, block=256, x=x, y=y)  # n and a unset
    with pytest.raises(flowdsl.ValidationError) as error:
        g.validate()
    named = {n for p in error.value.diagnostics for n in p["nodes"]}
    assert {"a", "c"} <= named or {"b", "c"} <= named
    assert len(error.value.diagnostics) >= 2


def test_bad_arguments_name_node_and_parameter(arrays):
    x, y, _ = arrays
    g = flowdsl.Graph()
    with pytest.raises(flowdsl.UsageError, match="no kernel or library call is registered as 'scale.f99'"):
        g.kernel("k", "scale.f99", n=N)
    with pytest.raises(flowdsl.UsageError, match=r"'scale.f32' has no parameter 'alpha' \(it takes n, a, x, y\)"):
        g.kernel("k2", "scale.f32", alpha=1.0)
    with pytest.raises(flowdsl.UsageError, match="out of range for i64"):
        g.kernel("k3", "scale.f32", n=2**70, a=1.0, x=x, y=y)
    with pytest.raises(flowdsl.UsageError, match="it takes a number"):
        g.kernel("k4", "scale.f32", n=N, a="two", x=x, y=y)
    with pytest.raises(TypeError, match="device array"):
        g.kernel("k5", "scale.f32", n=N, a=1.0, x=[1.0, 2.0], y=y)
    strided = FakeArray(0x7F0000500000, (N, 2), strides=(4, 4 * N))
    with pytest.raises(flowdsl.UsageError, match="not contiguous"):
        g.kernel("k6", "scale.f32", n=N, a=1.0, x=strided, y=y)
    with pytest.raises(flowdsl.UsageError, match="give both grid and block"):
        g.kernel("k7", "scale.f32", grid=4, n=N, a=1.0, x=x, y=y)
    # Each refusal left the graph as it was; it stays usable.
    assert len(g) == 0
    g.kernel("ok", "scale.f32", n=N, a=1.0, x=x, y=y)
    g.validate()
    assert issubclass(flowdsl.UsageError, flowdsl.Error) and issubclass(flowdsl.ValidationError, flowdsl.Error)


def test_set_changes_arguments_with_the_same_checks(arrays):
    x, y, z = arrays
    g = flowdsl.Graph()
    k = g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    before = g.topology_hash
    assert k.set(a=3.0, x=z) is k  # the node itself, for chained calls
    assert g.topology_hash == before  # arguments are parameters, not topology
    with pytest.raises(flowdsl.UsageError, match="parameter 'x'"):
        k.set(x=FakeArray(0x7F0000600000, (N,), typestr="<i4"))
    g.validate()
    # A refused set applies none of its arguments, the valid ones included.
    for name, array in (("x", x), ("y", y), ("z", z)):
        g.buffer(name, array)
    before = g.describe("g")
    with pytest.raises(flowdsl.UsageError, match="of a tensor of 4096"):
        k.set(a=5.0, n=N + 1)
    assert g.describe("g") == before


def test_bodies_conditionals_memory_and_copies(arrays):
    x, y, _ = arrays
    g = flowdsl.Graph()
    loop = g.while_loop("loop", initial=1)
    body = loop.body()
    body.kernel("step", "scale.f32", n=N, a=0.5, x=x, y=y)
    level = FakeArray(0x7F0000800000, (1,))
    body.kernel("decide", "condition.less.f32", value=level, threshold=1.0, cond=loop).after("step")
    child = g.child("inner").after(loop)
    child.body().memset("clear", y, 0, count=N, element_size=4)
    alloc = g.alloc("scratch", N * 4)
    g.memcpy("stage", alloc.address, x, bytes=N * 4).after(alloc)
    g.free("release", alloc).after("stage")
    g.empty("join").after("release", child)
    g.validate()
    assert "loop" in g.to_dot() and "step" in g.to_dot()


def test_json_round_trip(tmp_path, arrays):
    x, y, _ = arrays
    g = flowdsl.Graph()
    g.buffer("x", x).buffer("y", y)
    g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    g.kernel("again", "scale.f32", n=N, a=0.5, x=y, y=x).after("scale")
    text = g.describe("pipeline")
    spec = json.loads(text)
    assert spec["name"] == "pipeline" and [n["name"] for n in spec["nodes"]] == ["scale", "again"]
    path = tmp_path / "pipeline.json"
    path.write_text(text)
    flowdsl.check_file(str(path))
    loaded = flowdsl.load(str(path), buffers={"x": x, "y": y})
    assert loaded.topology_hash == g.topology_hash and len(loaded) == 2


def test_graph_files_report_problems_at_their_pointer(tmp_path, arrays):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "name": "g", "buffers": [], "nodes": [{"name": "k", "kind": "kernel", '
                   '"kernel": "scale.f32", "args": {"n": "many"}}]}')
    with pytest.raises(flowdsl.JsonError) as error:
        flowdsl.check_file(str(bad))
    assert any(p["pointer"].startswith("/nodes/0") for p in error.value.diagnostics)
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [')
    with pytest.raises(flowdsl.JsonError, match="malformed JSON"):
        flowdsl.check_file(str(broken))
    x, _, _ = arrays
    good = tmp_path / "good.json"
    good.write_text('{"version": 1, "name": "g", "buffers": [{"name": "x", "type": "f32", "count": 4096}], '
                    '"nodes": [{"name": "k", "kind": "kernel", "kernel": "scale.f32", '
                    '"args": {"n": 4096, "a": 2.0, "x": "x", "y": "x"}}]}')
    with pytest.raises(flowdsl.UsageError, match="buffer 'x' of the file was not given"):
        flowdsl.load(str(good))
    with pytest.raises(flowdsl.UsageError, match="buffer 'x' holds 4096 f32 elements, got a"):
        flowdsl.load(str(good), buffers={"x": FakeArray(0x7F0000700000, (10,))})
    with pytest.raises(flowdsl.UsageError, match="buffer 'x' holds f32 elements, got a .*int32"):
        flowdsl.load(str(good), buffers={"x": FakeArray(0x7F0000700000, (N,), typestr="<i4")})
    assert len(flowdsl.load(str(good), buffers={"x": x})) == 1


@pytest.mark.parametrize("size", [2**62, 2**63 - 1, -1, -(2**31)])
def test_sizes_that_overflow_or_are_negative_are_refused(arrays, size):
    x, y, _ = arrays
    g = flowdsl.Graph()
    kind = "argument 'n' is -" if size < 0 else "writes|reads|out of range"
    with pytest.raises(flowdsl.UsageError, match=kind):
        g.kernel("s", "scale.f32", n=size, a=2.0, x=x, y=y)
    k = g.kernel("fits", "scale.f32", n=N, a=2.0, x=x, y=y)
    with pytest.raises(flowdsl.UsageError, match=kind):
        k.set(n=size)
    assert len(g) == 1
    g.validate()  # the refused calls left the graph as it was


def test_sizes_refused_by_the_library_not_only_by_the_bindings(arrays):
    # An address (no size known to the bindings): validation refuses the negative size, as it
    # does in C++ and in graph files.
    g = flowdsl.Graph()
    with pytest.raises(flowdsl.UsageError, match=r"argument 'n' is -8: it sizes the extent of 'x' \(n\)"):
        g.kernel("s", "scale.f32", grid=1, block=256, n=-8, a=2.0, x=0x7F0000000000, y=0x7F0000100000)
    m = FakeArray(0x7F0000000000, (64,), "<f2")
    c = FakeArray(0x7F0000300000, (64,))
    with pytest.raises(flowdsl.UsageError, match=r"argument 'epilogue' is 7, not one of its values"):
        g.library("gemm", "cublaslt.matmul.f16.f32", m=8, n=8, k=8, a=m, b=m, bias=c, epilogue=7, c=c)
    with pytest.raises(flowdsl.UsageError, match=r"argument 'm' is -8"):
        g.library("gemm", "cublaslt.matmul.f16.f32", m=-8, n=-8, k=-8, a=m, b=m, bias=c, epilogue="bias", c=c)


def test_stream_handles_and_non_contiguous_arrays_are_usage_errors(arrays):
    x, _, _ = arrays
    strided = FakeArray(0x7F0000000000, (64,), strides=(8,))
    g = flowdsl.Graph()
    with pytest.raises(flowdsl.UsageError, match="not contiguous"):
        g.kernel("s", "scale.f32", n=64, a=2.0, x=strided, y=x)
    with pytest.raises(flowdsl.UsageError, match="is not an address"):
        g.kernel("s", "scale.f32", n=64, a=2.0, x=-1, y=x)


def docs_examples(kind):
    """The ```python blocks of docs/python.md marked `<!-- python example: kind -->`."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    return re.findall(r"<!-- python example: " + kind + r" -->\n```python\n(.*?)```", text, re.S)


def test_the_docs_cpu_examples_run(capsys):
    examples = docs_examples("cpu")
    assert examples
    for code in examples:
        exec(compile(code, "docs/python.md", "exec"), {})
    out = capsys.readouterr().out
    assert "digraph" in out and "of a tensor of 100" in out and "cycle" in out


def test_fusion_lists_the_groups_and_the_kernels_left_out(arrays):
    x, y, z = arrays
    g = flowdsl.Graph()
    g.fuse(True)
    a = g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    b = g.kernel("clamp", "clamp.f32", n=N, lo=0.0, hi=1.0, x=y, y=z).after(a)
    g.kernel("noise", "random_normal.f32", n=N, seed=1, mean=0.0, stddev=1.0, out=x).after(b)
    text = g.fusion()
    assert "group 1: 'scale' > 'clamp'" in text
    assert "'noise': kernel 'random_normal.f32' has no element function" in text
    unfused = flowdsl.Graph()
    unfused.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    assert unfused.topology_hash != g.topology_hash
    stats = flowdsl.fused_kernel_statistics()
    assert set(stats) >= {"compilations", "memory_hits", "disk_hits", "compile_seconds"}


def test_the_package_names_its_version_and_every_error_type():
    assert flowdsl.__version__.count(".") == 2
    for name in ("Error", "UsageError", "ValidationError", "JsonError", "CudaError", "DebugError", "ProfilerError"):
        assert issubclass(getattr(flowdsl, name), flowdsl.Error) and name in flowdsl.__all__
    assert issubclass(flowdsl.DebugError, RuntimeError) and issubclass(flowdsl.UsageError, ValueError)


def test_memset_counts_are_checked_in_elements(arrays):
    x, _, _ = arrays
    g = flowdsl.Graph()
    with pytest.raises(flowdsl.UsageError, match="exceed dst's 16384 bytes"):
        g.memset("m", x, 0, count=2**62, element_size=4)  # 2^62 x 4 bytes wraps to 0
    with pytest.raises(flowdsl.UsageError, match=r"element_size is 3 \(1, 2 or 4\)"):
        g.memset("m", x, 0, element_size=3)
    assert g.memset("all", x, 0, element_size=4).name == "all"


def test_a_process_that_ends_while_nvrtc_starts_exits_cleanly():
    # fuse(True) starts NVRTC's start-up on a thread of its own; the module's atexit hook waits
    # for it while the interpreter is whole (ending the thread inside the C exit handlers crashed
    # about one such exit in eight).
    import subprocess
    import sys

    for _ in range(10):
        ended = subprocess.run([sys.executable, "-c", "import flowdsl; flowdsl.Graph().fuse(True)"],
                               capture_output=True, timeout=120)
        assert ended.returncode == 0, ended.stderr.decode(errors="replace")


@pytest.mark.parametrize("tokens", [1, 8, 64, 256])
def test_attention_splits_cover_the_context_as_the_launcher_picks_them(tokens):
    splits, split_len = flowdsl.attention_splits(tokens, q_heads=32, kv_heads=8, head_dim=64, page_size=16,
                                                 pages_per_seq=64, sequences=64, pages=4096, max_context=1024)
    assert splits >= 1 and split_len >= 1
    assert splits * split_len >= 1024  # every position of the longest context falls in a split
