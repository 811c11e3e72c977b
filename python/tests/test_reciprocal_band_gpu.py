"""The reciprocal band (reciprocal_band=(W, alpha)) through PyTorch on a CUDA GPU, against a
float64 reference computed here from the same rounded inputs: T_ij = s_ij + alpha_h *
[band(i, j)] * s_ji with s_ji = scale * <q_j, k_i>, before score_mod; causal (the callable's
causal=True): band 0 <= i - j <= W and keys j > i masked; non-causal: |i - j| <= W.
Widths 0, 1, 64, 200, causal and not, float16 / bfloat16, head dims 64 and 128, N = 333
(not a multiple of the tiles), alpha as a float, a one-element tensor and per head; GQA, a
score_mod on top; training: out and the gradients of q, k, v and alpha (per head, one
element, or a float with none) against torch autograd through the float64 reference with the
same dO (W 0 and 64, causal and not, float16 / bfloat16, D 64, N 333, GQA), determinism; the
refusals (Nq != Nk, float32), opcheck of both ops and torch.compile (inference and training).

Tolerances: out as test_torch_gpu.py (reference/tolerance.h's); LSE 1e-3 + 1e-4 |LSE|, as
tests/gpu/reciprocal_band_test.cpp (the band term makes the scores about twice as large);
dQ, dK, dV reference/tolerance.h's gradient_tolerance (test_torch_gpu.GRAD_TOLERANCE) and d
alpha, a sum over every band element of a head, its summed_gradient_tolerance
(SUMMED_GRAD_TOLERANCE), as reciprocal_band_test.cpp checks them: |g - ref| <= t max|ref| +
t |ref|. Skips without torch, a CUDA GPU or the library."""
import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import mods, torch_ops  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402
from test_torch_gpu import (DEVICE, SUMMED_GRAD_TOLERANCE, check, check_grad, make_qkv)  # noqa: E402

load_library_or_skip()

H, N = 4, 333
BAND_LSE_TOLERANCE = (1e-3, 1e-4)
HALF_DTYPES = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(2468)


