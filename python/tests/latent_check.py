"""Run by test_latent_cpu.py in a subprocess, with fake_torch as torch (as
reciprocal_band_check.py): latent_attention calls must get through all of the C API's
argument checks (K and V packed as [B, 1, Nk, L], w_qlat and w_vup as the spec's tensors,
sorted among the captured ones) and stop only at "cannot launch" (kernels compiled for
sm_90a without a GPU); bad arguments must be refused by Python with their own message, and
what only the C library knows (L, the band, the projections' alignment) by the library's
message. With a reciprocal band (RA + MLA, L up to 256) good calls reach the launch too, the
band in the spec with the call's causal form; over L 256 the library refuses it. Prints one
line per group of checks."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import compile_only  # noqa: E402
import fake_torch  # noqa: E402

fake_torch.install()
import torch  # noqa: E402  (the fake)

import attnjit  # noqa: E402
from attnjit import mods  # noqa: E402

compiled_for = compile_only.install()
latent_attention = attnjit.latent_attention


def reaches_the_launch(name, call):
    try:
        call()
    except attnjit.RuntimeEnvironmentError as err:
        assert "cannot launch" in err.message, err.message
        return
    raise AssertionError(f"{name}: launched on a fake GPU?")


def rejected(name, error, fragment, call):
    try:
        call()
    except error as err:
        assert fragment in str(err), f"{name}: {err}"
        return
    raise AssertionError(f"{name}: not rejected")


def last_spec():
    return json.loads(compiled_for[-1])


def inputs(dt=torch.bfloat16, B=2, H=4, Nq=33, Nk=33, D=128, L=64, Dv=128, four_d=False):
    """q [B, H, Nq, D], k_lat / v_lat [B, Nk, L] (or [B, 1, Nk, L]), w_qlat [H, D, L], w_vup [H, L, Dv]."""
    kv = (B, 1, Nk, L) if four_d else (B, Nk, L)
    return (torch.empty(B, H, Nq, D, dtype=dt), torch.empty(*kv, dtype=dt), torch.empty(*kv, dtype=dt),
            torch.empty(H, D, L, dtype=dt), torch.empty(H, L, Dv, dtype=dt))


# ---- good calls: the spec, K / V as [B, 1, Nk, L], the projections among the tensors ------
args = inputs()
reaches_the_launch("3-D k_lat", lambda: latent_attention(*args, causal=True))
doc = last_spec()
assert doc["latent"] == {"dim": 64, "w_qlat": "w_qlat", "w_vup": "w_vup"}, compiled_for[-1]
assert doc["tensors"] == {"w_qlat": {"dtype": "bf16", "rank": 3}, "w_vup": {"dtype": "bf16", "rank": 3}}
assert (doc["head_dim_qk"], doc["head_dim_v"], doc["mask"], doc["scale"]) == (128, 128, "q_idx >= kv_idx", None)
before = len(compiled_for)
reaches_the_launch("cached", lambda: latent_attention(*args, causal=True))
reaches_the_launch("4-D k_lat, same kernel", lambda: latent_attention(*inputs(four_d=True), causal=True))
assert len(compiled_for) == before, "a second call (or the [B, 1, Nk, L] form) compiled again"
for L, D, Dv, dt in ((128, 64, 128, torch.float16), (256, 128, 64, torch.bfloat16), (200, 96, 40, torch.float16)):
    reaches_the_launch(f"L {L}, Dqk {D}, Dv {Dv}", lambda: latent_attention(
        *inputs(dt, B=1, H=3, Nq=17, Nk=300, D=D, L=L, Dv=Dv), scale=0.1))
    doc = last_spec()
    assert (doc["latent"]["dim"], doc["head_dim_qk"], doc["head_dim_v"], doc["scale"]) == (L, D, Dv, 0.1), doc
# strided views: q stored [B, N, H, D]; K the first L columns of a [B, Nk, L + 64] cache (its
# rope part after them), V the same columns (DeepSeek's absorbed MLA aliases them)
q = torch.empty(2, 33, 4, 128, dtype=torch.bfloat16).transpose(1, 2)
ckv = torch.empty(2, 33, 64 + 64, dtype=torch.bfloat16)
k_lat = fake_torch.Tensor((2, 33, 64), torch.bfloat16, ckv.stride(), 0, ckv.data_ptr())
reaches_the_launch("strided q, K = V = a slice of a cache", lambda: latent_attention(q, k_lat, k_lat, *args[3:]))
# RA + MLA (L up to 256): the band beside the projection, its causal form the call's, alpha a
# float or per head; the band's alpha sorted among the spec's tensors
for L, causal, band in ((64, True, (64, 0.5)), (64, False, (0, torch.empty(4))), (256, True, (1, -0.3)),
                        (128, False, (5000, 0.25))):
    reaches_the_launch(f"band {band[0]} at L {L}, causal {causal}", lambda: latent_attention(
        *inputs(L=L, D=64, Dv=96), causal=causal, reciprocal_band=band))
    doc = last_spec()
    assert doc["reciprocal_band"] == {"width": band[0], "alpha": "reciprocal_band", "causal": causal}, doc
    assert doc["latent"] == {"dim": L, "w_qlat": "w_qlat", "w_vup": "w_vup"}, doc
    assert list(doc["tensors"]) == ["reciprocal_band", "w_qlat", "w_vup"], doc
before = len(compiled_for)
reaches_the_launch("band, cached", lambda: latent_attention(*inputs(L=64, D=64, Dv=96), causal=True,
                                                            reciprocal_band=(64, 0.9)))
assert len(compiled_for) == before, "a new alpha compiled again"
print("ok calls")

# ---- mods and names: a softcap, a mask, captured tensors named like the projections --------
w_qlat = torch.empty(4, dtype=torch.float32)  # a captured tensor named w_qlat: the projection becomes w_qlat_1


def mod(score, b, h, q_idx, kv_idx):
    return score + w_qlat[h]


reaches_the_launch("softcap and a window", lambda: latent_attention(
    *args, score_mod=mods.softcap(20.0), mask=mods.sliding_window(8)))
doc = last_spec()
assert "tanh" in doc["score_mod"] and doc["mask"] and doc["scalars"], compiled_for[-1]
reaches_the_launch("beside a captured w_qlat", lambda: latent_attention(*args, score_mod=mod, causal=True))
doc = last_spec()
assert doc["latent"] == {"dim": 64, "w_qlat": "w_qlat_1", "w_vup": "w_vup"}, compiled_for[-1]
assert list(doc["tensors"]) == ["w_qlat", "w_qlat_1", "w_vup"], compiled_for[-1]
print("ok names")

# ---- refused by Python, before anything is compiled ---------------------------------------
A = attnjit.ArgumentError
q, k, v, wq, wv = args


def call(**change):
    given = dict(q=q, k_lat=k, v_lat=v, w_qlat=wq, w_vup=wv)
    given.update(change)
    return lambda: latent_attention(given.pop("q"), given.pop("k_lat"), given.pop("v_lat"), given.pop("w_qlat"),
                                    given.pop("w_vup"), **given)


before = len(compiled_for)
rejected("k_lat not a tensor", A, "k_lat must be a torch.Tensor, got list", call(k_lat=[1]))
rejected("q 3-D", A, "q is [B, Hq, Nq, Dqk]", call(q=torch.empty(2, 33, 128, dtype=torch.bfloat16)))
rejected("k_lat with 4 heads", A, "one head, shared by every query head",
         call(k_lat=torch.empty(2, 4, 33, 64, dtype=torch.bfloat16)))
rejected("w_vup 2-D", A, "the output projection [Hq, L, Dv]", call(w_vup=torch.empty(64, 128, dtype=torch.bfloat16)))
rejected("v_lat f16", A, "v_lat has dtype torch.float16 but q has torch.bfloat16",
         call(v_lat=torch.empty(2, 33, 64, dtype=torch.float16)))
rejected("w_vup on another device", A, "w_vup is on cuda:1 but q is on cuda:0",
         call(w_vup=torch.empty(4, 64, 128, dtype=torch.bfloat16, device=1)))
rejected("k_lat and v_lat differ", A, "must have the same shape [B, Nk, L]",
         call(v_lat=torch.empty(2, 34, 64, dtype=torch.bfloat16)))
rejected("batch", A, "batch sizes differ", call(k_lat=torch.empty(3, 33, 64, dtype=torch.bfloat16),
                                              v_lat=torch.empty(3, 33, 64, dtype=torch.bfloat16)))
rejected("no keys", A, "at least one key", call(k_lat=torch.empty(2, 0, 64, dtype=torch.bfloat16),
                                                v_lat=torch.empty(2, 0, 64, dtype=torch.bfloat16)))
rejected("w_qlat's L", A, "w_qlat has shape (4, 128, 32); it must be [Hq, Dqk, L] = [4, 128, 64]",
         call(w_qlat=torch.empty(4, 128, 32, dtype=torch.bfloat16)))
rejected("w_qlat's Dqk", A, "[Hq, Dqk, L] = [4, 128, 64]", call(w_qlat=torch.empty(4, 64, 64, dtype=torch.bfloat16)))
rejected("w_vup's heads", A, "w_vup has shape (8, 64, 128); it must be [Hq, L, Dv] = [4, 64, Dv]",
         call(w_vup=torch.empty(8, 64, 128, dtype=torch.bfloat16)))
rejected("k_lat's last dim strided", A, "k_lat has strides (2112, 1, 33): its last dimension must be contiguous",
         call(k_lat=torch.empty(2, 64, 33, dtype=torch.bfloat16).transpose(1, 2)))
rejected("w_qlat transposed", A, "w_qlat has strides (8192, 1, 128)",
         call(w_qlat=torch.empty(4, 64, 128, dtype=torch.bfloat16).transpose(1, 2)))
rejected("on the cpu", A, "must be CUDA tensors", lambda: latent_attention(*(
    torch.empty(*t.shape, dtype=t.dtype, device=-1) for t in args)))
rejected("float64", A, "attnjit takes float16, bfloat16 or float32", lambda: latent_attention(*(
    torch.empty(*t.shape, dtype=torch.float64) for t in args)))
rejected("band's alpha", A, "[Hq] = [4]", call(reciprocal_band=(4, torch.empty(3))))
rejected("band with Nq != Nk", A, "give q and k the same length (Nq == Nk)", lambda: latent_attention(
    *inputs(Nq=17, Nk=33), reciprocal_band=(4, 0.5)))
rejected("band on f32", A, "float16 / bfloat16", lambda: latent_attention(*(
    torch.empty(*t.shape, dtype=torch.float32) for t in args), reciprocal_band=(4, 0.5)))
assert len(compiled_for) == before, "a refused call compiled a kernel"
print("ok refusals")

# ---- grad mode off: inputs that require grad run the forward alone -------------------------
# (training itself records a torch.autograd node: test_latent_gpu.py runs it with real torch)
def needing_grad(t):
    t.requires_grad = True
    return t


torch.is_grad_enabled = lambda: False  # torch.no_grad()
reaches_the_launch("no grad mode", call(q=needing_grad(torch.empty(2, 4, 33, 128, dtype=torch.bfloat16))))
torch.is_grad_enabled = lambda: True
print("ok training")

# ---- RA + MLA over L 256: the library runs it in Q's space (api/latent_projection.h) -------
for causal in (True, False):
    reaches_the_launch(f"a band at L 512, causal {causal}",
                       lambda: latent_attention(*inputs(L=512), causal=causal, reciprocal_band=(4, 0.5)))
print("ok band over L 256")

# ---- refused by the C library, its message surfaced ---------------------------------------
S = attnjit.SpecError
rejected("float32", S, "f16 or bf16", lambda: latent_attention(*(torch.empty(*t.shape, dtype=torch.float32)
                                                                  for t in args)))
rejected("L 520", S, "multiple of 8", lambda: latent_attention(*inputs(L=520)))
rejected("L 60", S, "multiple of 8", lambda: latent_attention(*inputs(L=60)))
try:  # L 512: the spec is valid; the kernel is the C library's to build (or to refuse, for now)
    latent_attention(*inputs(L=512))
except attnjit.SpecError as err:
    assert "latent dims over" in err.message, err.message
except attnjit.RuntimeEnvironmentError as err:
    assert "cannot launch" in err.message, err.message
# the projections' rows must start on 16-byte boundaries: a view at an 8-byte offset
wq_off = fake_torch.Tensor((4, 128, 64), torch.bfloat16, (128 * 72, 72, 1), 0, torch.empty(1).data_ptr() + 8)
rejected("w_qlat misaligned", A, "16-byte boundaries", call(w_qlat=wq_off))
print("ok library refusals")
