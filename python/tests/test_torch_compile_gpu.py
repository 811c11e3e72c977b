"""attnjit under torch.compile and CUDA graphs, on a CUDA GPU (python/README.md, "torch.compile
and CUDA graphs"): the torch ops attnjit::attention / attnjit::attention_backward pass
torch.library.opcheck; torch.compile(fullgraph=True) of models calling attnjit.attention()
or a CompiledAttention traces with no graph break and gives the eager results bit for bit
(outputs and gradients: the same kernels run); captured tensors updated in place or rebound
are read by the compiled graph; CUDA-graph capture and replay of a compiled callable reads
updated q, k, v and captured tensors, while a Python float scalar keeps its value at capture.

Skips without torch >= 2.4 (torch.library.custom_op), a CUDA GPU or the library (unless
ATTNJIT_LIBRARY names it: then it must load); the torch.compile tests also without
inductor's Triton."""
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)
if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "register_fake"):
    pytest.skip(f"torch {torch.__version__} has no torch.library.custom_op (torch >= 2.4 needed)",
                allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import mods, torch_ops  # noqa: E402

from library_or_skip import load_library_or_skip  # noqa: E402

load_library_or_skip()


def _has_inductor() -> bool:
    try:
        from torch.utils._triton import has_triton
        return bool(has_triton())
    except Exception:  # noqa: BLE001 (any failure: no inductor here)
        return False


needs_inductor = pytest.mark.skipif(not _has_inductor(), reason="torch.compile's inductor backend (Triton) is unavailable")

DEVICE = torch.device("cuda", torch.cuda.current_device())
B, H, HKV, N, D = 2, 4, 2, 256, 64

# Module-level modifiers: torch.compile reads what they capture (here and in the tests below)
# through the functions' globals and closures.
SOFTCAP = mods.softcap(20.0)
CAP = 20.0


def softcap_global(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


@pytest.fixture(autouse=True)
def _fresh():
    torch.manual_seed(1234)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def qkv(dtype=torch.bfloat16, Hkv=H, requires_grad=False):
    q = torch.randn(B, H, N, D, device=DEVICE, dtype=dtype)
    k = torch.randn(B, Hkv, N, D, device=DEVICE, dtype=dtype)
    v = torch.randn(B, Hkv, N, D, device=DEVICE, dtype=dtype)
    return tuple(t.requires_grad_(requires_grad) for t in (q, k, v))


def leaves(*tensors):
    """Fresh leaf copies (same values) that require grad."""
    return tuple(t.detach().clone().requires_grad_() for t in tensors)


def assert_same(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    if not torch.equal(a, b):
        diff = (a.double() - b.double()).abs().max().item()
        pytest.fail(f"{what}: compiled and eager differ (max |diff| {diff:.3g}); the same kernels should give "
                    "the same bits")


def test_ops_are_registered():
    assert torch_ops.install() is True
    assert hasattr(torch.ops.attnjit, "attention") and hasattr(torch.ops.attnjit, "attention_backward")
    # torch_ops marks its plan functions the way torch.compiler.assume_constant_result does
    marked = torch.compiler.assume_constant_result(lambda: 0)
    assert getattr(marked, "_dynamo_marked_constant", False) is True
    assert torch_ops._plan_for_callable._dynamo_marked_constant is True


def test_opcheck_forward_and_backward():
    slopes = mods.alibi_slopes(H, device=DEVICE).requires_grad_()
    fn = attnjit.compile(mods.alibi(slopes), causal=True)
    name = torch_ops.plan_name(fn)
    q, k, v = qkv(requires_grad=True)
    torch.library.opcheck(torch.ops.attnjit.attention.default,
                          (q, k, v, [slopes], [], None, None, None, None, -1, name, True))
    with torch.no_grad():
        out, lse = torch.ops.attnjit.attention(q, k, v, [slopes], [], None, None, None, None, -1, name, True)
    d_out = torch.randn_like(out)
    torch.library.opcheck(torch.ops.attnjit.attention_backward.default,
                          (d_out, q.detach(), k.detach(), v.detach(), out, lse, [slopes.detach()], [], None, None,
                           None, None, -1, name, [True], False, False, False))
    # the op gives what the eager call gives
    assert_same(out, fn(q.detach(), k.detach(), v.detach()), "op vs eager out")


def _softcap_model(q, k, v):
    return attnjit.attention(q * 2, k, v, score_mod=SOFTCAP, causal=True)


@needs_inductor
def test_compile_fullgraph_softcap_causal_matches_eager():
    q, k, v = qkv()
    compiled = torch.compile(_softcap_model, fullgraph=True)
    with torch.no_grad():
        assert_same(compiled(q, k, v), _softcap_model(q, k, v), "inference out")
    # training: outputs and q, k, v gradients
    qe, ke, ve = leaves(q, k, v)
    qc, kc, vc = leaves(q, k, v)
    w = torch.randn(B, H, N, D, device=DEVICE, dtype=torch.bfloat16)
    out_e = _softcap_model(qe, ke, ve)
    out_c = compiled(qc, kc, vc)
    assert out_c.requires_grad
    assert_same(out_c, out_e, "training out")
    (out_e.float() * w.float()).sum().backward()
    (out_c.float() * w.float()).sum().backward()
    for a, b, which in ((qc, qe, "dq"), (kc, ke, "dk"), (vc, ve, "dv")):
        assert_same(a.grad, b.grad, which)


@needs_inductor
def test_graphs_hold_the_attnjit_ops(monkeypatch):
    """The forward graph calls attnjit::attention, the backward graph attnjit::attention_backward,
    and a compiled training step runs them (not the eager autograd.Function)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    targets = {"forward": [], "backward": []}

    def recorder(which):
        def compile_graph(gm, example_inputs):
            targets[which] += [n.target for n in gm.graph.nodes if n.op == "call_function"]
            return make_boxed_func(gm.forward)
        return compile_graph

    calls = []
    for name in ("_op_forward", "_op_backward", "_call_training"):
        original = getattr(attnjit.CompiledAttention, name)
        monkeypatch.setattr(attnjit.CompiledAttention, name,
                            lambda self, *a, _f=original, _n=name, **kw: calls.append(_n) or _f(self, *a, **kw))
    compiled = torch.compile(_softcap_model, backend=aot_autograd(fw_compiler=recorder("forward"),
                                                                  bw_compiler=recorder("backward")), fullgraph=True)
    q, k, v = qkv(requires_grad=True)
    compiled(q, k, v).float().sum().backward()
    assert torch.ops.attnjit.attention.default in targets["forward"], targets["forward"]
    assert torch.ops.attnjit.attention_backward.default in targets["backward"], targets["backward"]
    assert calls.count("_op_forward") == 1 and calls.count("_op_backward") == 1 and "_call_training" not in calls, calls


@needs_inductor
def test_compile_new_sequence_length():
    """A second length recompiles (dynamo then makes the shapes dynamic); results stay eager's."""
    compiled = torch.compile(_softcap_model, fullgraph=True)
    with torch.no_grad():
        for n in (N, N // 2 + 8, N * 2):
            q = torch.randn(B, H, n, D, device=DEVICE, dtype=torch.bfloat16)
            k = torch.randn(B, H, n + 3, D, device=DEVICE, dtype=torch.bfloat16)
            v = torch.randn(B, H, n + 3, D, device=DEVICE, dtype=torch.bfloat16)
            assert_same(compiled(q, k, v), _softcap_model(q, k, v), f"length {n}")


def test_explain_reports_no_graph_break():
    q, k, v = qkv()
    explanation = torch._dynamo.explain(_softcap_model)(q, k, v)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


BIAS = None  # a module global read by bias_global


def bias_global(score, b, h, q_idx, kv_idx):
    return score + BIAS[b, h, q_idx, kv_idx]


@needs_inductor
def test_compile_fullgraph_captured_bias_gradients_and_updates():
    global BIAS
    BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32, requires_grad=True)
    fn = attnjit.compile(bias_global, causal=True)

    def model(q, k, v):
        return fn(q, k, v) * 1.0

    compiled = torch.compile(model, fullgraph=True)
    q, k, v = qkv()
    w = torch.randn(B, H, N, D, device=DEVICE, dtype=torch.bfloat16).float()
    grads = {}
    for label, f in (("eager", model), ("compiled", compiled)):
        BIAS.grad = None
        ql, kl, vl = leaves(q, k, v)
        out = f(ql, kl, vl)
        (out.float() * w).sum().backward()
        grads[label] = (out.detach(), ql.grad, kl.grad, vl.grad, BIAS.grad.clone())
    for a, b, which in zip(grads["compiled"], grads["eager"], ("out", "dq", "dk", "dv", "d bias")):
        assert_same(a, b, which)

    # the compiled graph reads the captured tensor at every call: in place and rebound
    with torch.no_grad():
        BIAS.mul_(-3.0)
        assert_same(compiled(q, k, v), model(q, k, v), "after an in-place update")
        BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32)
        assert_same(compiled(q, k, v), model(q, k, v), "after rebinding")


@needs_inductor
def test_compile_float_scalar_change_gives_the_new_value():
    """A Python float is a runtime scalar for attnjit; under torch.compile dynamo guards on it
    (a change recompiles, as for any Python float a compiled model reads): results follow it."""
    global CAP
    fn = attnjit.compile(softcap_global, causal=True)
    compiled = torch.compile(lambda q, k, v: fn(q, k, v), fullgraph=True)
    q, k, v = qkv()
    try:
        with torch.no_grad():
            first = compiled(q, k, v)
            assert_same(first, fn(q, k, v), "cap 20")
            CAP = 3.0
            second = compiled(q, k, v)
            assert_same(second, fn(q, k, v), "cap 3")
            assert not torch.equal(first, second)
    finally:
        CAP = 20.0


WINDOW = 64  # an int constant of the traced mask: baked into the kernel, guarded


def window_mask(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) & (kv_idx > q_idx - WINDOW)


@needs_inductor
def test_compile_int_constant_and_captured_dtype_changes_recompile():
    global WINDOW, BIAS
    BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32)
    fn = attnjit.compile(bias_global, mask=window_mask)
    compiled = torch.compile(lambda q, k, v: fn(q, k, v), fullgraph=True)
    q, k, v = qkv()
    try:
        with torch.no_grad():
            first = compiled(q, k, v)
            assert_same(first, fn(q, k, v), "window 64")
            WINDOW = 16  # eager traces again; the compiled call fails a guard and recompiles
            assert_same(compiled(q, k, v), fn(q, k, v), "window 16")
            assert not torch.equal(first, fn(q, k, v))
            BIAS = BIAS.to(torch.bfloat16)  # a new dtype: a new trace (and kernel) both ways
            assert_same(compiled(q, k, v), fn(q, k, v), "bf16 bias")
    finally:
        WINDOW = 64


@needs_inductor
def test_compile_gqa_lse_sinks_with_gradients():
    q, k, v = qkv(Hkv=HKV)
    sinks = torch.randn(H, device=DEVICE, dtype=torch.float32)

    def model(q, k, v, sinks):
        out, lse = attnjit.attention(q, k, v, mask=mods.causal_mask, enable_gqa=True, return_lse=True, sinks=sinks)
        return out, lse

    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for a, b, which in zip(compiled(q, k, v, sinks), model(q, k, v, sinks), ("out", "lse")):
            assert_same(a, b, which)
    results = {}
    w = torch.randn(B, H, N, D, device=DEVICE).to(torch.bfloat16).float()
    for label, f in (("eager", model), ("compiled", compiled)):
        ql, kl, vl, sl = leaves(q, k, v, sinks)
        out, lse = f(ql, kl, vl, sl)
        assert not lse.requires_grad
        (out.float() * w).sum().backward()
        results[label] = (out.detach(), lse, ql.grad, kl.grad, vl.grad, sl.grad)
    for a, b, which in zip(results["compiled"], results["eager"], ("out", "lse", "dq", "dk", "dv", "d sinks")):
        assert_same(a, b, which)


# ---- CUDA graphs -----------------------------------------------------------------------------

TEMPERATURE = None


def graph_mod(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh((score + BIAS[b, h, q_idx, kv_idx]) * TEMPERATURE / CAP)


def _warm_up(step, iterations=3):
    """As torch.cuda.graph's documentation asks: a few eager runs on a side stream (here they
    also compile attnjit's kernels: NVRTC must not run during capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(iterations):
            step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def test_cuda_graph_capture_of_more_work_items_than_sms():
    """More (query tile, head, batch) items than SMs: on sm_90a the eager call runs the persistent
    grid, whose per-stream work counter is zeroed synchronously when first made. Capture on a
    stream that never launched attnjit before must not do that (it would break the capture):
    the captured launch takes one CTA an item, and replay gives the eager bits."""
    fn = attnjit.compile(mods.softcap(20.0), causal=True)
    shape = (2, 16, 1024, 64)  # 2 x 16 x 8 query tiles of 128 rows: 256 items
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    eager = fn(q, k, v)  # compiles the kernel outside the capture (NVRTC must not run in it)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # its own capture stream: new to attnjit
        static_out = fn(q, k, v)
    graph.replay()
    torch.cuda.synchronize()
    assert_same(static_out, eager, "replay of a captured launch with more work items than SMs")
    for t in (q, k, v):
        t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    assert_same(static_out, fn(q, k, v), "replay after updating q, k, v in place")


def test_cuda_graph_replay_reads_updated_tensors_and_keeps_float_scalars():
    global BIAS, TEMPERATURE, CAP
    BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32)
    TEMPERATURE = torch.tensor(1.0, device=DEVICE)  # 0-dim: a captured tensor, updatable in place
    fn = attnjit.compile(graph_mod, causal=True)
    q, k, v = qkv()
    _warm_up(lambda: fn(q, k, v))
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            static_out = fn(q, k, v)
        with torch.no_grad():
            for t in (q, k, v):
                t.copy_(torch.randn_like(t))
            BIAS.copy_(torch.randn_like(BIAS))
            TEMPERATURE.fill_(0.5)
        graph.replay()
        torch.cuda.synchronize()
        assert_same(static_out, fn(q, k, v), "replay after updating q, k, v, a bias and a 0-dim tensor in place")

        # A Python float is baked into the captured launch: replay keeps the value at capture.
        expected_at_capture = fn(q, k, v)
        CAP = 2.0
        graph.replay()
        torch.cuda.synchronize()
        assert_same(static_out, expected_at_capture, "replay after changing a Python float")
        assert not torch.equal(static_out, fn(q, k, v)), "the new float should change eager results"
    finally:
        CAP = 20.0


def test_cuda_graph_forward_and_backward():
    global BIAS, TEMPERATURE
    BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32)
    TEMPERATURE = torch.tensor(1.0, device=DEVICE)
    fn = attnjit.compile(graph_mod, causal=True)
    q, k, v = qkv(requires_grad=True)
    w = torch.randn(B, H, N, D, device=DEVICE).to(torch.bfloat16)

    def step():
        out = fn(q, k, v)
        (out.float() * w.float()).sum().backward()
        return out

    _warm_up(step)
    for t in (q, k, v):
        t.grad = None  # allocated again during capture, from the graph's pool
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step()
    with torch.no_grad():
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
        BIAS.copy_(torch.randn_like(BIAS))
    graph.replay()
    torch.cuda.synchronize()
    qe, ke, ve = leaves(q, k, v)
    out_e = fn(qe, ke, ve)
    (out_e.float() * w.float()).sum().backward()
    assert_same(static_out, out_e.detach(), "replayed out")
    for a, b, which in ((q.grad, qe.grad, "dq"), (k.grad, ke.grad, "dk"), (v.grad, ve.grad, "dv")):
        assert_same(a, b, f"replayed {which}")


@needs_inductor
def test_cuda_graph_of_a_torch_compiled_model():
    global BIAS, TEMPERATURE
    BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32)
    TEMPERATURE = torch.tensor(1.0, device=DEVICE)
    fn = attnjit.compile(graph_mod, causal=True)
    compiled = torch.compile(lambda q, k, v: fn(q, k, v), fullgraph=True)
    q, k, v = qkv()
    with torch.no_grad():
        _warm_up(lambda: compiled(q, k, v))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = compiled(q, k, v)
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
        BIAS.copy_(torch.randn_like(BIAS))
        TEMPERATURE.fill_(2.0)
        graph.replay()
        torch.cuda.synchronize()
        assert_same(static_out, fn(q, k, v), "replay of the torch.compile'd model")


@needs_inductor
def test_compile_reduce_overhead_mode():
    """mode="reduce-overhead": inductor's own CUDA graphs around the attnjit op."""
    global BIAS, TEMPERATURE
    BIAS = torch.randn(B, H, N, N, device=DEVICE, dtype=torch.float32)
    TEMPERATURE = torch.tensor(1.0, device=DEVICE)
    fn = attnjit.compile(graph_mod, causal=True)
    compiled = torch.compile(lambda q, k, v: fn(q, k, v) + 0, mode="reduce-overhead", fullgraph=True)
    q, k, v = qkv()
    with torch.no_grad():
        for step in range(4):
            for t in (q, k, v):
                t.copy_(torch.randn_like(t))
            BIAS.copy_(torch.randn_like(BIAS))
            got = compiled(q, k, v).clone()
            assert_same(got, fn(q, k, v), f"reduce-overhead step {step}")


@needs_inductor
def test_compile_when_attnjit_was_imported_before_torch():
    """Imported before torch, attnjit registers its ops when dynamo first meets a call."""
    code = """if True:
        import attnjit, torch
        from attnjit import mods
        SOFTCAP = mods.softcap(20.0)
        def model(q, k, v):
            return attnjit.attention(q, k, v, score_mod=SOFTCAP, causal=True)
        q, k, v = (torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        out = torch.compile(model, fullgraph=True)(q, k, v)
        assert torch.equal(out, model(q, k, v))
        print("ok")
    """
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(attnjit.__file__)),
                                                                  os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def _gated_model(q, k, v, g):
    return attnjit.attention(q, k, v, causal=True, gate=g)


@needs_inductor
def test_compile_fullgraph_with_a_gate_matches_eager():
    # The output gate goes through the torch ops too, its gradient included.
    q, k, v = qkv()
    g = torch.randn(B, H, N, D, device=DEVICE, dtype=torch.bfloat16)
    compiled = torch.compile(_gated_model, fullgraph=True)
    qe, ke, ve, ge = leaves(q, k, v, g)
    qc, kc, vc, gc = leaves(q, k, v, g)
    w = torch.randn(B, H, N, D, device=DEVICE, dtype=torch.bfloat16)
    out_e = _gated_model(qe, ke, ve, ge)
    out_c = compiled(qc, kc, vc, gc)
    assert_same(out_c, out_e, "gated out")
    (out_e.float() * w).sum().backward()
    (out_c.float() * w).sum().backward()
    for a, b, which in ((qc, qe, "dq"), (vc, ve, "dv"), (gc, ge, "d gate")):
        assert_same(a.grad, b.grad, which)


GATE_BIAS = torch.randn(1, H, N, N, device=DEVICE, dtype=torch.bfloat16).requires_grad_()  # read at batch 0


def _gate_bias_mod(score, b, h, q_idx, kv_idx):
    return score + GATE_BIAS[0, h, q_idx, kv_idx]


GATED_BIASED = attnjit.compile(_gate_bias_mod, enable_gqa=True)


def _gated_biased_model(q, k, v, g):
    return GATED_BIASED(q, k, v, gate=g)


@needs_inductor
def test_compile_fullgraph_broadcast_gate_and_captured_bias_gradients_match_eager():
    # A compiled callable with a captured pair bias and a gate broadcast over the batch and the
    # rows ([1, H, 1, D]): both require grad. The gate is materialised inside the graph and its
    # gradient summed back by autograd (eager) or the compiled graph (its own reduction: equal
    # within rounding); q, k, v and the bias (summed over the batch by attnjit) are bit-equal.
    q, k, v = qkv(Hkv=HKV)
    g = torch.randn(1, H, 1, D, device=DEVICE, dtype=torch.bfloat16)
    w = torch.randn(B, H, N, D, device=DEVICE, dtype=torch.bfloat16)
    compiled = torch.compile(_gated_biased_model, fullgraph=True)
    grads = []
    for model in (_gated_biased_model, compiled):
        GATE_BIAS.grad = None
        leaves_ = leaves(q, k, v, g)
        out = model(*leaves_)
        assert out.shape == (B, H, N, D)
        (out.float() * w).sum().backward()
        grads.append((out.detach(), *(t.grad for t in leaves_), GATE_BIAS.grad.clone()))
    (out_e, dq_e, dk_e, dv_e, dg_e, db_e), (out_c, dq_c, dk_c, dv_c, dg_c, db_c) = grads
    assert_same(out_c, out_e, "gated biased out")
    for a, b, which in ((dq_c, dq_e, "dq"), (dk_c, dk_e, "dk"), (dv_c, dv_e, "dv"), (db_c, db_e, "d bias")):
        assert_same(a, b, which)
    assert dg_c.shape == g.shape
    torch.testing.assert_close(dg_c.float(), dg_e.float(), atol=2e-2 * dg_e.float().abs().max().item(), rtol=2e-2)
