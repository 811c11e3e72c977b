"""The reciprocal band (reciprocal_band=(W, alpha)) without a GPU: its spec (names, sorting,
the C library parsing it and printing it back), its forward and backward (d alpha asked for
or not) compiled for sm_90a; the call path with fake_torch (reciprocal_band_check.py:
alpha's forms reach the launch past every C argument check, bad arguments are refused by
Python, training calls compile the backward and its launch passes every C argument check);
with torch, the argument checks on CPU tensors, before anything needs CUDA, and the autograd
plumbing of d alpha with a fake backward launch.

The spec tests need neither torch nor the library; the others skip without the library
(unless ATTNJIT_LIBRARY names it: then it must load) or without torch."""
import json
import os
import subprocess
import sys

import pytest

import attnjit
from library_or_skip import load_library_or_skip
from attnjit import SpecError, TensorPlaceholder as P, _library, capi


# ---- the spec ------------------------------------------------------------------------------

def test_spec_json_writes_the_band():
    doc = json.loads(attnjit.spec_json(dtype="bf16", head_dim=64, reciprocal_band=(64, True)))
    assert doc["reciprocal_band"] == {"width": 64, "alpha": "reciprocal_band", "causal": True}
    assert doc["tensors"] == {"reciprocal_band": {"dtype": "f32", "rank": 1}}
    doc = json.loads(attnjit.spec_json(dtype="f16", head_dim=128, reciprocal_band=(0, False)))
    assert doc["reciprocal_band"] == {"width": 0, "alpha": "reciprocal_band", "causal": False}
    assert "reciprocal_band" not in json.loads(attnjit.spec_json(dtype="bf16", head_dim=64))


def test_band_name_is_unique_and_sorted_among_the_tensors():
    reciprocal_band, reciprocal_band_1 = P("f32", 1), P("f32", 1)  # captured tensors already named so

    def mod(score, b, h, q_idx, kv_idx):
        return score + reciprocal_band[h] + reciprocal_band_1[h]
    doc = json.loads(attnjit.spec_json(mod, causal=True, dtype="bf16", head_dim=64, sinks_dtype="f32", gate=True,
                                       reciprocal_band=(16, True)))
    assert doc["reciprocal_band"]["alpha"] == "reciprocal_band_2"
    assert doc["tensors"]["reciprocal_band_2"] == {"dtype": "f32", "rank": 1}
    assert list(doc["tensors"]) == ["gate", "reciprocal_band", "reciprocal_band_1", "reciprocal_band_2", "sinks"]


def test_compiled_callable_spec_json_with_a_band():
    fn = attnjit.compile(causal=True)
    doc = json.loads(fn.spec_json("f16", 128, 64, reciprocal_band=(5, fn.causal)))
    assert doc["reciprocal_band"] == {"width": 5, "alpha": "reciprocal_band", "causal": True}
    assert doc["head_dim_v"] == 64 and doc["mask"] == "q_idx >= kv_idx"


def test_spec_json_refuses_a_bad_width():
    for width in (-1, 2.0, True, "64"):
        with pytest.raises(SpecError, match="band width W is an int >= 0"):
            attnjit.spec_json(reciprocal_band=(width, True))


# ---- the C library -------------------------------------------------------------------------

def test_the_library_parses_the_band_and_prints_it_back():
    load_library_or_skip()
    reciprocal_band = P("f32", 1)

    def mod(score, b, h, q_idx, kv_idx):
        return score + reciprocal_band[h]
    for causal in (True, False):
        text = attnjit.spec_json(mod, dtype="bf16", head_dim=64, return_lse=True, reciprocal_band=(64, causal))
        spec = capi.Spec.from_json(text)
        assert spec.tensors() == [("reciprocal_band", "f32", 1), ("reciprocal_band_1", "f32", 1)]
        back = json.loads(spec.to_json())
        assert back["reciprocal_band"] == {"width": 64, "alpha": "reciprocal_band_1", "causal": causal}
        assert back == json.loads(text)


