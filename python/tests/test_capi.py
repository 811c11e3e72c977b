"""The package against libattnjit_c.so without a GPU: every traced spec is accepted by
attnjit_spec_from_json (and prints back as the same text), compiling for sm_90a works
through the C API, and failed statuses become the right exceptions with the C message.

Skips when the library is not found, unless ATTNJIT_LIBRARY names it (then it must load)."""
import ctypes
import json
import os

import pytest

import attnjit
from attnjit import SpecError, TensorPlaceholder as P, capi, mods, ops
from attnjit import _library
from attnjit._capi_types import CLaunchArgs
from library_or_skip import current_arch
from attnjit.errors import STATUS_ENVIRONMENT, STATUS_INVALID_ARGUMENT, STATUS_PARSE


def _library_or_skip():
    if os.environ.get("ATTNJIT_LIBRARY"):
        return _library.load()
    try:
        return _library.load()
    except attnjit.LibraryNotFoundError as err:
        pytest.skip(f"libattnjit_c.so not built: {err}")


@pytest.fixture(scope="module", autouse=True)
def library():
    return _library_or_skip()


def _alibi_softcap():
    slopes = P("f32", 1)
    cap = 30.0

    def mod(score, b, h, q_idx, kv_idx):
        biased = score + slopes[h] * (kv_idx - q_idx)
        return cap * ops.tanh(biased / cap)
    return mod


