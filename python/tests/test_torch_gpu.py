"""attnjit on a CUDA GPU through PyTorch, against an fp64 reference computed here (scores
materialised in float64 from the same rounded inputs). Skips without torch, a CUDA GPU
or the library (unless ATTNJIT_LIBRARY names it: then it must load).

Tolerances are reference/tolerance.h's: |out - ref| <= atol + rtol * |ref| per element,
fp16 3e-3, bf16 2e-2, fp32 1e-4 (fp32 inputs run an fp32 FFMA main loop), LSE 1e-3 /
1e-5; NaN, unwritten elements or an infinity the reference does not have fail. Distinct
specs are kept to about 40 (each cold NVRTC compile takes about a second)."""
import math
import time
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import compiled, mods  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402

load_library_or_skip()

DEVICE = torch.device("cuda", torch.cuda.current_device())
TOLERANCE = {torch.float16: (3e-3, 3e-3), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-4)}
LSE_TOLERANCE = (1e-3, 1e-5)
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


# ---- inputs, reference, comparison ---------------------------------------------------------

def make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype, Dv=None, layout="bhnd"):
    """q [B, Hq, Nq, D], k [B, Hkv, Nk, D], v [B, Hkv, Nk, Dv]; layout "bnhd" stores them as
    [B, N, H, D] and transposes (non-contiguous views)."""
    Dv = Dv or D

    def make(H, N, d):
        if layout == "bnhd":
            return torch.randn(B, N, H, d, device=DEVICE).to(dtype).transpose(1, 2)
        return torch.randn(B, H, N, d, device=DEVICE).to(dtype)
    return make(Hq, Nq, D), make(Hkv, Nk, D), make(Hkv, Nk, Dv)


def reference(q, k, v, score=None, keep=None, scale=None, sinks=None):
    """(out, lse) in float64. score(s, b, h, i, j) and keep(b, h, i, j) take broadcasting
    index tensors (b [B,1,1,1], h [1,H,1,1], i [1,1,Nq,1], j [1,1,1,Nk]). sinks [Hq]: attention
    sinks, one more logit per row in the denominator that takes no value."""
    B, Hq, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    qd, kd, vd = q.double(), k.double(), v.double()
    if Hq != Hkv:
        kd = kd.repeat_interleave(Hq // Hkv, dim=1)
        vd = vd.repeat_interleave(Hq // Hkv, dim=1)
    s = (scale if scale is not None else 1.0 / math.sqrt(D)) * (qd @ kd.transpose(-1, -2))
    b = torch.arange(B, device=DEVICE).view(B, 1, 1, 1)
    h = torch.arange(Hq, device=DEVICE).view(1, Hq, 1, 1)
    i = torch.arange(Nq, device=DEVICE).view(1, 1, Nq, 1)
    j = torch.arange(Nk, device=DEVICE).view(1, 1, 1, Nk)
    t = score(s, b, h, i, j) if score is not None else s
    if keep is not None:
        t = t.masked_fill(~keep(b, h, i, j).expand(t.shape), -math.inf)
    m = t.amax(dim=-1, keepdim=True)
    sink = None
    if sinks is not None:
        sink = sinks.double().view(1, Hq, 1, 1)
        m = torch.maximum(m, sink.expand_as(m))
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m).detach()
    p = torch.exp(t - m)
    l = p.sum(dim=-1, keepdim=True)
    if sink is not None:
        l = l + torch.exp(sink - m)
    out = torch.where(l > 0, (p @ vd) / l.clamp_min(1e-300), torch.zeros((), dtype=torch.float64, device=DEVICE))
    lse = torch.where(l > 0, torch.log(l.clamp_min(1e-300)) + m, torch.full_like(l, -math.inf)).squeeze(-1)
    return out, lse


def check(out, ref, dtype, what):
    assert out.dtype == dtype, f"{what}: out dtype {out.dtype}"
    assert out.shape == ref.shape, f"{what}: out shape {tuple(out.shape)} != {tuple(ref.shape)}"
    o = out.double()
    assert not torch.isnan(o).any(), f"{what}: NaN in the output (unwritten or wrong)"
    assert torch.isfinite(o).all(), f"{what}: infinity in the output"
    atol, rtol = TOLERANCE[dtype]
    err = (o - ref).abs()
    bad = err > atol + rtol * ref.abs()
    if bad.any():
        at = tuple(int(x) for x in bad.nonzero()[0])
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.numel()} elements off (max error {err.max().item():.3g}; "
                    f"first at {at}: {o[at].item()} vs {ref[at].item()})")


def check_lse(lse, ref, what):
    assert lse.dtype == torch.float32 and lse.shape == ref.shape, f"{what}: lse {lse.dtype} {tuple(lse.shape)}"
    l = lse.double()
    empty = torch.isinf(ref)
    assert torch.equal(torch.isinf(l) & (l < 0), empty), f"{what}: -inf LSE rows differ from the reference"
    assert not torch.isnan(l).any(), f"{what}: NaN LSE"
    atol, rtol = LSE_TOLERANCE
    err = (l - ref).abs().masked_fill(empty, 0)
    assert (err <= atol + rtol * ref.abs().masked_fill(empty, 0)).all(), f"{what}: LSE max error {err.max().item():.3g}"


def kernels_compiled() -> int:
    return len(compiled._kernels)


# ---- plain and causal: every dtype, head dims 64 and 128, ragged lengths, MHA / GQA --------

SHAPES = [  # (B, Hq, Hkv, Nq, Nk)
    (1, 2, 2, 1, 1),
    (2, 4, 2, 17, 255),
    (1, 2, 2, 129, 4097),
    (1, 8, 2, 1000, 1000),
    (1, 8, 1, 1, 4097),      # MQA decode
    (2, 2, 2, 1000, 255),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_plain_and_causal(dtype, D, causal):
    fn = attnjit.compile(causal=causal, enable_gqa=True)
    keep = (lambda b, h, i, j: j <= i) if causal else None
    for B, Hq, Hkv, Nq, Nk in SHAPES:
        q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype)
        ref, _ = reference(q, k, v, keep=keep)
        check(fn(q, k, v), ref, dtype, f"{dtype} D={D} causal={causal} B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk}")