def test_forward_and_backward_compile_for_sm90a():
    load_library_or_skip()
    text = attnjit.spec_json(causal=True, dtype="f16", head_dim=64, return_lse=True, reciprocal_band=(64, True))
    kernel = capi.Kernel(capi.Spec.from_json(text), "sm_90a")
    assert kernel.arch == "sm_90a" and kernel.spec.returns_lse
    assert capi.Backward(capi.Spec.from_json(text), "sm_90a").handle  # d q, k, v only
    # d alpha is asked for by alpha's name in the spec, like a structural tensor's gradient
    assert capi.Backward(capi.Spec.from_json(text), "sm_90a", grads=("reciprocal_band",)).handle
    text = attnjit.spec_json(dtype="bf16", head_dim=128, return_lse=True, sinks_dtype="f32", gate=True,
                             reciprocal_band=(0, False))
    assert capi.Backward(capi.Spec.from_json(text), "sm_90a", grads=("gate", "reciprocal_band", "sinks")).handle
    # training with the band: head dims up to 128
    text = attnjit.spec_json(dtype="bf16", head_dim=256, return_lse=True, reciprocal_band=(4, False))
    with pytest.raises(SpecError, match="head dims up to 128 in the backward"):
        capi.Backward(capi.Spec.from_json(text), "sm_90a", grads=("reciprocal_band",))


def test_the_library_refuses_what_the_band_cannot_do():
    load_library_or_skip()
    with pytest.raises(SpecError, match="cannot be combined"):
        capi.Spec.from_json(attnjit.spec_json(dtype="f16", head_dim=64, score_conv=(3, 3, "f32"),
                                              reciprocal_band=(4, True)))
    with pytest.raises(SpecError, match="f16 / bf16"):  # f32 q, k, v (Python refuses a call first)
        capi.Kernel(capi.Spec.from_json(attnjit.spec_json(dtype="f32", head_dim=64, reciprocal_band=(4, True))),
                    "sm_90a")
    with pytest.raises(SpecError, match="band width W must be in"):
        capi.Spec.from_json(attnjit.spec_json(dtype="f16", head_dim=64, reciprocal_band=((1 << 30) + 1, True)))


# ---- the call path with fake_torch ---------------------------------------------------------

def test_band_calls_pass_every_c_check_with_a_fake_torch():
    """reciprocal_band_check.py runs the call path with fake_torch: each good call must stop
    only at "cannot launch", each bad one at Python's message."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reciprocal_band_check.py")
    # No GPU for the subprocess even on a GPU machine: the fake tensors' pointers must
    # never reach a real launch.
    load_library_or_skip()
    env = dict(os.environ, ATTNJIT_LIBRARY=_library.load().attnjit_path, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split("\n")
    for section in ("alpha forms", "names", "refusals", "training"):
        assert f"ok {section}" in lines, out.stdout


# ---- with torch: the argument checks on CPU tensors ----------------------------------------

def test_band_arguments_are_checked_before_cuda():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    q, k, v = (torch.zeros(2, 4, 16, 32, dtype=torch.bfloat16) for _ in range(3))
    short = torch.zeros(2, 4, 8, 32, dtype=torch.bfloat16)
    cases = [
        (0.5, "pair (W, alpha)"),
        ((-1, 0.5), "W = -1"),
        ((1.5, 0.5), "W = 1.5"),
        ((1, torch.zeros(3)), "[Hq] = [4]"),
        ((1, torch.zeros(2, 4)), "one weight per query head"),
        ((1, torch.zeros(4, dtype=torch.float64)), "must be float32"),
        ((1, "0.5"), "float or a torch.Tensor"),
    ]
    for band, fragment in cases:
        for call in (lambda b: attnjit.attention(q, k, v, reciprocal_band=b),
                     lambda b: attnjit.compile()(q, k, v, reciprocal_band=b)):
            with pytest.raises(attnjit.ArgumentError) as info:
                call(band)
            assert fragment in str(info.value), str(info.value)
    with pytest.raises(attnjit.ArgumentError, match="self-attention"):
        attnjit.attention(q, short, short, reciprocal_band=(1, 0.5))
    with pytest.raises(attnjit.ArgumentError, match="float16 / bfloat16"):
        attnjit.attention(q.float(), k.float(), v.float(), reciprocal_band=(1, 0.5))
    # good bands (a float, one element, [Hq] float32 or bf16) pass the band's checks
    for alpha in (0.5, 2, torch.tensor(0.5), torch.zeros(1), torch.zeros(4), torch.zeros(4, dtype=torch.bfloat16)):
        with pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            attnjit.attention(q, k, v, causal=True, reciprocal_band=(64, alpha))


def test_a_band_call_that_needs_gradients_goes_to_the_training_path(monkeypatch):
    """A call with a band whose q, k, v, alpha or captured tensor requires grad is no longer
    refused: it takes the autograd path (_call_training), which asks the backward for d
    alpha exactly when alpha requires grad; on CPU tensors it then stops at the CUDA check."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from attnjit import compiled

    seen = []

    def training(self, variant, q, k, v, qs, ks, vs, qst, kst, vst, device, tensors, values, scalars, grad_by_name,
                 extras, sig):
        seen.append((sorted(grad_by_name), extras[3], sig[3]))
        raise attnjit.ArgumentError("reached the training path")
    monkeypatch.setattr(compiled.CompiledAttention, "_call_training", training)
    q, k, v = (torch.zeros(1, 2, 16, 32, dtype=torch.float16) for _ in range(3))
    alpha = torch.zeros(1, dtype=torch.bfloat16, requires_grad=True)  # converted and expanded: still needs grad
    with pytest.raises(attnjit.ArgumentError, match="reached the training path"):
        attnjit.attention(q, k, v, reciprocal_band=(4, alpha))
    grads, band_alpha, band_sig = seen[-1]
    assert grads == [] and band_sig == (4, False)
    assert band_alpha.requires_grad and band_alpha.dtype == torch.float32 and tuple(band_alpha.shape) == (2,)
    assert band_alpha.stride() == (0,)  # one weight for both heads
    with pytest.raises(attnjit.ArgumentError, match="reached the training path"):
        attnjit.attention(q.clone().requires_grad_(), k, v, causal=True, reciprocal_band=(4, 0.5))
    assert not seen[-1][1].requires_grad and seen[-1][2] == (4, True)  # a float alpha: no gradient
    bias = torch.zeros(2, requires_grad=True)
    fn = attnjit.compile(lambda score, b, h, q_idx, kv_idx: score + bias[h])
    with pytest.raises(attnjit.ArgumentError, match="reached the training path"):
        fn(q, k, v, reciprocal_band=(4, 0.5))
    assert seen[-1][0] == ["bias"]
    count = len(seen)
    with torch.no_grad():  # no gradients asked for: the plain call (to the CUDA check here)
        with pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            fn(q.clone().requires_grad_(), k, v, reciprocal_band=(4, alpha))
    assert len(seen) == count


