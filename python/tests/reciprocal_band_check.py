"""Run by test_reciprocal_band_cpu.py in a subprocess, with fake_torch as torch (as
launch_packing_check.py): calls with reciprocal_band= must get through all of the C API's
argument checks (alpha packed as an f32 [Hq] tensor, stride 0 when one weight is shared)
and stop only at "cannot launch" (kernels compiled for sm_90a without a GPU); bad arguments
must be refused by Python with their own message; training calls compile the backward (d
alpha asked for when alpha requires grad) and its launch, with the gradient buffers
AttentionFunction.backward passes, must pass every C argument check too. Prints one line
per check."""
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
from attnjit import capi, compiled  # noqa: E402

compiled_for = compile_only.install()


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

# training: any input that requires grad (grad mode is on in fake_torch) takes the autograd
# path. Its backward is compiled for sm_90a (recorded with the gradients it was asked for: d
# alpha by alpha's name exactly when alpha requires grad), and the fake autograd Function
# below launches the forward (with LSE) and then the backward as AttentionFunction.backward
# does, with a buffer for each gradient asked for: both must pass every C argument check and
# stop only at "cannot launch".
from attnjit import autograd  # noqa: E402

backwards = []  # (spec json, grads) of each backward compiled
applied = []  # (input gradient names, their buffers' (shape, strides, dtype)) of each backward launch


def backward_for_sm90a(json_text, device, tile, deterministic=True, grads=(), mainloop=None, autotune=None):
    backwards.append((json_text, tuple(grads)))
    return capi.Backward(capi.Spec.from_json(json_text), "sm_90a", tile, fast_backward=not deterministic,
                         grads=tuple(grads), mainloop=mainloop, autotune=autotune)


class FakeFunction:
    @staticmethod
    def apply(call, launch, q, k, v, sinks, gate, conv, band, *captured):
        try:
            launch()
        except attnjit.RuntimeEnvironmentError as err:
            assert "cannot launch" in err.message, err.message
        else:
            raise AssertionError("the forward launched on a fake GPU?")
        B, Hq, Nq = q.shape[0], q.shape[1], q.shape[2]
        out = q.new_empty((B, Hq, Nq, v.shape[3]))
        lse = q.new_empty((B, Hq, Nq), dtype=torch.float32)
        d_o, dq, dk, dv = out.new_empty(out.shape), q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
        # as autograd.grad_output: one contiguous buffer of each captured tensor's shape (none is 0-dim here)
        input_grads = [(name, torch.empty(*value.shape, dtype=value.dtype))
                       for name, value in zip(call.grad_names, call.grad_values)]
        for name, x in zip(call.extra_names, (sinks, gate, conv, band)):
            if x is not None and x.requires_grad:  # needs_input_grad
                input_grads.append((name, torch.empty(*x.shape, dtype=x.dtype)))
        try:
            call.launch(q, k, v, out, lse, d_o, dq, dk, dv, input_grads)
        except attnjit.RuntimeEnvironmentError as err:
            assert "cannot launch" in err.message, err.message
        else:
            raise AssertionError("the backward launched on a fake GPU?")
        applied.append(([n for n, _ in input_grads], [(tuple(b.shape), b.stride(), b.dtype) for _, b in input_grads]))
        return out, lse


autograd.backward_for = backward_for_sm90a
autograd.attention_function = lambda: FakeFunction


def trains(name, call, grads, input_grads):
    """The call trains: its backward was compiled asking for `grads` and launched with buffers
    for `input_grads` (names)."""
    before = len(applied)
    call()
    assert len(applied) == before + 1, f"{name}: no training call"
    doc = json.loads(backwards[-1][0])
    assert doc["return_lse"] is True and "reciprocal_band" in doc, backwards[-1][0]
    assert backwards[-1][1] == tuple(grads), f"{name}: the backward was asked for {backwards[-1][1]}"
    assert sorted(applied[-1][0]) == sorted(input_grads), f"{name}: launched with {applied[-1][0]}"
    print("ok", name)