def test_non_contiguous_inputs_and_dv():
    fn = attnjit.compile(causal=True, enable_gqa=True)
    q, k, v = make_qkv(2, 4, 2, 129, 255, 64, torch.float16, layout="bnhd")
    assert not q.is_contiguous()
    check(fn(q, k, v), reference(q, k, v, keep=lambda b, h, i, j: j <= i)[0], torch.float16, "[B, N, H, D] storage")
    q, k, v = make_qkv(1, 2, 2, 33, 65, 64, torch.bfloat16, Dv=128)
    out = attnjit.attention(q, k, v)
    assert out.shape == (1, 2, 33, 128)
    check(out, reference(q, k, v)[0], torch.bfloat16, "Dv 128 != Dqk 64")
    q, k, v = make_qkv(1, 2, 2, 64, 64, 64, torch.float16)
    check(attnjit.attention(q, k, v, scale=0.3), reference(q, k, v, scale=0.3)[0], torch.float16, "scale 0.3")


# ---- every ready-made modifier ---------------------------------------------------------------

def _bias_case(B, Hq, Nq, Nk):
    pair = torch.randn(1, Hq, Nq, Nk, device=DEVICE).to(torch.bfloat16)
    bias = pair.expand(B, Hq, Nq, Nk)  # stride 0 over the batch
    return mods.bias(bias), None, (lambda s, b, h, i, j: s + pair.double()[0][h, i, j]), None


def _alibi_case(B, Hq, Nq, Nk):
    slopes = mods.alibi_slopes(Hq, device=DEVICE)
    return (mods.alibi(slopes), None,
            lambda s, b, h, i, j: s + slopes.double()[h] * (j - i), None)


def _relpos_case(B, Hq, Nq, Nk):
    m = 16
    table = torch.randn(Hq, 2 * m + 1, device=DEVICE)
    return (mods.relative_position_bias(table, m), None,
            lambda s, b, h, i, j: s + table.double()[h, (j - i).clamp(-m, m) + m], None)


def _document_case(B, Hq, Nq, Nk):
    doc = torch.sort(torch.randint(0, 4, (B, max(Nq, Nk)), device=DEVICE), dim=1).values  # int64
    return (None, mods.document_mask(doc), None,
            lambda b, h, i, j: doc[b, i] == doc[b, j])


def _document_two_case(B, Hq, Nq, Nk):
    q_doc = torch.randint(0, 3, (B, Nq), device=DEVICE, dtype=torch.int32)
    kv_doc = torch.randint(0, 3, (B, Nk), device=DEVICE, dtype=torch.int32)
    return (None, mods.document_mask(q_doc, kv_doc), None,
            lambda b, h, i, j: q_doc.long()[b, i] == kv_doc.long()[b, j])


def _prefix_tensor_case(B, Hq, Nq, Nk):
    prefix = torch.randint(0, 64, (B,), device=DEVICE, dtype=torch.int32)
    return (None, mods.prefix_lm(prefix), None,
            lambda b, h, i, j: (j < prefix.long()[b]) | (j <= i))


def _compose_case(B, Hq, Nq, Nk):
    slopes = mods.alibi_slopes(Hq, device=DEVICE)
    return (mods.compose(mods.softcap(20.0), mods.alibi(slopes)),
            mods.and_masks(mods.sliding_window(300), mods.or_masks(mods.causal_mask, mods.prefix_lm(5))),
            lambda s, b, h, i, j: 20.0 * torch.tanh((s + slopes.double()[h] * (j - i)) / 20.0),
            lambda b, h, i, j: (i - j >= 0) & (i - j < 300) & ((j <= i) | (j < 5)))