class _BandCall:
    """Stands for autograd.Call: fills d alpha (asked for by the band's name among the input
    gradients, as sinks' are) with 1, 2, ... per head, and records what was asked for."""
    grad_names, grad_values = (), ()
    extra_names = ("sinks", "gate", "score_conv", "reciprocal_band")

    def __init__(self):
        self.asked = []

    def launch(self, q, k, v, out, lse, d_o, dq, dk, dv, input_grads=()):
        import torch
        for g in (dq, dk, dv):
            g.fill_(1.0)
        d_alpha = dict(input_grads).get("reciprocal_band")
        if d_alpha is not None:
            # the C library writes d alpha as a dense [Hq] float32 buffer
            assert d_alpha.dtype == torch.float32 and d_alpha.shape == (q.shape[1],) and d_alpha.stride() == (1,)
            d_alpha.copy_(torch.arange(1, q.shape[1] + 1, dtype=torch.float32))
        self.asked.append(sorted(name for name, _ in input_grads))


def _run_band_function(alpha, qkv_grad=True):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from attnjit import autograd
    from attnjit.reciprocal_band import check_reciprocal_band

    q, k, v = (torch.randn(1, 4, 3, 8, dtype=torch.float16, requires_grad=qkv_grad) for _ in range(3))
    _, band = check_reciprocal_band((2, alpha), q, k, torch)
    call = _BandCall()
    out, _ = autograd.attention_function().apply(
        call, lambda: (torch.zeros(1, 4, 3, 8, dtype=torch.float16), torch.zeros(1, 4, 3)), q, k, v, None, None,
        None, band)
    out.float().sum().backward()
    return call, q


def test_per_head_alpha_gets_its_gradient():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    alpha = torch.zeros(4, requires_grad=True)
    call, q = _run_band_function(alpha)
    assert call.asked == [["reciprocal_band"]]
    assert torch.equal(alpha.grad, torch.tensor([1.0, 2.0, 3.0, 4.0])) and q.grad is not None


