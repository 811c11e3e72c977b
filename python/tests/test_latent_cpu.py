"""The latent projection (attnjit.latent_attention, MLA) without a GPU: its spec (the
"latent" entry, the projections' names among the captured tensors; the C library parsing it
and printing it back), its forward compiled for sm_90a, with a reciprocal band beside it too
(RA + MLA, L up to 256) and its backward, and what the library refuses (a band over L 256, L
it does not build); the call path with fake_torch (latent_check.py: good calls reach the
launch past every C argument check, bad ones are refused with their own message); with torch,
the argument checks on CPU tensors (training calls too), before anything needs CUDA.

The spec tests need neither torch nor the library; the others skip without the library
(unless ATTNJIT_LIBRARY names it: then it must load) or without torch."""
import json
import os
import subprocess
import sys

import pytest

import attnjit
from library_or_skip import current_arch, load_library_or_skip
from attnjit import SpecError, TensorPlaceholder as P, _library, capi


# ---- the spec ------------------------------------------------------------------------------

def test_spec_json_writes_the_latent_projection():
    doc = json.loads(attnjit.spec_json(causal=True, dtype="bf16", head_dim=128, head_dim_v=64, latent=256))
    assert doc["latent"] == {"dim": 256, "w_qlat": "w_qlat", "w_vup": "w_vup"}
    assert doc["tensors"] == {"w_qlat": {"dtype": "bf16", "rank": 3}, "w_vup": {"dtype": "bf16", "rank": 3}}
    assert (doc["head_dim_qk"], doc["head_dim_v"], doc["scale"]) == (128, 64, None)  # null: 1/sqrt(L)
    assert "latent" not in json.loads(attnjit.spec_json(dtype="bf16", head_dim=64))


def test_projection_names_are_unique_and_sorted_among_the_tensors():
    w_qlat, w_vup = P("f32", 1), P("f16", 1)  # captured tensors already named so

    def mod(score, b, h, q_idx, kv_idx):
        return score + w_qlat[h] + w_vup[h]
    doc = json.loads(attnjit.spec_json(mod, dtype="f16", head_dim=64, latent=64, reciprocal_band=(4, True)))
    assert doc["latent"] == {"dim": 64, "w_qlat": "w_qlat_1", "w_vup": "w_vup_1"}
    assert list(doc["tensors"]) == ["reciprocal_band", "w_qlat", "w_qlat_1", "w_vup", "w_vup_1"]
    assert doc["tensors"]["w_qlat_1"] == doc["tensors"]["w_vup_1"] == {"dtype": "f16", "rank": 3}


def test_spec_json_refuses_a_latent_dim_that_is_not_an_int():
    for dim in (64.0, True, "64"):
        with pytest.raises(SpecError, match="latent dim L is an int"):
            attnjit.spec_json(latent=dim)


# ---- the C library -------------------------------------------------------------------------

def test_the_library_parses_the_latent_projection_and_prints_it_back():
    load_library_or_skip()
    w_qlat = P("f32", 1)

    def mod(score, b, h, q_idx, kv_idx):
        return score + w_qlat[h]
    text = attnjit.spec_json(mod, causal=True, dtype="bf16", head_dim=128, head_dim_v=96, latent=512)
    spec = capi.Spec.from_json(text)  # L 512 is a valid spec (what the kernels build is another matter)
    assert spec.tensors() == [("w_qlat", "f32", 1), ("w_qlat_1", "bf16", 3), ("w_vup", "bf16", 3)]
    back = json.loads(spec.to_json())
    assert back["latent"] == {"dim": 512, "w_qlat": "w_qlat_1", "w_vup": "w_vup"}
    assert back == json.loads(text)