def _torch_inline_case(B, Hq, Nq, Nk):
    """A score_mod and mask written with torch functions (Sym.__torch_function__)."""
    temperature = torch.tensor(0.7, device=DEVICE)  # 0-dim captured tensor

    def score_mod(score, b, h, q_idx, kv_idx):
        d = torch.clamp(q_idx - kv_idx, min=0, max=64)
        return torch.where(d % 2 == 0, torch.tanh(score / temperature), score.exp2() * 0.5) - d * 0.01

    def mask(b, h, q_idx, kv_idx):
        return torch.logical_or(kv_idx <= q_idx, torch.eq(kv_idx // 32, 3))

    def ref_score(s, b, h, i, j):
        d = (i - j).clamp(0, 64)
        return torch.where(d % 2 == 0, torch.tanh(s / 0.7), torch.exp2(s) * 0.5) - d * 0.01

    return score_mod, mask, ref_score, lambda b, h, i, j: (j <= i) | (j // 32 == 3)


def _bool_tensor_case(B, Hq, Nq, Nk):
    keep = torch.rand(B, Nq, Nk, device=DEVICE) > 0.3  # torch.bool: one byte per element

    def mask(b, h, q_idx, kv_idx):
        return keep[b, q_idx, kv_idx] | (kv_idx == 0)

    return None, mask, None, lambda b, h, i, j: keep[b, i, j] | (j == 0)


MOD_CASES = {  # name: (builder or fixed mods, causal flag, dtype, D)
    "causal_mask": (lambda *a: (None, mods.causal_mask, None, lambda b, h, i, j: j <= i), False, torch.float16, 64),
    "causal_bottom_right": (lambda B, H, Nq, Nk: (None, mods.causal_mask_bottom_right, None,
                                                  lambda b, h, i, j: j <= i + Nk - Nq), False, torch.bfloat16, 128),
    "sliding_window": (lambda *a: (None, mods.sliding_window(100), None,
                                   lambda b, h, i, j: (i - j >= 0) & (i - j < 100)), False, torch.float16, 128),
    "sliding_window_bottom_right": (lambda B, H, Nq, Nk: (None, mods.sliding_window(7, bottom_right=True), None,
                                                          lambda b, h, i, j: (i + Nk - Nq - j >= 0) & (i + Nk - Nq - j < 7)),
                                    False, torch.float16, 64),
    "prefix_lm": (lambda *a: (None, mods.prefix_lm(40), None, lambda b, h, i, j: (j < 40) | (j <= i)),
                  False, torch.bfloat16, 64),
    "prefix_lm_tensor": (_prefix_tensor_case, False, torch.float16, 64),
    "document_mask": (_document_case, False, torch.bfloat16, 128),
    "document_mask_two": (_document_two_case, True, torch.float16, 64),
    "softcap": (lambda *a: (mods.softcap(30.0), None, lambda s, b, h, i, j: 30.0 * torch.tanh(s / 30.0), None),
                True, torch.bfloat16, 128),
    "alibi": (_alibi_case, True, torch.float16, 128),
    "bias": (_bias_case, False, torch.bfloat16, 64),
    "relative_position_bias": (_relpos_case, False, torch.float32, 64),
    "compose_and_or": (_compose_case, False, torch.float16, 128),
    "torch_functions_inline": (_torch_inline_case, False, torch.float32, 128),
    "bool_tensor_mask": (_bool_tensor_case, False, torch.float16, 64),
}
MOD_SHAPES = [(1, 2, 2, 1, 1), (2, 4, 2, 17, 255), (1, 2, 1, 1000, 1000), (1, 2, 2, 1000, 255), (1, 2, 2, 129, 4097)]


@pytest.mark.parametrize("name", sorted(MOD_CASES))
def test_mods(name):
    build, causal, dtype, D = MOD_CASES[name]
    for B, Hq, Hkv, Nq, Nk in MOD_SHAPES:
        score_mod, mask, ref_score, ref_keep = build(B, Hq, Nq, Nk)
        keep = ref_keep
        if causal:
            keep = (lambda b, h, i, j: j <= i) if ref_keep is None else (
                lambda b, h, i, j, rk=ref_keep: rk(b, h, i, j) & (j <= i))
        q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype)
        out = attnjit.attention(q, k, v, score_mod=score_mod, mask=mask, causal=causal, enable_gqa=True)
        check(out, reference(q, k, v, ref_score, keep)[0], dtype, f"{name} B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk}")


# ---- training: gradients of q, k, v through loss.backward() ----------------------------------

# reference/tolerance.h's gradient_tolerance: |g - ref| <= t * max|ref| + t * |ref|.
GRAD_TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2e-5}


def reference_grads(q, k, v, d_out, score=None, keep=None, scale=None, sinks=None):
    """dq, dk, dv (and d sinks, with sinks) of sum(out * d_out) in float64, by torch autograd
    through reference()."""
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    sd = None if sinks is None else sinks.detach().double().requires_grad_()
    out, _ = reference(qd, kd, vd, score, keep, scale, sinks=sd)
    (out * d_out.double()).sum().backward()
    return (qd.grad, kd.grad, vd.grad) + (() if sd is None else (sd.grad,))


def check_grad(grad, ref, dtype, what):
    assert grad is not None, f"{what}: no gradient"
    assert grad.dtype == dtype and grad.shape == ref.shape, f"{what}: {grad.dtype} {tuple(grad.shape)}"
    g = grad.double()
    assert torch.isfinite(g).all(), f"{what}: NaN or infinity in the gradient"
    t = GRAD_TOLERANCE[dtype]
    err = (g - ref).abs()
    bound = t * ref.abs().max().clamp_min(1e-6) + t * ref.abs()
    assert (err <= bound).all(), f"{what}: max error {err.max().item():.3g} (max |ref| {ref.abs().max().item():.3g})"


def _softcap_ref(s, *_):
    return 20.0 * torch.tanh(s / 20.0)


TRAIN_CASES = {  # name: (score_mod, mask, causal, reference score, reference keep)
    "plain": (None, None, False, None, None),
    "causal": (None, None, True, None, lambda b, h, i, j: j <= i),
    "softcap_causal": (mods.softcap(20.0), None, True, _softcap_ref, lambda b, h, i, j: j <= i),
    "sliding_window": (None, mods.sliding_window(40), False, None, lambda b, h, i, j: (i - j >= 0) & (i - j < 40)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", sorted(TRAIN_CASES))
def test_training_gradients_match_the_reference(name, dtype):
    score_mod, mask, causal, ref_score, ref_keep = TRAIN_CASES[name]
    for B, Hq, Hkv, Nq, Nk in [(2, 4, 2, 129, 255), (1, 2, 2, 100, 100)]:
        q, k, v = (t.requires_grad_() for t in make_qkv(B, Hq, Hkv, Nq, Nk, 64, dtype))
        out = attnjit.attention(q, k, v, score_mod=score_mod, mask=mask, causal=causal, enable_gqa=True)
        assert out.requires_grad
        d_out = torch.randn_like(out)
        out.backward(d_out)
        refs = reference_grads(q, k, v, d_out, ref_score, ref_keep)
        for grad, ref, which in zip((q.grad, k.grad, v.grad), refs, "qkv"):
            check_grad(grad, ref, dtype, f"d{which} {name} {dtype} B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["causal", "softcap_causal"])
def test_fast_backward_gradients_match_the_reference(name, dtype):
    # deterministic=False: dQ summed with atomics; the same tolerances.
    score_mod, mask, causal, ref_score, ref_keep = TRAIN_CASES[name]
    fn = attnjit.compile(score_mod, mask, causal=causal, enable_gqa=True, deterministic=False)
    q, k, v = (t.requires_grad_() for t in make_qkv(2, 4, 2, 129, 255, 64, dtype))
    out = fn(q, k, v)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    refs = reference_grads(q, k, v, d_out, ref_score, ref_keep)
    for grad, ref, which in zip((q.grad, k.grad, v.grad), refs, "qkv"):
        check_grad(grad, ref, dtype, f"d{which} {name} {dtype} fast")


@pytest.mark.parametrize("D", [32, 64])
def test_tuned_training_gradients_match_the_reference(D):
    # autotune=True: the forward's and the backward's tiles are timed on the first call of the
    # bucket (docs/autotune.md); at D 64 the backward's candidates are the sm90 loop's and the
    # sm80 default, at D 32 the two-pass backward's sm80 tiles. The caller's gradients come from
    # the chosen kernels, which match the reference like the default ones.
    score_mod, mask, causal, ref_score, ref_keep = TRAIN_CASES["softcap_causal"]
    fn = attnjit.compile(score_mod, mask, causal=causal, enable_gqa=True, autotune=True)
    for run in range(2):  # the second call takes the bucket's choice
        q, k, v = (t.requires_grad_() for t in make_qkv(2, 4, 2, 129, 255, D, torch.bfloat16))
        out = fn(q, k, v)
        d_out = torch.randn_like(out)
        out.backward(d_out)
        refs = reference_grads(q, k, v, d_out, ref_score, ref_keep)
        for grad, ref, which in zip((q.grad, k.grad, v.grad), refs, "qkv"):
            check_grad(grad, ref, torch.bfloat16, f"d{which} softcap_causal D={D} tuned, call {run + 1}")


@pytest.mark.parametrize("name", ["softcap_causal", "sliding_window"])
def test_gradcheck_fp32(name):
    # torch.autograd.gradcheck on float32 (attnjit has no float64): finite differences with
    # eps 1e-3 are good to about 1e-4 relative here, so the tolerances are 1e-2.
    score_mod, mask, causal, _, _ = TRAIN_CASES[name]
    fn = attnjit.compile(score_mod, mask, causal=causal, enable_gqa=True)
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, 1, 9, 45, 32, torch.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gradcheck's "not double precision" warning
        assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-3, atol=1e-2, rtol=1e-2, fast_mode=True)


# ---- attention sinks (sinks= [Hq]) -----------------------------------------------------------

def make_sinks(Hq, Nk, dtype=torch.float32):
    """Per-head logits around the rows' LSE (about log Nk), so that they matter."""
    return (math.log(max(Nk, 1)) - 1.0 + 2.5 * torch.randn(Hq, device=DEVICE)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_sinks_forward_out_and_lse(dtype):
    # Ragged GQA, bottom-right causal with Nq > Nk: the first rows keep no key, so they give
    # out = 0 and lse = the sink; sinks in every float dtype; decode.
    br = lambda b, h, i, j, Nq, Nk: j <= i + Nk - Nq  # noqa: E731
    for (B, Hq, Hkv, Nq, Nk), sdt in [((2, 4, 2, 300, 255), torch.float32), ((1, 4, 1, 129, 4097), torch.bfloat16),
                                      ((1, 8, 2, 1, 4097), torch.float16)]:
        q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, 64, dtype)
        sinks = make_sinks(Hq, Nk, sdt)
        sinks[1] = -math.inf  # no sink: rows without keys keep lse = -inf
        out, lse = attnjit.attention(q, k, v, mask=mods.causal_mask_bottom_right, enable_gqa=True, return_lse=True,
                                     sinks=sinks)
        ref, ref_lse = reference(q, k, v, keep=lambda b, h, i, j: br(b, h, i, j, Nq, Nk), sinks=sinks)
        what = f"sinks {dtype} sinks {sdt} B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk}"
        check(out, ref, dtype, what)
        check_lse(lse, ref_lse, what)
        if Nq > Nk:
            assert torch.equal(out[:, :, :Nq - Nk].float(), torch.zeros_like(out[:, :, :Nq - Nk].float())), what
            assert torch.allclose(lse[:, :, 0].double(), sinks.double().view(1, Hq).expand(B, Hq), atol=1e-4, rtol=1e-5), what
        # without sinks= the same callable is the plain spec
        check(attnjit.attention(q, k, v, mask=mods.causal_mask_bottom_right, enable_gqa=True),
              reference(q, k, v, keep=lambda b, h, i, j: br(b, h, i, j, Nq, Nk))[0], dtype, what + " (no sinks)")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_sinks_training_gradients_match_the_reference(dtype):
    for name in ["causal", "softcap_causal"]:
        score_mod, mask, causal, ref_score, ref_keep = TRAIN_CASES[name]
        q, k, v = (t.requires_grad_() for t in make_qkv(2, 4, 2, 129, 255, 64, dtype))
        sinks = make_sinks(4, 255).requires_grad_()
        out = attnjit.attention(q, k, v, score_mod=score_mod, mask=mask, causal=causal, enable_gqa=True, sinks=sinks)
        d_out = torch.randn_like(out)
        out.backward(d_out)
        refs = reference_grads(q, k, v, d_out, ref_score, ref_keep, sinks=sinks)
        for grad, ref, which in zip((q.grad, k.grad, v.grad), refs, "qkv"):
            check_grad(grad, ref, dtype, f"d{which} {name} {dtype} with sinks")
        assert sinks.grad is not None and sinks.grad.dtype == torch.float32
        # d sinks sums B * Nq rows of O . dO products: the attention dtype's tolerance.
        g, ref = sinks.grad.double(), refs[3]
        t = GRAD_TOLERANCE[dtype]
        err = (g - ref).abs()
        assert (err <= t * ref.abs().max().clamp_min(1e-6) + t * ref.abs()).all(), \
            f"d sinks {name} {dtype}: max error {err.max().item():.3g} (max |ref| {ref.abs().max().item():.3g})"


def test_sinks_only_require_grad_and_bf16_sinks():
    # Only the sinks are learnable (q, k, v frozen), in bfloat16: sinks.grad is bfloat16.
    q, k, v = make_qkv(1, 4, 4, 100, 100, 64, torch.bfloat16)
    sinks = make_sinks(4, 100, torch.bfloat16).requires_grad_()
    out = attnjit.attention(q, k, v, causal=True, sinks=sinks)
    assert out.requires_grad
    d_out = torch.randn_like(out)
    out.backward(d_out)
    assert sinks.grad.dtype == torch.bfloat16 and q.grad is None
    ref = reference_grads(q, k, v, d_out, None, lambda b, h, i, j: j <= i, sinks=sinks)[3]
    err = (sinks.grad.double() - ref).abs()
    assert (err <= 1.6e-2 * ref.abs().max() + 1.6e-2 * ref.abs()).all(), f"d sinks bf16: {err.max().item():.3g}"


def test_sinks_gradcheck_fp32():
    fn = attnjit.compile(mods.softcap(20.0), causal=True, enable_gqa=True)
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, 1, 9, 45, 32, torch.float32))
    sinks = make_sinks(2, 45).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.autograd.gradcheck(lambda q, k, v, s: fn(q, k, v, sinks=s), (q, k, v, sinks), eps=1e-3,
                                        atol=1e-2, rtol=1e-2, fast_mode=True)


def test_sinks_gradient_is_deterministic():
    for deterministic in (True, False):
        fn = attnjit.compile(causal=True, deterministic=deterministic)
        q, k, v = (t.requires_grad_() for t in make_qkv(2, 4, 4, 300, 300, 64, torch.bfloat16))
        sinks = make_sinks(4, 300).requires_grad_()
        grads = []
        for _ in range(2):
            sinks.grad = None
            fn(q, k, v, sinks=sinks).float().sum().backward()
            grads.append(sinks.grad.clone())
        assert torch.equal(grads[0], grads[1]), f"d sinks differs between two runs (deterministic={deterministic})"


def test_bad_sinks_raise():
    q, k, v = make_qkv(1, 4, 4, 16, 16, 64, torch.float16)
    with pytest.raises(attnjit.ArgumentError, match=r"must be \[Hq\] = \[4\]"):
        attnjit.attention(q, k, v, sinks=torch.zeros(3, device=DEVICE))
    with pytest.raises(attnjit.ArgumentError, match="float32, float16 or bfloat16"):
        attnjit.attention(q, k, v, sinks=torch.zeros(4, device=DEVICE, dtype=torch.int32))
    with pytest.raises(attnjit.ArgumentError, match="torch.Tensor"):
        attnjit.attention(q, k, v, sinks=[0.0] * 4)


def test_training_is_deterministic_and_lse_is_not_differentiable():
    fn = attnjit.compile(mods.softcap(20.0), causal=True, return_lse=True)
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 4, 4, 300, 300, 64, torch.bfloat16))
    grads = []
    for _ in range(2):
        q.grad = k.grad = v.grad = None
        out, lse = fn(q, k, v)
        assert not lse.requires_grad
        (out.float() * 0.5).sum().backward()
        grads.append([t.grad.clone() for t in (q, k, v)])
    for a, b in zip(*grads):
        assert torch.equal(a, b), "two backward passes on the same inputs differ"


