# SPDX-License-Identifier: Apache-2.0
"""flowdsl's Python API on a GPU: PyTorch and CuPy tensors, results against references, updates
by tensor swap with no re-instantiation, conditional bodies, graph files on tensors.

Skipped (not passed) where there is no CUDA device or no PyTorch.
"""

import pytest

import flowdsl

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

pytestmark = pytest.mark.gpu
N = (1 << 20) + 3


def poisoned(n, dtype=torch.float32):
    return torch.full((n,), float("nan"), device="cuda", dtype=dtype)


def test_a_chain_on_torch_tensors_matches_torch():
    x = torch.randn(N, device="cuda")
    y, z = poisoned(N), poisoned(N)
    g = flowdsl.Graph()
    g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    g.kernel("axpy", "axpy.f32", n=N, a=0.5, x=x, y=y).after("scale")
    g.kernel("copy", "scale.f32", n=N, a=1.0, x=y, y=z).after("axpy")
    rt = flowdsl.Runtime()
    stream = torch.cuda.current_stream()
    report = rt.launch(g, stream=stream)
    assert isinstance(report, flowdsl.LaunchReport)
    assert report.kind == "instantiated" and report.nodes_updated == 0 and report.reason is None
    assert report["kind"] == "instantiated" and report == {"kind": "instantiated", "nodes_updated": 0}
    stream.synchronize()
    torch.testing.assert_close(z, 2.0 * x + 0.5 * x)
    hit = rt.launch(g, stream=stream)
    assert hit.kind == "hit" and hit["nodes_updated"] == 0 and hit.as_dict() == {"kind": "hit", "nodes_updated": 0}
    assert rt.launch(g, stream=stream) is hit  # immutable: every hit shares one report
    assert repr(hit) == "LaunchReport(kind='hit', nodes_updated=0)" and hit != report
    with pytest.raises(KeyError):
        hit["reason"]


@pytest.mark.parametrize("size", [2**62, 2**63 - 1, -1])
def test_a_refused_size_leaves_the_runtime_usable(size):
    x = torch.randn(4096, device="cuda")
    y = poisoned(4096)
    g = flowdsl.Graph()
    with pytest.raises(flowdsl.UsageError):
        g.kernel("s", "scale.f32", n=size, a=2.0, x=x, y=y)
    k = g.kernel("s", "scale.f32", n=4096, a=2.0, x=x, y=y)
    with pytest.raises(flowdsl.UsageError):
        k.set(n=size)
    rt = flowdsl.Runtime()
    stream = torch.cuda.current_stream()
    with pytest.raises(flowdsl.UsageError, match="not a stream handle"):
        rt.launch(g, stream=-1)
    rt.launch(g, stream=stream)
    stream.synchronize()
    torch.testing.assert_close(y, 2.0 * x)


def test_swapping_a_tensor_updates_in_place():
    x0, x1 = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    y = poisoned(N)
    g = flowdsl.Graph()
    k = g.kernel("scale", "scale.f32", n=N, a=3.0, x=x0, y=y)
    rt = flowdsl.Runtime()
    s = torch.cuda.Stream()
    rt.launch(g, stream=s)
    s.synchronize()
    torch.testing.assert_close(y, 3.0 * x0)
    for i in range(5):
        x = x1 if i % 2 == 0 else x0
        k.set(x=x, a=float(i))
        assert "scale" in rt.explain(g, stream=s)  # the node the next launch updates
        report = rt.launch(g, stream=s)
        assert report.kind == "updated" and report.nodes_updated == 1 and report["nodes_updated"] == 1
        s.synchronize()
        torch.testing.assert_close(y, float(i) * x)
    stats = rt.stats
    assert stats["misses"] == 1 and stats["reinstantiations"] == 0 and stats["node_updates"] == 5


def test_dtypes_other_than_float32():
    x = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    y = poisoned(N, torch.bfloat16)
    g = flowdsl.Graph()
    g.kernel("scale", "scale.bf16", n=N, a=0.5, x=x, y=y)
    flowdsl.Runtime().launch(g)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, (x.float() * 0.5).bfloat16())
    with pytest.raises(flowdsl.UsageError, match="bfloat16"):
        g.kernel("wrong", "scale.f32", n=N, a=0.5, x=x, y=y)


def test_a_while_loop_runs_its_body_until_the_condition_clears():
    value = torch.zeros(1, device="cuda")
    one = torch.ones(1, device="cuda")
    g = flowdsl.Graph()
    loop = g.while_loop("loop", initial=1)
    body = loop.body()
    body.kernel("count", "add.f32", n=1, a=value, b=one, out=value)
    body.kernel("decide", "condition.less.f32", value=value, threshold=10.0, cond=loop).after("count")
    flowdsl.Runtime().launch(g)
    torch.cuda.synchronize()
    assert float(value.item()) == 10.0