def test_one_element_alpha_gets_the_sum_over_the_heads():
    # expanded to [Hq] with stride 0: the dense [Hq] gradient is summed by ExpandBackward
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    for alpha in (torch.zeros(1, requires_grad=True), torch.tensor(0.5, requires_grad=True)):
        call, _ = _run_band_function(alpha)
        assert call.asked == [["reciprocal_band"]]
        assert alpha.grad.shape == alpha.shape and alpha.grad.item() == 10.0
    alpha = torch.zeros(1, dtype=torch.bfloat16, requires_grad=True)  # converted to f32, then expanded
    _run_band_function(alpha, qkv_grad=False)
    assert alpha.grad.dtype == torch.bfloat16 and alpha.grad.item() == 10.0


def test_frozen_or_float_alpha_asks_for_no_gradient():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    for alpha in (0.5, torch.zeros(4), torch.zeros(1)):
        call, q = _run_band_function(alpha)
        assert call.asked == [[]] and q.grad is not None


def test_the_torch_ops_backward_passes_the_band_and_returns_d_alpha():
    """torch_ops' registered backward of attnjit::attention (what aot-autograd traces under
    torch.compile), captured from _define_ops with a stand-in torch.library (any torch): it
    passes alpha and W to attnjit::attention_backward, asks for d alpha exactly when alpha
    needs a gradient, and returns it at alpha's input position."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    import types

    from attnjit import torch_ops

    registered = {}

    class Op:
        def __init__(self, fn):
            self.fn = fn

        def register_fake(self, fn):
            return fn

        def register_autograd(self, backward, setup_context):
            registered["backward"], registered["setup_context"] = backward, setup_context

    def custom_op(name, mutates_args, schema):
        return Op

    calls = []

    def attention_backward(d_out, q, k, v, out, lse, captured, scalars, sinks, gate, score_conv, band, width, plan,
                           captured_needs, sinks_needs, gate_needs, band_needs):
        calls.append((band, width, plan, list(captured_needs), sinks_needs, gate_needs, band_needs))
        grads = [torch.full(t.shape, 5.0) for t, need in zip(captured, captured_needs) if need]
        grads += [torch.full(x.shape, 6.0) for x, need in ((sinks, sinks_needs), (band, band_needs)) if need]
        return torch.ones_like(q), torch.ones_like(k), torch.ones_like(v), grads

    stand_in = types.SimpleNamespace(
        Tensor=torch.Tensor, float32=torch.float32, zeros_like=torch.zeros_like,
        library=types.SimpleNamespace(custom_op=custom_op),
        ops=types.SimpleNamespace(attnjit=types.SimpleNamespace(attention_backward=attention_backward)))
    torch_ops._define_ops(stand_in)

    class Ctx:
        def mark_non_differentiable(self, *tensors):
            pass

        def save_for_backward(self, *tensors):
            self.saved_tensors = tensors

    q, k, v = (torch.zeros(1, 4, 8, 16) for _ in range(3))
    out, lse = torch.zeros(1, 4, 8, 16), torch.zeros(1, 4, 8)
    alpha, bias, sinks = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    for band_needs, sinks_needs in ((True, True), (False, True), (True, False)):
        ctx = Ctx()
        registered["setup_context"](ctx, (q, k, v, [bias], [0.5], sinks, None, None, alpha, 64, "p1", True), (out, lse))
        ctx.needs_input_grad = (True, False, True, [True], False, sinks_needs, False, False, band_needs, False, False,
                                False)
        grads = registered["backward"](ctx, torch.ones_like(out), None)
        assert len(grads) == 12  # one per input of attnjit::attention
        assert calls[-1][:3] == (alpha, 64, "p1") and calls[-1][3:] == ([True], sinks_needs, False, band_needs)
        assert grads[8] is not None if band_needs else grads[8] is None  # d alpha at alpha's position
        if band_needs:
            assert torch.equal(grads[8], torch.full((4,), 6.0))
        assert torch.equal(grads[3][0], torch.full((4,), 5.0)) and grads[1] is None
        assert (grads[5] is not None) == sinks_needs and grads[6] is None
    ctx = Ctx()  # no band: none asked for, none returned
    registered["setup_context"](ctx, (q, k, v, [], [], None, None, None, None, -1, "p1", True), (out, lse))
    ctx.needs_input_grad = (True, True, True, [], False, False, False, False, False, False, False, False)
    grads = registered["backward"](ctx, torch.ones_like(out), None)
    assert calls[-1][0] is None and calls[-1][-1] is False and grads[8] is None