# ---- gradients of captured tensors (a bias, ALiBi slopes, a 0-dim temperature) ------------------

# reference/tolerance.h's summed_gradient_tolerance: for gradients summed over many score elements.
SUMMED_GRAD_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-4}


def _captured_cases(B, Hq, Nq, Nk, dtype):
    """name: (score_mod, causal, reference score(s, b, h, i, j, tensor), the captured tensor, summed)."""
    full = torch.randn(B, Hq, Nq, Nk, device=DEVICE, dtype=dtype)
    bcast = torch.randn(1, Hq, Nq, Nk, device=DEVICE, dtype=dtype)
    slopes = mods.alibi_slopes(Hq, device=DEVICE)
    temp = torch.tensor(0.7, device=DEVICE)
    table = torch.randn(Hq, 33, device=DEVICE)
    q_bias = 0.5 * torch.randn(B, Hq, Nq, device=DEVICE)
    qh_bias = 0.5 * torch.randn(Hq, Nq, device=DEVICE)
    kv_bias = torch.randn(Hq, Nk, device=DEVICE)
    k_bias = torch.randn(Nk, device=DEVICE, dtype=dtype)
    seg = ((torch.arange(Nk, device=DEVICE) ** 2 // 7 + torch.arange(Nk, device=DEVICE)) % 6).to(torch.int32)
    seg_bias = torch.randn(Hq, 7, device=DEVICE)  # segment 6 is read by no key: zero gradient
    return {
        "bias": (lambda t: (lambda s, b, h, i, j: s + t[b, h, i, j]), False,
                 lambda s, b, h, i, j, t: s + t.double()[b, h, i, j], full, False),
        "bias_causal": (lambda t: (lambda s, b, h, i, j: s + t[b, h, i, j]), True,
                        lambda s, b, h, i, j, t: s + t.double()[b, h, i, j], full, False),
        # a [1, H, N, N] pair bias expanded over the batch (stride 0): its gradient is the batch sum
        "broadcast_bias": (lambda t: (lambda s, b, h, i, j: s + t[b, h, i, j]), False,
                           lambda s, b, h, i, j, t: s + t.double()[b, h, i, j], bcast, True),
        "alibi": (lambda t: (lambda s, b, h, i, j: s + t[h] * (j - i)), True,
                  lambda s, b, h, i, j, t: s + t.double()[h] * (j - i), slopes, True),
        "temperature": (lambda t: (lambda s, b, h, i, j: s * t), False,
                        lambda s, b, h, i, j, t: s * t.double(), temp, True),
        # a relative-position table read at clamp(j - i, -16, 16) + 16: summed per table element
        "rel_table": (lambda t: mods.relative_position_bias(t, 16), False,
                      lambda s, b, h, i, j, t: s + t.double()[h, (j - i).clamp(-16, 16) + 16], table, True),
        "rel_table_causal": (lambda t: mods.relative_position_bias(t, 16), True,
                             lambda s, b, h, i, j, t: s + t.double()[h, (j - i).clamp(-16, 16) + 16], table, True),
        # a table gathered through an int tensor (the segment of each key): summed per element
        "gather_segment": (lambda t: (lambda s, b, h, i, j: s + t[h, seg[j].clamp(0, 6)]), True,
                           lambda s, b, h, i, j, t: s + t.double()[h, seg[j].long()], seg_bias, True),
        # per-query reads: summed over each row's keys (stored directly; over the batch). They
        # scale the score: a bias added to every key of a row has gradient 0.
        "q_bias": (lambda t: (lambda s, b, h, i, j: s + s * t[b, h, i]), True,
                   lambda s, b, h, i, j, t: s + s * t.double()[b, h, i], q_bias, True),
        "qh_bias": (lambda t: (lambda s, b, h, i, j: s + s * t[h, i]), False,
                    lambda s, b, h, i, j, t: s + s * t.double()[h, i], qh_bias, True),
        # per-key biases: summed over each key's queries (per query head; over batch and heads)
        "kv_bias": (lambda t: (lambda s, b, h, i, j: s + t[h, j]), True,
                    lambda s, b, h, i, j, t: s + t.double()[h, j], kv_bias, True),
        "k_bias": (lambda t: (lambda s, b, h, i, j: s + t[j]), False,
                   lambda s, b, h, i, j, t: s + t.double()[j], k_bias, True),
    }


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("name", ["bias", "bias_causal", "broadcast_bias", "alibi", "temperature", "rel_table",
                                  "rel_table_causal", "gather_segment", "q_bias", "qh_bias", "kv_bias", "k_bias"])
def test_captured_tensor_gradients(name, dtype):
    B, Hq, Hkv, Nq, Nk = 2, 4, 2, 129, 255
    score_mod, causal, ref_score, tensor, summed = _captured_cases(B, Hq, Nq, Nk, dtype)[name]
    leaf = tensor.clone().requires_grad_()
    captured = leaf.expand(B, *leaf.shape[1:]) if name == "broadcast_bias" else leaf
    q, k, v = (t.requires_grad_() for t in make_qkv(B, Hq, Hkv, Nq, Nk, 64, dtype))
    out = attnjit.attention(q, k, v, score_mod=score_mod(captured), causal=causal, enable_gqa=True)
    d_out = torch.randn_like(out)
    (out * d_out).sum().backward()
    # float64 reference by torch autograd
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    td = leaf.detach().double().requires_grad_()
    # the reference reads the tensor as the kernel does: expanded over the batch (autograd sums)
    td_read = td.expand(B, *td.shape[1:]) if name == "broadcast_bias" else td
    keep = (lambda b, h, i, j: j <= i) if causal else None
    ref, _ = reference(qd, kd, vd, lambda s, b, h, i, j: ref_score(s, b, h, i, j, td_read), keep)
    (ref * d_out.double()).sum().backward()
    for grad, r, which in zip((q.grad, k.grad, v.grad), (qd.grad, kd.grad, vd.grad), "qkv"):
        check_grad(grad, r, dtype, f"d{which} {name} {dtype}")
    g = leaf.grad
    assert g is not None and g.shape == leaf.shape and g.dtype == leaf.dtype, f"{name}: {g}"
    t = (SUMMED_GRAD_TOLERANCE if summed else GRAD_TOLERANCE)[dtype]
    err = (g.double() - td.grad).abs()
    bound = t * td.grad.abs().max().clamp_min(1e-6) + t * td.grad.abs()
    assert torch.isfinite(g.double()).all() and (err <= bound).all(), \
        f"d{name} {dtype}: max error {err.max().item():.3g} (max |ref| {td.grad.abs().max().item():.3g})"


@pytest.mark.parametrize("name", ["bias_causal", "alibi", "temperature", "rel_table", "q_bias", "kv_bias"])
def test_captured_tensor_gradcheck_fp32(name):
    # gradcheck over q, k, v and the captured tensor, float32 (tolerances as test_gradcheck_fp32).
    B, Hq, Nq, Nk = 1, 2, 9, 45
    score_mod, causal, _, tensor, _ = _captured_cases(B, Hq, Nq, Nk, torch.float32)[name]
    q, k, v = (t.requires_grad_() for t in make_qkv(B, Hq, Hq, Nq, Nk, 32, torch.float32))
    leaf = tensor.clone().requires_grad_()

    def fn(q, k, v, t):
        return attnjit.attention(q, k, v, score_mod=score_mod(t), causal=causal)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.autograd.gradcheck(fn, (q, k, v, leaf), eps=1e-3, atol=1e-2, rtol=1e-2, fast_mode=True)


def _captured_gradients_twice(leaves, loss):
    """The gradients of `leaves` from two backward passes of loss() on the same inputs."""
    runs = []
    for _ in range(2):
        for t in leaves:
            t.grad = None
        loss().backward()
        runs.append([t.grad.clone() for t in leaves])
    return runs


def test_captured_tensor_gradients_are_deterministic():
    bias = torch.randn(1, 4, 300, 300, device=DEVICE, dtype=torch.bfloat16).requires_grad_()
    slopes = mods.alibi_slopes(4, device=DEVICE).requires_grad_()
    q, k, v = make_qkv(2, 4, 4, 300, 300, 64, torch.bfloat16)
    b = bias.expand(2, 4, 300, 300)
    first, second = _captured_gradients_twice([bias, slopes], lambda: (attnjit.attention(
        q, k, v, score_mod=lambda s, bb, h, i, j: s + b[bb, h, i, j] + slopes[h] * (j - i),
        causal=True).float() * 0.5).sum())
    assert all(torch.equal(a, c) for a, c in zip(first, second)), "two backward passes on the same inputs differ"


def test_relative_position_table_gradient_is_deterministic():
    table = torch.randn(4, 17, device=DEVICE).requires_grad_()
    q, k, v = make_qkv(2, 4, 2, 300, 700, 64, torch.bfloat16)
    first, second = _captured_gradients_twice([table], lambda: (attnjit.attention(
        q, k, v, score_mod=mods.relative_position_bias(table, 8), enable_gqa=True).float() * 0.5).sum())
    assert torch.equal(first[0], second[0]), "two backward passes on the same inputs differ"


def test_per_query_and_per_key_gradients_are_deterministic():
    q_bias = (0.5 * torch.randn(2, 4, 300, device=DEVICE)).requires_grad_()
    kv_bias = torch.randn(4, 700, device=DEVICE).requires_grad_()
    q, k, v = make_qkv(2, 4, 2, 300, 700, 64, torch.bfloat16)
    first, second = _captured_gradients_twice([q_bias, kv_bias], lambda: (attnjit.attention(
        q, k, v, enable_gqa=True, causal=True,
        score_mod=lambda s, b, h, i, j: s + s * q_bias[b, h, i] + kv_bias[h, j]).float() * 0.5).sum())
    assert all(torch.equal(a, c) for a, c in zip(first, second)), "two backward passes on the same inputs differ"


def test_read_with_two_varying_indices_gradient_is_refused():
    kv_bias = torch.randn(128, 128, device=DEVICE).requires_grad_()
    q, k, v = make_qkv(1, 4, 4, 64, 64, 64, torch.bfloat16)
    with pytest.raises(attnjit.AttnjitError, match="in more than one dimension"):
        attnjit.attention(q, k, v, score_mod=lambda s, b, h, i, j: s + kv_bias[i + j, j - i + 64])


def test_no_grad_runs_the_forward_only():
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, 2, 64, 64, 64, torch.float16))
    with torch.no_grad():
        out = attnjit.attention(q, k, v, causal=True)
    assert not out.requires_grad