def needing_grad(t):
    t.requires_grad = True
    return t


q_grad = needing_grad(torch.empty(2, H, 33, 64, dtype=torch.bfloat16))
trains("q requires grad, float alpha", lambda: fn(q_grad, k, v, reciprocal_band=(1, 0.5)), (), [])
alpha_grad = needing_grad(torch.empty(H))
trains("alpha requires grad", lambda: attnjit.attention(q, k, v, reciprocal_band=(1, alpha_grad)),
       ("reciprocal_band",), ["reciprocal_band"])
assert applied[-1][1] == [((H,), (1,), torch.float32)], applied[-1]  # d alpha: a dense [Hq] float32 buffer
trains("causal, q and a frozen [Hq] alpha", lambda: attnjit.attention(
    q_grad, k, v, causal=True, reciprocal_band=(64, torch.empty(H))), (), [])
bias = needing_grad(torch.empty(H))
sinks = needing_grad(torch.empty(H))
trains("a captured tensor, sinks and alpha require grad", lambda: attnjit.compile(
    lambda s, b, h, qi, kv: s + bias[h], causal=True)(q, k, v, sinks=sinks, reciprocal_band=(1, alpha_grad)),
    ("bias", "reciprocal_band"), ["bias", "reciprocal_band", "sinks"])
# beside a captured tensor named "reciprocal_band" (the module global above), alpha is
# "reciprocal_band_1", in the spec and among the gradients
reciprocal_band.requires_grad = True
trains("alpha beside a captured tensor named reciprocal_band", lambda: attnjit.attention(
    q, k, v, score_mod=mod, reciprocal_band=(8, alpha_grad)), ("reciprocal_band", "reciprocal_band_1"),
    ["reciprocal_band", "reciprocal_band_1"])
assert json.loads(backwards[-1][0])["reciprocal_band"]["alpha"] == "reciprocal_band_1"
reciprocal_band.requires_grad = False
trains("gqa, f16, alpha requires grad", lambda: attnjit.attention(
    *(torch.empty(2, 33, h, 128, dtype=torch.float16).transpose(1, 2) for h in (8, 2, 2)), enable_gqa=True,
    causal=True, reciprocal_band=(3, needing_grad(torch.empty(8)))), ("reciprocal_band",), ["reciprocal_band"])

# the torch ops' implementations (attnjit::attention and attnjit::attention_backward under
# torch.compile): the op's backward asks for d alpha by its name exactly when
# reciprocal_band_needs, and its launch passes every C argument check
launched = []  # input gradient names of each backward launch through autograd.Call
original_launch = autograd.Call.launch


def recording_launch(self, q, k, v, out, lse, d_o, dq, dk, dv, input_grads=()):
    launched.append(sorted(name for name, _ in input_grads))
    return original_launch(self, q, k, v, out, lse, d_o, dq, dk, dv, input_grads)


autograd.Call.launch = recording_launch
alpha_op = torch.empty(H)
out_op, lse_op = torch.empty(2, H, 33, 64, dtype=torch.bfloat16), torch.empty(2, H, 33)
for needs in (True, False):
    op_fn = attnjit.compile(causal=True)  # a fresh callable: its backward is compiled here
    variant = op_fn._current_variant()
    reaches_the_launch(f"op forward, needs {needs}", lambda: op_fn._op_forward(
        variant, q, k, v, [], [], (None, None, None, (64, alpha_op)), True))
    reaches_the_launch(f"op backward, needs {needs}", lambda: op_fn._op_backward(
        variant, torch.empty(2, H, 33, 64, dtype=torch.bfloat16), q, k, v, out_op, lse_op, [], [],
        (None, None, None, (64, alpha_op)), [], (False, False, False, needs)))
    assert backwards[-1][1] == (("reciprocal_band",) if needs else ()), backwards[-1][1]
    assert launched[-1] == (["reciprocal_band"] if needs else []), launched[-1]
autograd.Call.launch = original_launch
print("ok training")
