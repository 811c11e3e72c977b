"""Run by test_capi.py in a subprocess, with fake_torch as torch: every call must get
through all of the C API's argument checks and stop only at "cannot launch" (the kernel
was compiled for sm_90a without a GPU). Prints one line per check."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import compile_only  # noqa: E402
import fake_torch  # noqa: E402

fake_torch.install()
import torch  # noqa: E402  (the fake)

import attnjit  # noqa: E402
from attnjit import capi, compiled, mods  # noqa: E402

compiled_for = compile_only.install()


def reaches_the_launch(name, fn, q, k, v):
    try:
        fn(q, k, v)
    except attnjit.RuntimeEnvironmentError as err:
        assert "cannot launch" in err.message, err.message
        print("ok", name)
        return
    raise AssertionError(f"{name}: launched on a fake GPU?")


def rejected(name, error, fragment, fn, q, k, v):
    try:
        fn(q, k, v)
    except error as err:
        assert fragment in str(err), str(err)
        print("ok", name)
        return
    raise AssertionError(f"{name}: not rejected")


def qkv(dt, B=2, Hq=4, Hkv=4, Nq=17, Nk=33, D=64, Dv=None):
    return (torch.empty(B, Hq, Nq, D, dtype=dt), torch.empty(B, Hkv, Nk, D, dtype=dt),
            torch.empty(B, Hkv, Nk, Dv or D, dtype=dt))


B, H, N = 2, 4, 33
slopes = torch.empty(H, dtype=torch.float32)
bias = torch.empty(1, H, N, N, dtype=torch.bfloat16).expand(B, H, N, N)  # stride-0 batch
doc = torch.empty(B, N, dtype=torch.int64)
table = torch.empty(H, 2 * 8 + 1, dtype=torch.float32)
temperature = torch.empty(dtype=torch.float32)

for dt in (torch.float16, torch.bfloat16, torch.float32):
    reaches_the_launch(f"plain {dt}", attnjit.compile(), *qkv(dt))
reaches_the_launch("gqa + causal + lse", attnjit.compile(causal=True, enable_gqa=True, return_lse=True),
                   *qkv(torch.bfloat16, Hq=8, Hkv=2, D=128))
reaches_the_launch("dv != dqk", attnjit.compile(), *qkv(torch.float16, D=64, Dv=128))
q, k, v = (torch.empty(B, N, H, 64, dtype=torch.float16).transpose(1, 2) for _ in range(3))
reaches_the_launch("[B, N, H, D] storage", attnjit.compile(mask=mods.causal_mask), q, k, v)
reaches_the_launch("softcap + alibi", attnjit.compile(mods.compose(mods.softcap(30.0), mods.alibi(slopes)),
                                                      causal=True), *qkv(torch.float16, Nq=N, Nk=N))
reaches_the_launch("expanded bias", attnjit.compile(mods.bias(bias)), *qkv(torch.bfloat16, Nq=N, Nk=N))
reaches_the_launch("document + window", attnjit.compile(mask=mods.and_masks(mods.document_mask(doc),
                                                                             mods.sliding_window(8))),
                   *qkv(torch.float16, Nq=N, Nk=N))
reaches_the_launch("relative position", attnjit.compile(mods.relative_position_bias(table, 8)),
                   *qkv(torch.float32, Nq=N, Nk=N))
reaches_the_launch("0-dim tensor", attnjit.compile(lambda s, b, h, qi, kv: s / temperature), *qkv(torch.float16))

# Attention sinks: the [Hq] tensor takes its place among the captured tensors (sorted by
# name; beside a captured tensor already named "sinks" it becomes "sinks_1").
sink_logits = torch.empty(H, dtype=torch.float32)
reaches_the_launch("sinks", lambda q, k, v: attnjit.compile(causal=True)(q, k, v, sinks=sink_logits),
                   *qkv(torch.bfloat16))
reaches_the_launch("sinks bf16 + gqa + lse",
                   lambda q, k, v: attnjit.compile(causal=True, enable_gqa=True, return_lse=True)(
                       q, k, v, sinks=torch.empty(8, dtype=torch.bfloat16)),
                   *qkv(torch.float16, Hq=8, Hkv=2, D=128))
sinks = torch.empty(H, dtype=torch.float32)  # a captured tensor named "sinks"
reaches_the_launch("sinks beside captured tensors",
                   lambda q, k, v: attnjit.attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s + sinks[h] + slopes[h],
                                                     sinks=sink_logits),
                   *qkv(torch.float32))
rejected("sinks of the wrong shape", attnjit.ArgumentError, "[Hq] = [4]",
         lambda q, k, v: attnjit.attention(q, k, v, sinks=torch.empty(3, dtype=torch.float32)), *qkv(torch.float16))
rejected("int sinks", attnjit.ArgumentError, "float32, float16 or bfloat16",
         lambda q, k, v: attnjit.attention(q, k, v, sinks=torch.empty(4, dtype=torch.int32)), *qkv(torch.float16))
# A captured tensor that changes dtype retraces; the call keeps its sinks.
shift = torch.empty(H, dtype=torch.float32)
shifted = attnjit.compile(lambda s, b, h, qi, kv: s + shift[h])
reaches_the_launch("sinks before a retrace", lambda q, k, v: shifted(q, k, v, sinks=sink_logits), *qkv(torch.float16))
shift = torch.empty(H, dtype=torch.bfloat16)
reaches_the_launch("sinks after a retrace", lambda q, k, v: shifted(q, k, v, sinks=sink_logits), *qkv(torch.float16))
assert len(shifted._variants) == 2 and '"sinks": "sinks"' in compiled_for[-1], compiled_for[-1]
print("ok sinks")

# The output gate: a [B, Hq, Nq, Dv] tensor of q's dtype, any strides (stride 0 broadcasts),
# named "gate" among the captured tensors ("gate_1" beside a captured tensor named "gate").
gate_bhnd = torch.empty(2, 4, 17, 64, dtype=torch.bfloat16)
reaches_the_launch("gate", lambda q, k, v: attnjit.compile(causal=True)(q, k, v, gate=gate_bhnd), *qkv(torch.bfloat16))
reaches_the_launch("gate in [B, N, H, D] storage", lambda q, k, v: attnjit.attention(
    q, k, v, gate=torch.empty(B, N, H, 64, dtype=torch.float16).transpose(1, 2)), *qkv(torch.float16, Nq=N, Nk=N))
reaches_the_launch("broadcast gate [1, H, 1, Dv] (stride 0)", lambda q, k, v: attnjit.attention(
    q, k, v, gate=torch.empty(1, 4, 1, 128, dtype=torch.float32)), *qkv(torch.float32, D=64, Dv=128))
gate = torch.empty(B, H, N, N, dtype=torch.float16)  # a captured tensor named "gate"
reaches_the_launch("gate + sinks beside a captured tensor named gate", lambda q, k, v: attnjit.attention(
    q, k, v, score_mod=lambda s, b, h, qi, kv: s + gate[b, h, qi, kv], sinks=sink_logits,
    gate=torch.empty(B, H, N, 64, dtype=torch.float16), enable_gqa=True), *qkv(torch.float16, Hkv=2, Nq=N, Nk=N))
assert '"gate": "gate_1"' in compiled_for[-1] and '"sinks": "sinks"' in compiled_for[-1], compiled_for[-1]
rejected("gate of the wrong shape", attnjit.ArgumentError, "or broadcast to it",
         lambda q, k, v: attnjit.attention(q, k, v, gate=torch.empty(2, 4, 16, 64, dtype=torch.float16)),
         *qkv(torch.float16))
rejected("gate of another dtype", attnjit.ArgumentError, "q's dtype",
         lambda q, k, v: attnjit.attention(q, k, v, gate=torch.empty(2, 4, 17, 64, dtype=torch.float32)),
         *qkv(torch.float16))
rejected("gate not a tensor", attnjit.ArgumentError, "torch.Tensor",
         lambda q, k, v: attnjit.attention(q, k, v, gate=1.0), *qkv(torch.float16))
print("ok gate")

# evoformer_attention: [B, S, N, H, c] tensors viewed through strides (one launch when B and S
# merge, else per batch row: the first launch is the one checked here), biases as captured tensors.


def msa(B, S, N, H, c, dt, Nk=None):
    q = torch.empty(B, S, N, H, c, dtype=dt)
    kv = [torch.empty(B, S, Nk or N, H, c, dtype=dt) for _ in range(2)]
    return q, kv[0], kv[1], torch.empty(B, S, N, H, c, dtype=dt)


def evoformer(name, q, k, v, biases, gate):
    reaches_the_launch(name, lambda q, k, v: attnjit.evoformer_attention(q, k, v, biases, gate=gate), q, k, v)


for Bm, c, dt in ((1, 32, torch.bfloat16), (2, 64, torch.float16)):
    q, k, v, g = msa(Bm, 3, 50, 4, c, dt)
    evoformer(f"evoformer row B {Bm} c {c}", q, k, v,
              [torch.empty(Bm, 3, 1, 1, 50, dtype=dt), torch.empty(Bm, 1, 4, 50, 50, dtype=dt)], g)
q, k, v, g = msa(2, 3, 50, 4, 32, torch.bfloat16)
evoformer("evoformer flat B 2, shared f32 pair bias", q, k, v,
          [torch.empty(2, 3, 1, 1, 50, dtype=torch.float32), torch.empty(1, 1, 4, 50, 50, dtype=torch.float32)], g)
evoformer("evoformer broadcast gate, no biases", q, k, v, [], torch.empty(1, 1, 50, 4, 32, dtype=torch.bfloat16))
q, k, v, g = msa(2, 40, 9, 4, 32, torch.float16)
evoformer("evoformer column through transposes", *(t.transpose(1, 2) for t in (q, k, v)),
          [torch.empty(2, 9, 1, 1, 40, dtype=torch.float16)], g.transpose(1, 2))
q, k, v, g = msa(1, 3, 50, 4, 32, torch.bfloat16)
rejected("evoformer bias of the wrong extent", attnjit.ArgumentError, "broadcastable",
         lambda q, k, v: attnjit.evoformer_attention(q, k, v, [torch.empty(1, 3, 4, 50, 49, dtype=torch.bfloat16)]),
         q, k, v)
print("ok evoformer")

small_bias = torch.empty(B, H, 8, 8, dtype=torch.bfloat16)
rejected("captured tensor too small (C bounds check)", attnjit.ArgumentError, "bias",
         attnjit.compile(mods.bias(small_bias)), *qkv(torch.bfloat16, Nq=N, Nk=N))
rejected("Hq != Hkv without enable_gqa", attnjit.ArgumentError, "enable_gqa=True",
         attnjit.compile(), *qkv(torch.float16, Hq=8, Hkv=2))
rejected("Hq not a multiple of Hkv", attnjit.ArgumentError, "multiple",
         attnjit.compile(enable_gqa=True), *qkv(torch.float16, Hq=6, Hkv=4))
q, k, v = qkv(torch.float16)
rejected("dtype mismatch", attnjit.ArgumentError, "dtype", attnjit.compile(), q, k.new_empty(k.shape, torch.float32), v)
rejected("cpu tensor", attnjit.ArgumentError, "CUDA", attnjit.compile(), fake_torch.Tensor(q.shape, q.dtype, device=-1), k, v)
rejected("head dim not contiguous", attnjit.ArgumentError, "contiguous", attnjit.compile(),
         fake_torch.Tensor(q.shape, q.dtype, strides=(4096, 1024, 128, 2)), k, v)
rejected("3-D q", attnjit.ArgumentError, "4-D", attnjit.compile(), torch.empty(2, 3, 64, dtype=torch.float16), k, v)
rejected("unsupported head dim (C)", attnjit.SpecError, "head dim 44", attnjit.compile(), *qkv(torch.float32, D=44))
# Head dims between the tile sizes compile (tiles padded inside) and pass every check.
reaches_the_launch("head dim 40", attnjit.compile(), *qkv(torch.bfloat16, D=40))
reaches_the_launch("head dims 8 x 72 (f32)", attnjit.compile(), *qkv(torch.float32, D=8, Dv=72))
rejected("float64", attnjit.ArgumentError, "float16, bfloat16 or float32", attnjit.compile(), *qkv(torch.float64))
rejected("no keys", attnjit.ArgumentError, "length 0", attnjit.compile(), *qkv(torch.float16, Nk=0))

# Float closure values are scalars: changing one reuses the kernel; an int retraces.
cap, window = 30.0, 8


def softcap_mod(score, b, h, q_idx, kv_idx):
    return cap * torch.tanh(score / cap) if False else cap * attnjit.ops.tanh(score / cap)


def window_mask(b, h, q_idx, kv_idx):
    return q_idx - kv_idx < window


fn = attnjit.compile(softcap_mod, window_mask)
q, k, v = qkv(torch.float16)
before = len(compiled_for)
reaches_the_launch("closure float 30", fn, q, k, v)
cap = 50.0
reaches_the_launch("closure float 50", fn, q, k, v)
assert len(compiled_for) == before + 1 and len(fn._variants) == 1, "a float change recompiled"
window = 4
reaches_the_launch("closure int changed", fn, q, k, v)
assert len(fn._variants) == 2 and fn.traced.mask == "q_idx - kv_idx < 4"
print("ok rebinding")

# Empty problems launch nothing.
out = attnjit.compile()(*qkv(torch.float16, Nq=0))
assert tuple(out.shape) == (2, 4, 0, 64)
print("ok empty")