# ---- LSE, empty rows, poisoned memory --------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_return_lse(dtype):
    fn = attnjit.compile(mods.softcap(30.0), causal=True, return_lse=True, enable_gqa=True)
    for B, Hq, Hkv, Nq, Nk in [(1, 2, 2, 1, 1), (2, 4, 2, 129, 255), (1, 2, 2, 1000, 4097)]:
        q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, 64, dtype)
        out, lse = fn(q, k, v)
        ref, ref_lse = reference(q, k, v, lambda s, *_: 30.0 * torch.tanh(s / 30.0), lambda b, h, i, j: j <= i)
        check(out, ref, dtype, f"lse {dtype} Nq={Nq} Nk={Nk}")
        check_lse(lse, ref_lse, f"lse {dtype} Nq={Nq} Nk={Nk}")


def test_rows_without_keys_are_zero_with_minus_inf_lse():
    fn = attnjit.compile(mask=mods.causal_mask_bottom_right, return_lse=True)
    q, k, v = make_qkv(1, 2, 2, 300, 100, 64, torch.float16)
    out, lse = fn(q, k, v)
    ref, ref_lse = reference(q, k, v, keep=lambda b, h, i, j: j <= i + 100 - 300)
    check(out, ref, torch.float16, "bottom-right causal, Nq > Nk")
    check_lse(lse, ref_lse, "bottom-right causal, Nq > Nk")
    assert (out[:, :, :200] == 0).all() and torch.isneginf(lse[:, :, :200]).all()