def test_forward_compiles_for_sm90a_and_the_library_refuses_the_rest():
    """The forward at L 64 and 256 with Dqk != Dv, and with a reciprocal band beside the
    projection (RA + MLA, L up to 256: L 64 both forms, L 256); the library's own refusals
    (SpecError, its message): a band over L 256, float32, L over what it builds
    (512 may come: then it compiles), L not a multiple of 8."""
    load_library_or_skip()
    for dt, L, D, Dv in (("f16", 64, 128, 64), ("bf16", 256, 64, 128)):
        text = attnjit.spec_json(causal=True, dtype=dt, head_dim=D, head_dim_v=Dv, latent=L)
        assert capi.Kernel(capi.Spec.from_json(text), "sm_90a").arch == "sm_90a"
    for dt, L, D, Dv, band in (("bf16", 64, 64, 64, (64, True)), ("f16", 64, 128, 64, (1, False)),
                               ("bf16", 256, 128, 96, (4, True))):
        text = attnjit.spec_json(causal=band[1], dtype=dt, head_dim=D, head_dim_v=Dv, latent=L, reciprocal_band=band)
        spec = capi.Spec.from_json(text)
        assert ("reciprocal_band", "f32", 1) in spec.tensors(), spec.tensors()
        assert capi.Kernel(spec, "sm_90a").arch == "sm_90a", f"RA + MLA at L {L}, band {band}"
    # The backward (the per-head kernels and latent_gemm), with and without the weights' gradients.
    text = attnjit.spec_json(dtype="bf16", head_dim=128, return_lse=True, latent=128)
    launches_here = current_arch() == "sm_90a"  # compiled for sm_90a, launched only on such a GPU
    assert capi.Backward(capi.Spec.from_json(text), "sm_90a").can_launch == launches_here
    assert capi.Backward(capi.Spec.from_json(text), "sm_90a", grads=("w_qlat", "w_vup")).can_launch == launches_here
    for band in ((4, True), (64, False)):  # over L 256: in Q's space (latent_gemm, then the band's forward)
        assert capi.Kernel(capi.Spec.from_json(attnjit.spec_json(causal=band[1], dtype="bf16", head_dim=128,
                                                                 head_dim_v=128, latent=512, reciprocal_band=band)),
                           "sm_90a").arch == "sm_90a"
    with pytest.raises(SpecError, match="f16 or bf16"):
        capi.Kernel(capi.Spec.from_json(attnjit.spec_json(dtype="f32", head_dim=128, latent=128)), "sm_90a")
    try:
        capi.Kernel(capi.Spec.from_json(attnjit.spec_json(dtype="bf16", head_dim=128, latent=512)), "sm_90a")
    except SpecError as err:
        assert "latent dims over" in err.message, err.message
    for L in (60, 520):
        with pytest.raises(SpecError, match="multiple of 8"):
            capi.Spec.from_json(attnjit.spec_json(dtype="bf16", head_dim=128, latent=L))


# ---- the call path with fake_torch ---------------------------------------------------------

def test_latent_calls_pass_every_c_check_with_a_fake_torch():
    """latent_check.py runs the call path with fake_torch: each good call must stop only at
    "cannot launch", each bad one at its own message (Python's or the C library's)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "latent_check.py")
    load_library_or_skip()
    # No GPU for the subprocess even on a GPU machine: fake pointers must never reach a launch.
    env = dict(os.environ, ATTNJIT_LIBRARY=_library.load().attnjit_path, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split("\n")
    for section in ("calls", "names", "refusals", "training", "library refusals"):
        assert f"ok {section}" in lines, out.stdout


# ---- with torch: the argument checks on CPU tensors ----------------------------------------

def _inputs(torch, B=2, H=4, N=16, D=32, L=64, Dv=48, dtype=None):
    dtype = dtype or torch.bfloat16
    return (torch.zeros(B, H, N, D, dtype=dtype), torch.zeros(B, N, L, dtype=dtype), torch.zeros(B, N, L, dtype=dtype),
            torch.zeros(H, D, L, dtype=dtype), torch.zeros(H, L, Dv, dtype=dtype))


def test_latent_arguments_are_checked_before_cuda():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    q, k, v, wq, wv = _inputs(torch)
    cases = [
        (dict(q=q[0]), "q is [B, Hq, Nq, Dqk]"),
        (dict(k_lat=k.view(2, 1, 16, 64).expand(2, 4, 16, 64)), "one head, shared by every query head"),
        (dict(v_lat=v.half()), "v_lat has dtype torch.float16 but q has torch.bfloat16"),
        (dict(v_lat=v[:, :8]), "must have the same shape [B, Nk, L]"),
        (dict(w_qlat=wq[:, :, :32]), "it must be [Hq, Dqk, L] = [4, 32, 64]"),
        (dict(w_vup=wv[:2]), "it must be [Hq, L, Dv] = [4, 64, Dv]"),
        (dict(w_qlat=wq.transpose(1, 2).contiguous().transpose(1, 2)), "w_qlat has strides"),
        (dict(w_vup=wv.tolist()), "w_vup must be a torch.Tensor, got list"),
    ]
    for change, fragment in cases:
        given = dict(q=q, k_lat=k, v_lat=v, w_qlat=wq, w_vup=wv)
        given.update(change)
        with pytest.raises(attnjit.ArgumentError) as info:
            attnjit.latent_attention(given.pop("q"), given.pop("k_lat"), given.pop("v_lat"), given.pop("w_qlat"),
                                     given.pop("w_vup"), causal=True)
        assert fragment in str(info.value), str(info.value)
    # good calls ([B, Nk, L] or [B, 1, Nk, L]; a score_mod and a mask; a band) reach the CUDA check
    for kv in ((k, v), (k.view(2, 1, 16, 64), v.view(2, 1, 16, 64))):
        with pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            attnjit.latent_attention(q, *kv, wq, wv, score_mod=attnjit.mods.softcap(20.0),
                                     mask=attnjit.mods.sliding_window(8), reciprocal_band=(4, 0.5))


def test_training_calls_are_checked_like_forward_ones():
    """A call whose inputs require grad takes the same checks first: CPU tensors are refused
    (the backward is run by test_latent_gpu.py), in grad mode and under no_grad alike."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    args = list(_inputs(torch))
    for i in range(5):
        given = list(args)
        given[i] = given[i].clone().requires_grad_(True)
        with pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            attnjit.latent_attention(*given)
        with torch.no_grad(), pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            attnjit.latent_attention(*given)