def test_graph_files_load_on_torch_tensors(tmp_path):
    x = torch.randn(4096, device="cuda")
    y = poisoned(4096)
    path = tmp_path / "g.json"
    path.write_text('{"version": 1, "name": "g", "buffers": [{"name": "x", "type": "f32", "count": 4096}, '
                    '{"name": "y", "type": "f32", "count": 4096}], "nodes": [{"name": "k", "kind": "kernel", '
                    '"kernel": "scale.f32", "args": {"n": 4096, "a": 4.0, "x": "x", "y": "y"}}]}')
    g = flowdsl.load(str(path), buffers={"x": x, "y": y})
    flowdsl.Runtime().launch(g)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 4.0 * x)


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal(N, dtype=cupy.float32)
    y = cupy.full(N, cupy.nan, dtype=cupy.float32)
    g = flowdsl.Graph()
    g.kernel("scale", "scale.f32", n=N, a=-1.5, x=x, y=y)
    stream = cupy.cuda.Stream()
    flowdsl.Runtime().launch(g, stream=stream)
    stream.synchronize()
    assert cupy.allclose(y, -1.5 * x)


def test_the_docs_gpu_examples_run(capsys):
    from test_cpu import docs_examples

    examples = docs_examples("gpu")
    assert examples
    for code in examples:
        exec(compile(code, "docs/python.md", "exec"), {})
    out = capsys.readouterr().out
    assert "kind='instantiated'" in out and "\nupdated\n" in out


def test_the_profiler_names_the_nodes():
    x = torch.randn(N, device="cuda")
    y = poisoned(N)
    g = flowdsl.Graph()
    g.kernel("scale", "scale.f32", n=N, a=2.0, x=x, y=y)
    g.kernel("again", "scale.f32", n=N, a=0.5, x=y, y=y).after("scale")
    rt = flowdsl.Runtime()
    with flowdsl.Profiler(rt) as profiler:
        profiler.name(g, "pair")
        for _ in range(3):
            profiler.launch(g)
        table = profiler.report()
        trace = profiler.trace()
    assert "scale" in table and "again" in table
    assert '"scale"' in trace or "scale" in trace
    torch.testing.assert_close(y, x)


def gelu_tanh(v):
    return 0.5 * v * (1.0 + torch.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))


def test_a_cublaslt_library_node_matches_torch_and_updates_by_tensor_swap():
    m, n, k = 96, 256, 320
    a0 = torch.randn(m, k, device="cuda").bfloat16()
    a1 = torch.randn(m, k, device="cuda").bfloat16()
    b = (torch.randn(k, n, device="cuda") * k ** -0.5).bfloat16()
    bias = torch.randn(n, device="cuda")
    c = poisoned(m * n).view(m, n)
    g = flowdsl.Graph()
    gemm = g.library("linear", "cublaslt.matmul.bf16.f32", m=m, n=n, k=k, a=a0, b=b, bias=bias,
                     epilogue="bias_gelu", c=c)
    rt = flowdsl.Runtime()
    stream = torch.cuda.Stream()
    assert rt.launch(g, stream=stream)["kind"] == "instantiated"
    stream.synchronize()
    torch.testing.assert_close(c, gelu_tanh(a0.float() @ b.float() + bias), rtol=2e-3, atol=2e-3)

    for i, (a, epilogue) in enumerate([(a1, "bias_relu"), (a0, "bias")]):
        c.fill_(float("nan"))
        gemm.set(a=a, epilogue=epilogue)
        report = rt.launch(g, stream=stream)
        assert report["kind"] == "updated" and report["nodes_updated"] == 1, report
        stream.synchronize()
        want = a.float() @ b.float() + bias
        torch.testing.assert_close(c, torch.relu(want) if epilogue == "bias_relu" else want, rtol=2e-3, atol=2e-3)
    stats = rt.stats
    assert stats["misses"] == 1 and stats["reinstantiations"] == 0, stats

    with pytest.raises(flowdsl.UsageError, match="'c'"):
        gemm.set(c=poisoned(m * n - 1))  # too short for m * n outputs


def _fusable_chain(g, x, v, w, t, y):
    a = g.kernel("scale", "scale.f32", n=N, a=1.5, x=x, y=t[0])
    g.kernel("add", "add.f32", n=N, a=t[0], b=v, out=t[1]).after(a)
    g.kernel("bias", "bias_activation.f32", rows=N, cols=1, activation="gelu", x=t[1], bias=w, y=t[2]).after("add")
    g.kernel("clamp", "clamp.f32", n=N, lo=-1.0, hi=1.0, x=t[2], y=y).after("bias")
    return a