def _document_window():
    doc = P("i64", 2)
    window = 256

    def mask(b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        return (doc[b, q_idx] == doc[b, kv_idx]) & (d >= 0) & (d < window)
    return mask


def _floor_div_blocks(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx + 3) // 64 == 0  # not provably >= 0: the exact floor is spelled out


def _every_operator(score, b, h, q_idx, kv_idx, q_len, kv_len, kv_head):
    x = ops.exp(score) - ops.exp2(score) + ops.log(ops.abs(score) + 1.0) * ops.log2(2.0 + score * score)
    x = x + ops.sigmoid(score) * ops.sqrt(q_len) + ops.rsqrt(kv_len + 1) - ops.floor(score) + ops.ceil(score)
    x = x + ops.sin(score) * ops.cos(score) + ops.minimum(score, 1.0) + ops.maximum(score, -1.0)
    x = x + ops.pow(ops.abs(score), 1.5) + (q_idx % 7) + (kv_idx // 3) + kv_head + ops.to_float(h != 0)
    return ops.where((q_idx >= kv_idx) | ~(b == 1), x, -ops.inf) + (score // 2.0) + (score % 3.0)


# (id, score_mod, mask, causal): every ready-made modifier and a few written inline
SPECS = [
    ("plain", None, None, False),
    ("causal", None, None, True),
    ("causal_mask", None, mods.causal_mask, False),
    ("causal_bottom_right", None, mods.causal_mask_bottom_right, False),
    ("sliding_window", None, mods.sliding_window(128), False),
    ("sliding_window_bottom_right", None, mods.sliding_window(64, bottom_right=True), False),
    ("prefix_lm", None, mods.prefix_lm(32), False),
    ("prefix_lm_tensor", None, mods.prefix_lm(P("i32", 1)), False),
    ("document", None, mods.document_mask(P("i32", 2)), False),
    ("document_two", None, mods.document_mask(P("i32", 2), P("i32", 2)), True),
    ("softcap", mods.softcap(30.0), None, True),
    ("alibi", mods.alibi(P("f32", 1)), None, True),
    ("bias", mods.bias(P("bf16", 4)), None, False),
    ("relative_position_bias", mods.relative_position_bias(P("f32", 2), 16), None, False),
    ("compose", mods.compose(mods.softcap(20.0), mods.alibi(P("f32", 1))), None, True),
    ("and_or", None, mods.and_masks(mods.document_mask(P("i64", 2)),
                                     mods.or_masks(mods.causal_mask, mods.prefix_lm(8))), False),
    ("alibi_softcap_inline", _alibi_softcap(), None, True),
    ("document_window_inline", None, _document_window(), False),
    ("floor_div", None, _floor_div_blocks, False),
    ("bool_tensor", None, (lambda keep: lambda b, h, q, kv: keep[b, q, kv])(P("bool", 3)), False),
    ("zero_dim", (lambda t: lambda s, b, h, q, kv: s / t)(P("f32", 0)), None, False),
    ("every_operator", _every_operator, None, False),
]


@pytest.mark.parametrize("name,score_mod,mask,causal", SPECS, ids=[s[0] for s in SPECS])
def test_spec_is_accepted_and_prints_back_the_same(name, score_mod, mask, causal):
    text = attnjit.spec_json(score_mod, mask, causal=causal, dtype="f16", head_dim=64)
    spec = capi.Spec.from_json(text)
    ours, theirs = json.loads(text), json.loads(spec.to_json())
    assert theirs["score_mod"] == ours["score_mod"]
    assert theirs["mask"] == ours["mask"]
    traced = attnjit.trace(score_mod, mask, causal)
    assert spec.tensors() == [(t.name, t.dtype, t.rank) for t in traced.tensors]
    assert spec.scalars() == [(s.name, False) for s in traced.scalars]


# Few distinct kernels: each cold NVRTC compile takes about a second.
COMPILED = [s for s in SPECS if s[0] in ("plain", "softcap", "document_window_inline", "every_operator")]


@pytest.mark.parametrize("name,score_mod,mask,causal", COMPILED, ids=[s[0] for s in COMPILED])
def test_compiles_for_sm90a_without_a_gpu(name, score_mod, mask, causal):
    text = attnjit.spec_json(score_mod, mask, causal=causal, dtype="bf16", head_dim=128, return_lse=True)
    kernel = capi.Kernel(capi.Spec.from_json(text), "sm_90a")
    assert kernel.arch == "sm_90a"
    assert "__global__" in kernel.source
    assert kernel.compile_seconds >= 0
    assert kernel.spec.returns_lse
    again = capi.Kernel(capi.Spec.from_json(text), "sm_90a")  # the memory cache
    assert again.compile_seconds == 0


def test_mainloop_option_picks_the_forward_loop():
    text = attnjit.spec_json(causal=True, dtype="bf16", head_dim=128)
    assert "MainloopKind::sm90" in capi.Kernel(capi.Spec.from_json(text), "sm_90a").source  # the default there
    assert "MainloopKind::sm80" in capi.Kernel(capi.Spec.from_json(text), "sm_90a", mainloop="sm80").source
    assert "MainloopKind::sm80" in capi.Kernel(capi.Spec.from_json(text), "sm_80").source
    with pytest.raises(SpecError) as info:
        capi.Kernel(capi.Spec.from_json(text), "sm_80", mainloop="sm90")
    assert info.value.status == STATUS_INVALID_ARGUMENT and "runs the forward on sm_90a" in info.value.message
    with pytest.raises(ValueError, match="mainloop 'sm100'"):
        capi.Kernel(capi.Spec.from_json(text), "sm_90a", mainloop="sm100")
    with pytest.raises(ValueError, match="mainloop 'wgmma'"):
        attnjit.compile(causal=True, mainloop="wgmma")


def test_autotune_option_reaches_the_c_api():
    """autotune= goes through attnjit_compile's options; compiling only (no GPU to time on), the
    kernel is the default one; a value other than None, True, False is refused here."""
    text = attnjit.spec_json(causal=True, dtype="bf16", head_dim=128)
    for autotune in (None, True, False):
        kernel = capi.Kernel(capi.Spec.from_json(text), "sm_90a", autotune=autotune)
        assert "MainloopKind::sm90" in kernel.source
    assert capi._compile_options("sm_90a", None, autotune=True).autotune == 1
    assert capi._compile_options("sm_90a", None, autotune=False).autotune == 2
    with pytest.raises(ValueError, match="autotune 'yes'"):
        attnjit.compile(causal=True, autotune="yes")


def test_mainloop_option_reaches_the_backward():
    text = attnjit.spec_json(causal=True, dtype="bf16", head_dim=64, return_lse=True)
    for loop in ("sm80", "sm90"):
        assert capi.Backward(capi.Spec.from_json(text), "sm_90a", mainloop=loop).handle
    with pytest.raises(SpecError) as info:
        capi.Backward(capi.Spec.from_json(text), "sm_80", mainloop="sm90")
    assert info.value.status == STATUS_INVALID_ARGUMENT and "runs the forward on sm_90a" in info.value.message


def test_backward_compiles_for_sm90a_without_a_gpu():
    text = attnjit.spec_json(attnjit.mods.softcap(20.0), causal=True, dtype="bf16", head_dim=64, return_lse=True)
    backward = capi.Backward(capi.Spec.from_json(text), "sm_90a")
    assert backward.handle
    assert backward.can_launch == (current_arch() == "sm_90a")  # it launches only on an sm_90a GPU
    without_lse = attnjit.spec_json(dtype="bf16", head_dim=64)
    with pytest.raises(SpecError) as info:
        capi.Backward(capi.Spec.from_json(without_lse), "sm_90a")
    assert info.value.status == STATUS_INVALID_ARGUMENT and "return_lse" in info.value.message


def _spec_text(score_mod, tensors):
    import json
    return json.dumps({"format": "attnjit.spec/1", "dtype": "bf16", "head_dim_qk": 64, "head_dim_v": 64,
                       "return_lse": True, "scalars": {"cap": "float"},
                       "tensors": {n: {"dtype": d, "rank": r} for n, (d, r) in tensors.items()},
                       "score_mod": score_mod})


def test_backward_with_captured_tensor_gradients_compiles_and_refuses_what_it_cannot():
    import ctypes
    from attnjit._capi_types import CCompileOptions, CGradArgs
    # The ctypes mirrors have the C structs' sizes (the library refuses other sizes).
    assert ctypes.sizeof(CCompileOptions) == 64 and ctypes.sizeof(CGradArgs) == 8 + 4 * 144 + 24
    text = _spec_text("cap * tanh((score + bias[b, h, q_idx, kv_idx] + slopes[h] * float(kv_idx - q_idx)) / cap)",
                      {"bias": ("bf16", 4), "slopes": ("f32", 1)})
    backward = capi.Backward(capi.Spec.from_json(text), "sm_80", grads=("bias", "cap", "slopes"))
    assert backward.handle
    rel = _spec_text("score + table[h, clamp(kv_idx - q_idx, -8, 8) + 8] + cap", {"table": ("f32", 2)})
    assert capi.Backward(capi.Spec.from_json(rel), "sm_80", grads=("table", "cap")).handle
    per_key = _spec_text("score + kv_bias[h, kv_idx] + q_bias[b, h, q_idx] + cap",
                         {"kv_bias": ("f32", 2), "q_bias": ("f32", 3)})
    assert capi.Backward(capi.Spec.from_json(per_key), "sm_80", grads=("kv_bias", "q_bias")).handle
    gathered = _spec_text("score + kv_bias[h, q_idx + kv_idx] + cap", {"kv_bias": ("f32", 2)})
    assert capi.Backward(capi.Spec.from_json(gathered), "sm_80", grads=("kv_bias",)).handle
    two = _spec_text("score + kv_bias[q_idx + kv_idx, kv_idx - q_idx + 40] + cap", {"kv_bias": ("f32", 2)})
    with pytest.raises(SpecError) as info:
        capi.Backward(capi.Spec.from_json(two), "sm_80", grads=("kv_bias",))
    assert "in more than one dimension" in info.value.message and "'kv_bias'" in info.value.message
    with pytest.raises(SpecError) as info:
        capi.Backward(capi.Spec.from_json(text), "sm_80", grads=("nope",))
    assert "a gradient was asked for 'nope'" in info.value.message


@pytest.mark.parametrize("sinks_dtype", ["f32", "bf16"])
def test_sinks_spec_is_accepted_and_its_backward_compiles(sinks_dtype):
    # The sinks tensor sorts among the captured tensors by its name; a captured tensor
    # already named "sinks" pushes it to "sinks_1".
    sinks = P("f32", 1)

    def mod(score, b, h, q_idx, kv_idx):
        return score + sinks[h]
    text = attnjit.spec_json(mod, causal=True, dtype="bf16", head_dim=64, return_lse=True, sinks_dtype=sinks_dtype)
    doc = json.loads(text)
    assert doc["sinks"] == "sinks_1" and doc["tensors"]["sinks_1"] == {"dtype": sinks_dtype, "rank": 1}
    spec = capi.Spec.from_json(text)
    assert spec.tensors() == [("sinks", "f32", 1), ("sinks_1", sinks_dtype, 1)]
    assert json.loads(spec.to_json())["sinks"] == "sinks_1"
    backward = capi.Backward(spec, "sm_90a")
    assert backward.handle
    with pytest.raises(SpecError, match="sink logits"):
        attnjit.spec_json(sinks_dtype="i32")


def test_gate_and_score_conv_specs_are_accepted():
    # The structural tensors sort among the captured ones by name; the C API reads them back.
    gate = P("bf16", 4)

    def mod(score, b, h, q_idx, kv_idx):
        return score + gate[b, h, q_idx, kv_idx]
    text = attnjit.spec_json(mod, dtype="bf16", head_dim=64, return_lse=True, gate=True)
    doc = json.loads(text)
    assert doc["gate"] == "gate_1" and doc["tensors"]["gate_1"] == {"dtype": "bf16", "rank": 4}
    spec = capi.Spec.from_json(text)
    assert spec.tensors() == [("gate", "bf16", 4), ("gate_1", "bf16", 4)]
    assert capi.Backward(spec, "sm_90a").handle  # the gate's backward compiles
    conv = attnjit.spec_json(dtype="f16", head_dim=128, score_conv=(6, 11, "f32"))
    assert json.loads(conv)["score_conv"] == {"tensor": "score_conv", "c_q": 6, "c_k": 11}
    spec = capi.Spec.from_json(conv)
    assert spec.tensors() == [("score_conv", "f32", 3)]
    assert capi.Kernel(spec, "sm_90a").handle  # the convolution's forward compiles
    with pytest.raises(SpecError, match="c_k"):
        capi.Spec.from_json(attnjit.spec_json(dtype="f16", head_dim=128, score_conv=(6, 10, "f32")))


def test_evoformer_callables_specs_and_backwards_compile():
    # evoformer_attention's score_mod: a mask bias read per (batch row, key), a pair bias
    # read at batch 0 (summed over the MSA rows by the backward), the output gate.
    from attnjit import evoformer
    pattern = ((True, False, False, True), (False, True, True, True))
    fn, _ = evoformer._callable(pattern, ("bf16", "f32"))
    assert fn.traced.score_mod == "score + t0[b, 0, 0, kv_idx] + t1[0, h, q_idx, kv_idx]"
    text = fn.spec_json("bf16", 32, gate=True)
    doc = json.loads(text)
    assert doc["gate"] == "gate" and doc["tensors"] == {"gate": {"dtype": "bf16", "rank": 4},
                                                        "t0": {"dtype": "bf16", "rank": 4},
                                                        "t1": {"dtype": "f32", "rank": 4}}
    spec = capi.Spec.from_json(fn.spec_json("bf16", 64, gate=True).replace('"return_lse": false',
                                                                           '"return_lse": true'))
    for grads in ((), ("t1",), ("t0", "t1"), ("gate", "t1")):
        assert capi.Backward(spec, "sm_90a", grads=grads).handle, grads
    assert evoformer._callable(pattern, ("bf16", "f32"))[0] is fn  # cached
    none, _ = evoformer._callable((), ())
    assert none.traced.score_mod is None  # no biases: plain attention (with the gate)


def test_compile_options_reach_the_c_api():
    spec = capi.Spec.from_json(attnjit.spec_json())
    with pytest.raises(SpecError) as info:
        capi.Kernel(spec, "sm_90a", tile={"block_m": 7, "block_n": 64, "warps": 4, "stages": 1})
    assert info.value.status == STATUS_INVALID_ARGUMENT and "block_m" in info.value.message
    with pytest.raises(ValueError, match="tile option"):
        capi.Kernel(spec, "sm_90a", tile={"rows": 64})


def test_parse_error_is_a_spec_error_with_line_and_column():
    bad = attnjit.spec_json(mods.softcap(30.0)).replace("tanh(", "tanhh(")
    with pytest.raises(SpecError) as info:
        capi.Spec.from_json(bad)
    err = info.value
    assert err.status == STATUS_PARSE and err.status_name == "ATTNJIT_ERROR_PARSE"
    assert "attnjit_spec_from_json" in err.message and "tanhh" in err.message
    assert "spec:14:" in err.message
    assert isinstance(err, ValueError)


def test_invalid_specs_are_spec_errors():
    for text, fragment in [
        (attnjit.spec_json(head_dim=44), "head dim 44"),
        (attnjit.spec_json().replace('"scalars": {}', '"scalars": {"unused": "float"}'), "unused"),
        (attnjit.spec_json(scale=-0.5), "negative scale"),
        ("{", "invalid JSON"),
    ]:
        with pytest.raises(SpecError) as info:
            capi.Kernel(capi.Spec.from_json(text), "sm_90a")
        assert info.value.status in (STATUS_PARSE, STATUS_INVALID_ARGUMENT)
        assert fragment in info.value.message, info.value.message


def test_environment_errors():
    spec = capi.Spec.from_json(attnjit.spec_json())
    with pytest.raises(attnjit.RuntimeEnvironmentError) as info:  # an arch this NVRTC cannot target
        capi.Kernel(spec, "sm_999")
    assert info.value.status == STATUS_ENVIRONMENT and "cannot compile for sm_999" in info.value.message
    with pytest.raises(attnjit.SpecError) as info:  # one older than attnjit supports: the caller's mistake
        capi.Kernel(spec, "sm_12")
    assert info.value.status == STATUS_INVALID_ARGUMENT and "attnjit supports sm_80" in info.value.message


def test_launch_errors_are_argument_errors():
    kernel = capi.Kernel(capi.Spec.from_json(attnjit.spec_json()), "sm_90a")
    args = CLaunchArgs()
    args.struct_size = ctypes.sizeof(CLaunchArgs)
    status = capi.lib().attnjit_launch(kernel.handle, ctypes.addressof(args), None)
    with pytest.raises(attnjit.ArgumentError) as info:
        capi.check(status, launching=True)
    assert info.value.status == STATUS_INVALID_ARGUMENT and "attnjit_launch" in info.value.message


def test_missing_library_lists_where_it_looked(monkeypatch):
    monkeypatch.setenv("ATTNJIT_LIBRARY", "/nonexistent/libattnjit_c.so")
    with pytest.raises(attnjit.LibraryNotFoundError, match="/nonexistent/libattnjit_c.so"):
        _library.find()
    monkeypatch.delenv("ATTNJIT_LIBRARY")
    looked = [path for _, path in _library.candidates()]
    assert any(p.endswith(os.path.join("attnjit", "lib", "libattnjit_c.so")) for p in looked)
    assert any(os.path.join("capi", "libattnjit_c.so") in p for p in looked)


def test_version():
    assert capi.version().count(".") == 2


def test_launch_arguments_pass_every_c_check_with_a_fake_torch():
    """compile()(q, k, v) end to end without a GPU: launch_packing_check.py runs the call
    path with fake_torch, and each call must stop only at "cannot launch"."""
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_packing_check.py")
    # No GPU for the subprocess even on a GPU machine: the fake tensors' pointers must
    # never reach a real launch.
    env = dict(os.environ, ATTNJIT_LIBRARY=_library.load().attnjit_path, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split("\n")
    assert "ok expanded bias" in lines and "ok rebinding" in lines and "ok empty" in lines and "ok sinks" in lines
    assert "ok head dim 40" in lines and "ok head dims 8 x 72 (f32)" in lines
    assert "ok gate" in lines and "ok gate + sinks beside a captured tensor named gate" in lines
    assert "ok evoformer" in lines and "ok evoformer column through transposes" in lines