def band_reference(q, k, v, width, alpha, causal, score=None):
    """(out, lse) in float64: s = scale q k^T, st = s transposed per (b, h) (st_ij = s_ji =
    scale <q_j, k_i>), T = s + alpha[h] * band * st, score(T) when given (over the whole
    [B, H, N, N] tensor), keys j > i masked when causal, softmax, P V. alpha: [Hq] (a float
    is the same value for every head)."""
    B, Hq, Nq, D = q.shape
    Hkv = k.shape[1]
    qd, kd, vd = q.double(), k.double(), v.double()
    if Hq != Hkv:
        kd = kd.repeat_interleave(Hq // Hkv, dim=1)
        vd = vd.repeat_interleave(Hq // Hkv, dim=1)
    s = (qd @ kd.transpose(-1, -2)) / math.sqrt(D)
    st = s.transpose(-1, -2)
    i = torch.arange(Nq, device=DEVICE).view(Nq, 1)
    j = torch.arange(Nq, device=DEVICE).view(1, Nq)
    band = ((i - j >= 0) & (i - j <= width)) if causal else (i - j).abs() <= width
    if not isinstance(alpha, torch.Tensor):
        alpha = torch.full((Hq,), float(alpha), device=DEVICE)
    t = s + alpha.double().reshape(-1).expand(Hq).view(1, Hq, 1, 1) * band * st
    if score is not None:
        t = score(t)
    if causal:
        t = t.masked_fill(j > i, -math.inf)
    return torch.softmax(t, dim=-1) @ vd, torch.logsumexp(t, dim=-1)


def check_band_lse(lse, ref, what):
    assert lse.dtype == torch.float32 and lse.shape == ref.shape, f"{what}: lse {lse.dtype} {tuple(lse.shape)}"
    err = (lse.double() - ref).abs()
    atol, rtol = BAND_LSE_TOLERANCE
    assert torch.isfinite(lse).all() and (err <= atol + rtol * ref.abs()).all(), \
        f"{what}: LSE max error {err.max().item():.3g}"


def per_head_alpha(Hq=H):
    return 0.7 * torch.randn(Hq, device=DEVICE)  # both signs: the band term as large as the score


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("d", [64, 128], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("width", [0, 1, 64, 200], ids=lambda w: f"W{w}")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_band_forward(dtype, d, width, causal):
    q, k, v = make_qkv(1, H, H, N, N, d, dtype)
    alpha = per_head_alpha()
    out, lse = attnjit.attention(q, k, v, causal=causal, return_lse=True, reciprocal_band=(width, alpha))
    ref_out, ref_lse = band_reference(q, k, v, width, alpha, causal)
    what = f"band W {width} {'causal' if causal else 'non-causal'} d{d} {dtype}"
    check(out, ref_out, dtype, what)
    check_band_lse(lse, ref_lse, what)


ALPHAS = {  # name: alpha as passed (all through the same kernel: W and causal pick it)
    "float": lambda: 0.5,
    "negative_float": lambda: -0.8,
    "one_element": lambda: torch.tensor([0.6], device=DEVICE),
    "zero_dim": lambda: torch.tensor(-0.4, device=DEVICE),
    "bf16_one_element": lambda: torch.tensor([0.3], device=DEVICE, dtype=torch.bfloat16),
    "per_head": per_head_alpha,
    "per_head_f16": lambda: per_head_alpha().half(),
    "per_head_strided": lambda: per_head_alpha(2 * H)[::2],
}


@pytest.mark.parametrize("form", list(ALPHAS))
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_alpha_forms(form, causal):
    dtype = torch.bfloat16
    q, k, v = make_qkv(2, H, H, N, N, 128, dtype)
    alpha = ALPHAS[form]()
    expected = alpha.float() if isinstance(alpha, torch.Tensor) else alpha  # the kernel reads f32
    fn = attnjit.compile(causal=causal, return_lse=True)
    out, lse = fn(q, k, v, reciprocal_band=(64, alpha))
    ref_out, ref_lse = band_reference(q, k, v, 64, expected, causal)
    check(out, ref_out, dtype, f"alpha {form}")
    check_band_lse(lse, ref_lse, f"alpha {form}")


def test_gqa_bnhd_layout():
    # GQA (4 query heads over 2 kv heads), q, k, v stored [B, N, H, D] and transposed
    dtype = torch.float16
    q, k, v = make_qkv(2, H, 2, N, N, 64, dtype, layout="bnhd")
    alpha = per_head_alpha()
    out = attnjit.attention(q, k, v, causal=True, enable_gqa=True, reciprocal_band=(64, alpha))
    check(out, band_reference(q, k, v, 64, alpha, True)[0], dtype, "band gqa bnhd")


def test_band_with_a_score_mod_on_top():
    # the band is added before score_mod: softcap(s + alpha band st)
    dtype = torch.bfloat16
    q, k, v = make_qkv(1, H, H, N, N, 128, dtype)
    alpha = per_head_alpha()
    out = attnjit.attention(q, k, v, score_mod=mods.softcap(5.0), causal=True, reciprocal_band=(64, alpha))
    ref, _ = band_reference(q, k, v, 64, alpha, True, score=lambda t: 5.0 * torch.tanh(t / 5.0))
    check(out, ref, dtype, "band + softcap")


# ---- training: gradients of q, k, v and alpha -------------------------------------------------

def band_reference_grads(q, k, v, width, alpha, causal, d_out):
    """(out, dq, dk, dv, d alpha) of sum(out * d_out) in float64, by torch autograd through
    band_reference on float64 copies; d alpha is None for a float alpha, [Hq] for a [Hq]
    alpha and the sum over the heads for a one-element alpha (the reference expands it)."""
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    ad = alpha.detach().double().requires_grad_() if isinstance(alpha, torch.Tensor) else alpha
    out, _ = band_reference(qd, kd, vd, width, ad, causal)
    (out * d_out.double()).sum().backward()
    return out.detach(), qd.grad, kd.grad, vd.grad, (ad.grad if isinstance(ad, torch.Tensor) else None)


def check_alpha_grad(got, ref, dtype, what, scale=None):
    """d alpha (float32) against the float64 one: reference/tolerance.h's summed gradient
    tolerance of the attention dtype, |g - ref| <= t * max|ref| + t * |ref| (scale: the
    max|ref| to use instead, for a sum over heads whose terms may cancel)."""
    assert got is not None, f"{what}: no gradient"
    assert got.dtype == torch.float32 and got.shape == ref.shape, f"{what}: {got.dtype} {tuple(got.shape)}"
    t = SUMMED_GRAD_TOLERANCE[dtype]
    g = got.double()
    err = (g - ref).abs()
    top = ref.abs().max() if scale is None else scale
    bound = t * top.clamp_min(1e-6) + t * ref.abs()
    assert torch.isfinite(g).all() and (err <= bound).all(), \
        f"{what}: max error {err.max().item():.3g} (max |ref| {ref.abs().max().item():.3g}; got {got.tolist()}, " \
        f"ref {ref.tolist()})"


def run_band_training(q, k, v, width, alpha, causal, enable_gqa=False, deterministic=True):
    """q, k, v as leaves requiring grad; out and its backward with a random dO: (out, d_out)."""
    fn = attnjit.compile(causal=causal, enable_gqa=enable_gqa, deterministic=deterministic)
    out = fn(q, k, v, reciprocal_band=(width, alpha))
    assert out.requires_grad
    d_out = torch.randn_like(out)
    out.backward(d_out)
    return out, d_out


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("width", [0, 64], ids=lambda w: f"W{w}")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_band_gradients_match_the_reference(dtype, width, causal):
    q, k, v = (t.requires_grad_() for t in make_qkv(1, H, H, N, N, 64, dtype))
    alpha = per_head_alpha().requires_grad_()
    out, d_out = run_band_training(q, k, v, width, alpha, causal)
    ref_out, dq, dk, dv, d_alpha = band_reference_grads(q, k, v, width, alpha, causal, d_out)
    what = f"band W {width} {'causal' if causal else 'non-causal'} {dtype}"
    check(out, ref_out, dtype, what)
    for grad, ref, which in zip((q.grad, k.grad, v.grad), (dq, dk, dv), "qkv"):
        check_grad(grad, ref, dtype, f"d{which} {what}")
    check_alpha_grad(alpha.grad, d_alpha, dtype, f"d alpha {what}")


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_band_gradients_gqa(causal):
    # 4 query heads over 2 kv heads: dK, dV summed over each group, d alpha per query head
    dtype = torch.bfloat16
    q, k, v = (t.requires_grad_() for t in make_qkv(1, H, 2, N, N, 64, dtype))
    alpha = per_head_alpha().requires_grad_()
    out, d_out = run_band_training(q, k, v, 64, alpha, causal, enable_gqa=True)
    ref_out, dq, dk, dv, d_alpha = band_reference_grads(q, k, v, 64, alpha, causal, d_out)
    what = f"band gqa {'causal' if causal else 'non-causal'}"
    check(out, ref_out, dtype, what)
    for grad, ref, which in zip((q.grad, k.grad, v.grad), (dq, dk, dv), "qkv"):
        check_grad(grad, ref, dtype, f"d{which} {what}")
    check_alpha_grad(alpha.grad, d_alpha, dtype, f"d alpha {what}")


@pytest.mark.parametrize("shape", [(1,), ()], ids=["one_element", "zero_dim"])
def test_one_element_alpha_gets_the_sum_over_the_heads(shape):
    # one weight for every head, expanded with stride 0: the backward writes a dense [Hq]
    # d alpha and autograd sums it into the one element
    dtype = torch.float16
    q, k, v = (t.requires_grad_() for t in make_qkv(2, H, H, N, N, 64, dtype))
    alpha = torch.full(shape, 0.6, device=DEVICE).requires_grad_()
    out, d_out = run_band_training(q, k, v, 64, alpha, True)
    # the reference per head (from the same value), whose sum is the one element's gradient
    per_head = alpha.detach().reshape(1).expand(H).clone()
    ref_out, dq, dk, dv, d_heads = band_reference_grads(q, k, v, 64, per_head, True, d_out)
    check(out, ref_out, dtype, "band one-element alpha")
    for grad, ref, which in zip((q.grad, k.grad, v.grad), (dq, dk, dv), "qkv"):
        check_grad(grad, ref, dtype, f"d{which} one-element alpha")
    assert alpha.grad is not None and alpha.grad.shape == alpha.shape, alpha.grad
    check_alpha_grad(alpha.grad.reshape(1), d_heads.sum().reshape(1), dtype, "d alpha one element",
                     scale=d_heads.abs().max())


def test_float_alpha_trains_q_k_v():
    # a Python float alpha is no input of autograd: q, k, v get their gradients through it
    dtype = torch.bfloat16
    q, k, v = (t.requires_grad_() for t in make_qkv(1, H, H, N, N, 64, dtype))
    out, d_out = run_band_training(q, k, v, 64, -0.8, False)
    ref_out, dq, dk, dv, d_alpha = band_reference_grads(q, k, v, 64, -0.8, False, d_out)
    assert d_alpha is None
    check(out, ref_out, dtype, "band float alpha")
    for grad, ref, which in zip((q.grad, k.grad, v.grad), (dq, dk, dv), "qkv"):
        check_grad(grad, ref, dtype, f"d{which} float alpha")


def test_alpha_alone_requires_grad():
    # q, k, v frozen: only alpha trains (in bfloat16: its gradient comes back in bfloat16)
    dtype = torch.bfloat16
    q, k, v = make_qkv(1, H, H, N, N, 64, dtype)
    alpha = per_head_alpha().to(torch.bfloat16).requires_grad_()
    out = attnjit.attention(q, k, v, causal=True, reciprocal_band=(64, alpha))
    assert out.requires_grad
    d_out = torch.randn_like(out)
    out.backward(d_out)
    assert q.grad is None and alpha.grad.dtype == torch.bfloat16
    _, _, _, _, d_alpha = band_reference_grads(q, k, v, 64, alpha.float(), True, d_out)
    err = (alpha.grad.double() - d_alpha).abs()
    t = SUMMED_GRAD_TOLERANCE[dtype]  # 5e-2: also covers the rounding of the gradient to bfloat16
    assert (err <= t * d_alpha.abs().max() + t * d_alpha.abs()).all(), f"d alpha bf16: {err.max().item():.3g}"


@pytest.mark.parametrize("head_dim", [64, 128])
def test_band_gradients_are_deterministic(head_dim):
    # the default backward (backward_fused with the band at these head dims) adds in a fixed order
    fn = attnjit.compile(causal=True, enable_gqa=True)
    q, k, v = (t.requires_grad_() for t in make_qkv(2, H, 2, 500, 500, head_dim, torch.bfloat16))
    alpha = per_head_alpha().requires_grad_()
    runs = []
    for _ in range(2):
        for t in (q, k, v, alpha):
            t.grad = None
        fn(q, k, v, reciprocal_band=(64, alpha)).float().square().sum().backward()
        runs.append([t.grad.clone() for t in (q, k, v, alpha)])
    for a, b, which in zip(*runs, ("dq", "dk", "dv", "d alpha")):
        assert torch.equal(a, b), f"{which} differs between two backward passes with a band"


def test_band_under_no_grad_builds_no_graph():
    dtype = torch.bfloat16
    q, k, v = make_qkv(1, H, H, 64, 64, 64, dtype)
    alpha = per_head_alpha().requires_grad_()
    with torch.no_grad():
        out = attnjit.attention(q.clone().requires_grad_(), k, v, causal=True, reciprocal_band=(8, alpha))
    assert not out.requires_grad
    check(out, band_reference(q, k, v, 8, alpha.detach(), True)[0], dtype, "band under no_grad")


def test_bad_calls_are_refused():
    q, k, v = make_qkv(1, H, H, 100, 120, 64, torch.bfloat16)
    with pytest.raises(attnjit.ArgumentError, match="self-attention"):
        attnjit.attention(q, k, v, reciprocal_band=(8, 0.5))
    q, k, v = make_qkv(1, H, H, 64, 64, 64, torch.float32)
    with pytest.raises(attnjit.ArgumentError, match="float16 / bfloat16"):
        attnjit.attention(q, k, v, reciprocal_band=(8, 0.5))
    q, k, v = make_qkv(1, H, H, 64, 64, 64, torch.float16)
    with pytest.raises(attnjit.ArgumentError, match="alpha is on cpu"):
        attnjit.attention(q, k, v, reciprocal_band=(8, torch.zeros(H)))
    with pytest.raises(attnjit.ArgumentError, match=r"\[Hq\] = \[4\]"):
        attnjit.attention(q, k, v, reciprocal_band=(8, torch.zeros(3, device=DEVICE)))
    with pytest.raises(attnjit.ArgumentError, match="W = -1"):
        attnjit.attention(q, k, v, reciprocal_band=(-1, 0.5))


# ---- torch.compile: the band is an input of attnjit::attention (its alpha and W) --------------

needs_custom_op = pytest.mark.skipif(not hasattr(torch.library, "custom_op"),
                                     reason="torch.library.custom_op (torch >= 2.4) is needed")
BAND_FN = attnjit.compile()  # non-causal band, made outside the compiled code


def _band_model(q, k, v, alpha):
    return attnjit.attention(q, k, v, causal=True, reciprocal_band=(64, alpha)) + BAND_FN(
        q, k, v, reciprocal_band=(3, 0.25))


@needs_custom_op
def test_opcheck_with_a_band():
    q, k, v = make_qkv(1, H, H, 128, 128, 64, torch.bfloat16)
    name = torch_ops.plan_name(BAND_FN)
    torch.library.opcheck(torch.ops.attnjit.attention.default,
                          (q, k, v, [], [], None, None, None, per_head_alpha(), 16, name, True))
    # training: q, k, v and alpha require grad (opcheck runs the registered backward too)
    alpha = per_head_alpha().requires_grad_()
    ql, kl, vl = (t.clone().requires_grad_() for t in (q, k, v))
    torch.library.opcheck(torch.ops.attnjit.attention.default,
                          (ql, kl, vl, [], [], None, None, None, alpha, 16, name, True))
    with torch.no_grad():
        out, lse = torch.ops.attnjit.attention(q, k, v, [], [], None, None, None, alpha, 16, name, True)
    d_out = torch.randn_like(out)
    for needs in (True, False):  # with d alpha and without
        torch.library.opcheck(torch.ops.attnjit.attention_backward.default,
                              (d_out, q, k, v, out, lse, [], [], None, None, None, alpha.detach(), 16, name, [],
                               False, False, needs))


@needs_custom_op
def test_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    q, k, v = make_qkv(1, H, H, N, N, 64, torch.bfloat16)
    alpha = per_head_alpha()
    compiled = torch.compile(_band_model, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        got, want = compiled(q, k, v, alpha), _band_model(q, k, v, alpha)
    assert torch.equal(got, want), "compiled and eager differ (the same kernels should give the same bits)"
    torch._dynamo.reset()


def _band_training_model(q, k, v, alpha, alpha_one):
    # a causal band with a per-head alpha and the non-causal BAND_FN with one weight
    # (expanded to every head inside the graph): both alphas require grad
    return attnjit.attention(q, k, v, causal=True, reciprocal_band=(64, alpha)) + BAND_FN(
        q, k, v, reciprocal_band=(3, alpha_one))


@needs_custom_op
def test_compiled_training_with_a_band_matches_eager():
    """Under torch.compile the band trains through attnjit::attention_backward: outputs and
    the gradients of q, k, v and both alphas equal eager's (the same kernels)."""
    torch._dynamo.reset()
    q, k, v = make_qkv(1, H, H, N, N, 64, torch.bfloat16)
    alpha, alpha_one = per_head_alpha(), torch.tensor([0.3], device=DEVICE)
    w = torch.randn(1, H, N, 64, device=DEVICE)
    compiled = torch.compile(_band_training_model, backend="aot_eager", fullgraph=True)
    results = {}
    for label, f in (("eager", _band_training_model), ("compiled", compiled)):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, alpha, alpha_one)]
        out = f(*leaves)
        assert out.requires_grad
        (out.float() * w).sum().backward()
        results[label] = [out.detach()] + [t.grad for t in leaves]
    for a, b, which in zip(results["compiled"], results["eager"], ("out", "dq", "dk", "dv", "d alpha",
                                                                   "d alpha (one element)")):
        assert a is not None and b is not None and a.shape == b.shape, which
        assert torch.equal(a, b), f"{which}: compiled and eager differ (max |diff| " \
                                  f"{(a.double() - b.double()).abs().max().item():.3g})"
    torch._dynamo.reset()
