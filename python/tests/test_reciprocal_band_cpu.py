"""The reciprocal band (reciprocal_band=(W, alpha)) without a GPU: its spec (names, sorting,
the C library parsing it and printing it back), a forward compiled for sm_90a and the
backward refused; the call path with fake_torch (reciprocal_band_check.py: alpha's forms
reach the launch past every C argument check, bad arguments are refused by Python); with
torch, the argument checks on CPU tensors, before anything needs CUDA.

The spec tests need neither torch nor the library; the others skip without the library
(unless ATTNJIT_LIBRARY names it: then it must load) or without torch."""
import json
import os
import subprocess
import sys

import pytest

import attnjit
from attnjit import SpecError, TensorPlaceholder as P, _library, capi


def _library_or_skip():
    if os.environ.get("ATTNJIT_LIBRARY"):
        return _library.load()
    try:
        return _library.load()
    except attnjit.LibraryNotFoundError as err:
        pytest.skip(f"libattnjit_c.so not built: {err}")


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
    _library_or_skip()
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


def test_forward_compiles_for_sm90a_and_the_backward_is_refused():
    _library_or_skip()
    text = attnjit.spec_json(causal=True, dtype="f16", head_dim=64, return_lse=True, reciprocal_band=(64, True))
    kernel = capi.Kernel(capi.Spec.from_json(text), "sm_90a")
    assert kernel.arch == "sm_90a" and kernel.spec.returns_lse
    with pytest.raises(SpecError, match="forward only"):
        capi.Backward(capi.Spec.from_json(text), "sm_90a")


def test_the_library_refuses_what_the_band_cannot_do():
    _library_or_skip()
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
    env = dict(os.environ, ATTNJIT_LIBRARY=_library_or_skip().attnjit_path, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split("\n")
    for section in ("alpha forms", "names", "refusals", "forward only"):
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


def test_a_band_call_that_needs_gradients_is_refused():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    q, k, v = (torch.zeros(1, 2, 16, 32, dtype=torch.float16) for _ in range(3))
    alpha = torch.zeros(1, dtype=torch.bfloat16, requires_grad=True)  # converted and expanded: still needs grad
    with pytest.raises(attnjit.ArgumentError, match="reciprocal_band's alpha requires grad") as info:
        attnjit.attention(q, k, v, reciprocal_band=(4, alpha))
    assert "torch.no_grad()" in str(info.value)
    with pytest.raises(attnjit.ArgumentError, match="q requires grad"):
        attnjit.attention(q.clone().requires_grad_(), k, v, reciprocal_band=(4, 0.5))
    bias = torch.zeros(2, requires_grad=True)
    fn = attnjit.compile(lambda score, b, h, q_idx, kv_idx: score + bias[h])
    with pytest.raises(attnjit.ArgumentError, match="captured tensor 'bias' requires grad"):
        fn(q, k, v, reciprocal_band=(4, 0.5))
    with torch.no_grad():  # no gradients asked for: the call goes on (to the CUDA check here)
        with pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            fn(q.clone().requires_grad_(), k, v, reciprocal_band=(4, alpha))