def test_output_is_fully_written_over_poisoned_memory():
    fn = attnjit.compile(causal=True, return_lse=True)
    for Nq, Nk in [(17, 255), (129, 4097), (1000, 1000)]:
        q, k, v = make_qkv(2, 2, 2, Nq, Nk, 128, torch.bfloat16)
        # Fill the caching allocator's free blocks with NaN so that out and lse, if not
        # every element were written, would show it.
        poison = [torch.full((2, 2, Nq, 128), math.nan, dtype=torch.bfloat16, device=DEVICE),
                  torch.full((2, 2, Nq), math.nan, dtype=torch.float32, device=DEVICE)]
        del poison
        out, lse = fn(q, k, v)
        ref, ref_lse = reference(q, k, v, keep=lambda b, h, i, j: j <= i)
        check(out, ref, torch.bfloat16, f"poisoned Nq={Nq} Nk={Nk}")
        check_lse(lse, ref_lse, f"poisoned Nq={Nq} Nk={Nk}")


# ---- captured values change without recompiling ----------------------------------------------

def test_captured_tensor_update_and_rebinding_do_not_recompile():
    H, N = 4, 200
    slopes = mods.alibi_slopes(H, device=DEVICE)

    def alibi_mod(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    fn = attnjit.compile(alibi_mod, causal=True)
    q, k, v = make_qkv(1, H, H, N, N, 64, torch.float16)
    causal = lambda b, h, i, j: j <= i  # noqa: E731

    def expect(what):
        ref = reference(q, k, v, lambda s, b, h, i, j: s + slopes.double()[h] * (j - i), causal)[0]
        check(fn(q, k, v), ref, torch.float16, what)

    expect("first call")
    compiled_before = kernels_compiled()
    slopes.mul_(4.0)                      # in place
    expect("slopes updated in place")
    slopes = torch.linspace(0.5, 0.05, H, device=DEVICE)  # noqa: F841 (rebinds the closure cell)
    expect("slopes rebound")
    assert kernels_compiled() == compiled_before and len(fn._variants) == 1
    slopes = torch.linspace(0.5, 0.05, H, device=DEVICE, dtype=torch.float16)  # another dtype: retraced
    expect("slopes rebound to float16")
    assert len(fn._variants) == 2


def test_float_closure_changes_do_not_recompile_and_int_changes_retrace():
    cap, window = 30.0, 64

    def softcap_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    def window_mask(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx >= 0) & (q_idx - kv_idx < window)

    fn = attnjit.compile(softcap_mod, window_mask)
    q, k, v = make_qkv(1, 2, 2, 300, 300, 64, torch.bfloat16)

    def expect(what):
        ref = reference(q, k, v, lambda s, *_: cap * torch.tanh(s / cap),
                        lambda b, h, i, j: (i - j >= 0) & (i - j < window))[0]
        check(fn(q, k, v), ref, torch.bfloat16, what)

    expect("cap 30")
    before = kernels_compiled()
    cap = 5.0
    expect("cap 5")
    assert kernels_compiled() == before and fn.traced.scalars[0].name == "cap"
    window = 16
    expect("window 16")
    assert kernels_compiled() == before + 1 and fn.traced.mask.endswith("< 16")


# ---- streams -------------------------------------------------------------------------------

def test_runs_on_the_current_stream():
    fn = attnjit.compile(causal=True)
    q, k, v = make_qkv(1, 2, 2, 256, 256, 64, torch.float16)
    q2 = torch.randn_like(q)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy
        q.copy_(q2)                    # visible only to work queued after it on this stream
        out = fn(q, k, v)
    side.synchronize()
    ref = reference(q2, k, v, keep=lambda b, h, i, j: j <= i)[0]
    check(out, ref, torch.float16, "launched on a side stream")


# ---- bad tensors raise before anything is launched ---------------------------------------

def test_bad_tensors_raise():
    fn = attnjit.compile()
    q, k, v = make_qkv(1, 4, 4, 16, 16, 64, torch.float16)
    bad = [
        ("cpu q", (q.cpu(), k, v), "CUDA"),
        ("dtype mismatch", (q, k.float(), v), "dtype"),
        ("3-D q", (q[0], k, v), "4-D"),
        ("batch mismatch", (torch.cat([q, q]), k, v), "batch"),
        ("head dim mismatch", (q[..., :32], k, v), "head dim"),
        ("k/v length mismatch", (q, k, v[:, :, :8]), "same heads and length"),
        ("non-contiguous head dim", (q.transpose(2, 3), k.transpose(2, 3), v), "contiguous"),
        ("gqa without enable_gqa", (q, k[:, :2], v[:, :2]), "enable_gqa=True"),
        ("float64", (q.double(), k.double(), v.double()), "float16, bfloat16 or float32"),
    ]
    for what, args, fragment in bad:
        with pytest.raises(attnjit.ArgumentError, match=fragment):
            fn(*args)
    with pytest.raises(attnjit.ArgumentError, match="multiple"):
        attnjit.compile(enable_gqa=True)(q[:, :3], k[:, :2], v[:, :2])
    unaligned = torch.randn(1, 4, 16, 65, device=DEVICE, dtype=torch.float16)[..., 1:]
    with pytest.raises(attnjit.ArgumentError, match="aligned"):
        fn(unaligned, k, v)
    with pytest.raises(attnjit.SpecError, match="head dim"):
        fn(*make_qkv(1, 2, 2, 16, 16, 44, torch.float16))  # not a multiple of 8
    bias = torch.randn(1, 4, 16, 16)  # on the CPU
    with pytest.raises(attnjit.ArgumentError, match="captured tensor 'bias'"):
        attnjit.compile(mods.bias(bias))(q, k, v)
    small = torch.randn(1, 4, 8, 8, device=DEVICE)  # too small for Nq = Nk = 16
    with pytest.raises(attnjit.ArgumentError, match="bias"):
        attnjit.compile(mods.bias(small))(q, k, v)


def test_untraceable_torch_code_raises_at_compile():
    table = [torch.zeros(4, device=DEVICE)]

    def reads_a_list(score, b, h, q_idx, kv_idx):
        return score + table[0][h]

    with pytest.raises(attnjit.UnsupportedTraceError, match="not captured"):
        attnjit.compile(reads_a_list)
    with pytest.raises(attnjit.UnsupportedTraceError, match="softmax"):
        attnjit.compile(lambda s, b, h, q, kv: torch.softmax(s, 0))
    made_inside = lambda s, b, h, q, kv: s + torch.ones(1, device=DEVICE)  # noqa: E731
    with pytest.raises(attnjit.UnsupportedTraceError, match="torch tensor"):
        attnjit.compile(made_inside)


# ---- per-call host overhead ------------------------------------------------------------------

def _host_us_per_call(fn, q, k, v, calls=2000):
    for _ in range(50):
        fn(q, k, v)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(q, k, v)
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def test_per_call_overhead():
    q, k, v = make_qkv(1, 1, 1, 64, 64, 64, torch.float16)
    slopes = mods.alibi_slopes(1, device=DEVICE)
    plain = _host_us_per_call(attnjit.compile(causal=True), q, k, v)
    modded = _host_us_per_call(attnjit.compile(mods.compose(mods.softcap(30.0), mods.alibi(slopes)), causal=True),
                               q, k, v)
    empty = _host_us_per_call(lambda q, k, v: q.new_empty(q.shape), q, k, v)
    print(f"\nattnjit per-call host time, tiny problem: causal {plain:.1f} us, softcap+alibi (1 tensor, "
          f"1 scalar) {modded:.1f} us; torch new_empty alone {empty:.1f} us")
    assert plain < 100 and modded < 100
