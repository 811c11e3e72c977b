"""Run by test_reciprocal_band_cpu.py in a subprocess, with fake_torch as torch (as
launch_packing_check.py): calls with reciprocal_band= must get through all of the C API's
argument checks (alpha packed as an f32 [Hq] tensor, stride 0 when one weight is shared)
and stop only at "cannot launch" (kernels compiled for sm_90a without a GPU); bad arguments
must be refused by Python with their own message. Prints one line per check."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fake_torch  # noqa: E402

fake_torch.install()
import torch  # noqa: E402  (the fake)

import attnjit  # noqa: E402
from attnjit import capi, compiled  # noqa: E402

compiled_for = []
_sm90a_kernels: dict = {}


def kernel_for_sm90a(json_text, device, tile):
    key = (json_text, device)
    kernel = _sm90a_kernels.get(key)
    if kernel is None:
        kernel = _sm90a_kernels[key] = capi.Kernel(capi.Spec.from_json(json_text), "sm_90a", tile)
        compiled_for.append(json_text)
    return kernel


compiled.kernel_for = kernel_for_sm90a


def reaches_the_launch(name, call):
    try:
        call()
    except attnjit.RuntimeEnvironmentError as err:
        assert "cannot launch" in err.message, err.message
        print("ok", name)
        return
    raise AssertionError(f"{name}: launched on a fake GPU?")


def rejected(name, error, fragment, call):
    try:
        call()
    except error as err:
        assert fragment in str(err), str(err)
        print("ok", name)
        return
    raise AssertionError(f"{name}: not rejected")


def last_band():
    doc = json.loads(compiled_for[-1])
    return doc["reciprocal_band"], doc["tensors"]


def qkv(dt=torch.bfloat16, B=2, Hq=4, Hkv=4, Nq=33, Nk=33, D=64):
    return (torch.empty(B, Hq, Nq, D, dtype=dt), torch.empty(B, Hkv, Nk, D, dtype=dt),
            torch.empty(B, Hkv, Nk, D, dtype=dt))


H = 4
q, k, v = qkv()

# alpha as a float, a one-element tensor ([1] or 0-dim), a [Hq] tensor (bf16 converted);
# the band is causal when the call is
reaches_the_launch("float alpha, causal", lambda: attnjit.attention(q, k, v, causal=True, reciprocal_band=(64, 0.5)))
assert last_band() == ({"width": 64, "alpha": "reciprocal_band", "causal": True},
                       {"reciprocal_band": {"dtype": "f32", "rank": 1}}), compiled_for[-1]
fn = attnjit.compile()
reaches_the_launch("[Hq] alpha, non-causal", lambda: fn(q, k, v, reciprocal_band=(0, torch.empty(H))))
assert last_band()[0] == {"width": 0, "alpha": "reciprocal_band", "causal": False}, compiled_for[-1]
before = len(compiled_for)
for name, alpha in (("[1] alpha", torch.empty(1)), ("0-dim alpha", torch.empty()),
                    ("bf16 [Hq] alpha", torch.empty(H, dtype=torch.bfloat16)),
                    ("strided [Hq] alpha", torch.empty(H, 2).transpose(0, 1)[0]), ("int alpha", 1)):
    reaches_the_launch(name, lambda: fn(q, k, v, reciprocal_band=(0, alpha)))
assert len(compiled_for) == before, "alpha's form changed the kernel"  # W and causal alone pick it
reaches_the_launch("another W", lambda: fn(q, k, v, reciprocal_band=(200, 1.0)))
assert len(compiled_for) == before + 1 and last_band()[0]["width"] == 200
reaches_the_launch("gqa, f16, [B, N, H, D] storage", lambda: attnjit.attention(
    *(torch.empty(2, 33, h, 128, dtype=torch.float16).transpose(1, 2) for h in (8, 2, 2)), enable_gqa=True,
    causal=True, return_lse=True, reciprocal_band=(3, torch.empty(8))))
print("ok alpha forms")

# beside a captured tensor named "reciprocal_band", sinks and a gate: unique names, sorted
reciprocal_band = torch.empty(H, dtype=torch.float32)


def mod(score, b, h, q_idx, kv_idx):
    return score + reciprocal_band[h]


reaches_the_launch("beside a captured tensor named reciprocal_band", lambda: attnjit.attention(
    q, k, v, score_mod=mod, causal=True, sinks=torch.empty(H), gate=torch.empty(2, H, 33, 64, dtype=torch.bfloat16),
    reciprocal_band=(8, 0.25)))
band, tensors = last_band()
assert band["alpha"] == "reciprocal_band_1" and list(tensors) == ["gate", "reciprocal_band", "reciprocal_band_1",
                                                                  "sinks"], compiled_for[-1]
print("ok names")

A = attnjit.ArgumentError
rejected("not a pair", A, "pair (W, alpha)", lambda: fn(q, k, v, reciprocal_band=0.5))
rejected("a triple", A, "a tuple of 3", lambda: fn(q, k, v, reciprocal_band=(1, 0.5, True)))
rejected("negative W", A, "W = -1", lambda: fn(q, k, v, reciprocal_band=(-1, 0.5)))
rejected("float W", A, "W = 2.0", lambda: fn(q, k, v, reciprocal_band=(2.0, 0.5)))
rejected("bool W", A, "W = True", lambda: fn(q, k, v, reciprocal_band=(True, 0.5)))
rejected("alpha of 3", A, "[Hq] = [4]", lambda: fn(q, k, v, reciprocal_band=(1, torch.empty(3))))
rejected("alpha [2, 4]", A, "one weight per query head", lambda: fn(q, k, v, reciprocal_band=(1, torch.empty(2, 4))))
rejected("int32 alpha", A, "must be float32",
         lambda: fn(q, k, v, reciprocal_band=(1, torch.empty(4, dtype=torch.int32))))
rejected("alpha on the cpu", A, "alpha is on cpu", lambda: fn(q, k, v, reciprocal_band=(1, torch.empty(4, device=-1))))
rejected("alpha a string", A, "float or a torch.Tensor", lambda: fn(q, k, v, reciprocal_band=(1, "0.5")))
rejected("Nq != Nk", A, "self-attention", lambda: fn(*qkv(Nq=17), reciprocal_band=(1, 0.5)))
rejected("f32 q, k, v", A, "float16 / bfloat16", lambda: fn(*qkv(torch.float32), reciprocal_band=(1, 0.5)))
rejected("with a score convolution (C)", attnjit.SpecError, "cannot be combined",
         lambda: fn(q, k, v, score_conv=torch.empty(H, 3, 3), reciprocal_band=(1, 0.5)))
print("ok refusals")

# forward only: any input that requires grad (grad mode is on in fake_torch) is refused
q_grad = torch.empty(2, H, 33, 64, dtype=torch.bfloat16)
q_grad.requires_grad = True
rejected("q requires grad", A, "forward only", lambda: fn(q_grad, k, v, reciprocal_band=(1, 0.5)))
alpha_grad = torch.empty(H)
alpha_grad.requires_grad = True
rejected("alpha requires grad", A, "reciprocal_band's alpha requires grad",
         lambda: attnjit.attention(q, k, v, reciprocal_band=(1, alpha_grad)))
bias = torch.empty(H)
bias.requires_grad = True
rejected("a captured tensor requires grad", A, "captured tensor 'bias' requires grad", lambda: attnjit.compile(
    lambda s, b, h, qi, kv: s + bias[h])(q, k, v, reciprocal_band=(1, 0.5)))
print("ok forward only")