def test_a_fused_chain_gives_the_unfused_bytes_and_updates_without_compiling():
    x, v = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    w = torch.randn(1, device="cuda")
    t = [poisoned(N) for _ in range(3)]
    y_plain, y_fused = poisoned(N), poisoned(N)
    plain, fused = flowdsl.Graph(), flowdsl.Graph()
    fused.fuse(True)
    a_plain = _fusable_chain(plain, x, v, w, t, y_plain)
    a_fused = _fusable_chain(fused, x, v, w, t, y_fused)
    assert "group 1: 'scale' > 'add' > 'bias' > 'clamp'" in fused.fusion()
    rt = flowdsl.Runtime()
    stream = torch.cuda.current_stream()
    rt.launch(plain, stream=stream)
    assert rt.launch(fused, stream=stream)["kind"] == "instantiated"
    stream.synchronize()
    assert torch.equal(y_plain, y_fused)
    compiled = flowdsl.fused_kernel_statistics()["compilations"]
    x2 = torch.randn(N, device="cuda")
    for node in (a_plain, a_fused):
        node.set(a=-0.75, x=x2)  # another input, no other member reads x: the same fused kernel
    rt.launch(plain, stream=stream)
    report = rt.launch(fused, stream=stream)
    assert report["kind"] == "updated"
    stream.synchronize()
    assert torch.equal(y_plain, y_fused)
    assert flowdsl.fused_kernel_statistics()["compilations"] == compiled
    assert rt.stats["reinstantiations"] == 0


def test_a_family_runs_each_batch_on_its_bucket_graph_made_up_front_or_lazily():
    cols, largest = 1000, 16
    x = torch.randn(largest * cols, device="cuda")
    y = poisoned(largest * cols)
    built, graphs, nodes = [], {}, {}

    def step(bucket):
        built.append(bucket)
        g = graphs[bucket] = flowdsl.Graph()
        nodes[bucket] = g.kernel("scale", "scale.f32", n=bucket * cols, a=3.0, x=x, y=y)
        return g

    stream = torch.cuda.current_stream()
    for up_front in (False, True):
        built.clear()
        rt = flowdsl.Runtime()
        family = flowdsl.Family(rt, flowdsl.Family.powers_of_two(largest), step)
        assert family.buckets == [1, 2, 4, 8, 16]
        if up_front:
            family.prepare(stream=stream)
            assert sorted(built) == family.buckets and rt.stats["prepared"] == 5
        for batch in (3, 1, 16, 9, 4, 3):
            y.fill_(float("nan"))
            report = family.launch(batch, stream=stream)
            assert report.kind in (("hit",) if up_front else ("hit", "instantiated"))
            stream.synchronize()
            rows = family.bucket_for(batch) * cols
            torch.testing.assert_close(y[:rows], 3.0 * x[:rows])
            assert torch.isnan(y[rows:]).all()
        assert rt.stats["node_updates"] == 0
        stats = family.stats
        assert [b["bucket"] for b in stats["buckets"]] == [1, 2, 4, 8, 16]
        assert all(b["ready"] == (up_front or b["launches"] > 0) for b in stats["buckets"])

    # The bucket's Graph is the builder's object: a parameter set on it reaches the next launch.
    assert family.graph_for(5) is graphs[8]
    nodes[8].set(a=-1.0)
    y.fill_(float("nan"))
    assert family.launch(5, stream=stream).kind == "updated"
    stream.synchronize()
    torch.testing.assert_close(y[: 8 * cols], -x[: 8 * cols])
    with pytest.raises(flowdsl.UsageError, match="batch 17 exceeds the largest bucket, 16"):
        family.launch(17)
    with pytest.raises(flowdsl.UsageError, match="not a flowdsl.Graph"):
        flowdsl.Family(rt, [1], lambda b: None).launch(1)


def test_a_family_whose_builder_is_a_method_of_its_owner_is_collected():
    import gc
    import weakref

    class Owner:
        def __init__(self):
            self.x = torch.randn(4096, device="cuda")
            self.y = torch.empty_like(self.x)
            self.family = flowdsl.Family(flowdsl.Runtime(), [1, 2], self.build)  # a cycle: family -> build -> self

        def build(self, bucket):
            g = flowdsl.Graph()
            g.kernel("scale", "scale.f32", n=2048 * bucket, a=2.0, x=self.x, y=self.y)
            return g

    owner = Owner()
    owner.family.launch(2)
    torch.cuda.synchronize()
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None
