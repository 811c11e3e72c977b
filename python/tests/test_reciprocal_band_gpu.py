"""The reciprocal band (reciprocal_band=(W, alpha)) through PyTorch on a CUDA GPU, against a
float64 reference computed here from the same rounded inputs: T_ij = s_ij + alpha_h *
[band(i, j)] * s_ji with s_ji = scale * <q_j, k_i>, before score_mod; causal (the callable's
causal=True): band 0 <= i - j <= W and keys j > i masked; non-causal: |i - j| <= W.
Widths 0, 1, 64, 200, causal and not, float16 / bfloat16, head dims 64 and 128, N = 333
(not a multiple of the tiles), alpha as a float, a one-element tensor and per head; GQA, a
score_mod on top, the refusals (gradients, Nq != Nk, float32) and torch.compile.

Tolerances: out as test_torch_gpu.py (reference/tolerance.h's); LSE 1e-3 + 1e-4 |LSE|, as
tests/gpu/reciprocal_band_test.cpp (the band term makes the scores about twice as large).
Skips without torch, a CUDA GPU or the library."""
import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import mods, torch_ops  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402
from test_torch_gpu import DEVICE, check, make_qkv  # noqa: E402

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


def test_calls_that_need_gradients_are_refused():
    dtype = torch.bfloat16
    q, k, v = make_qkv(1, H, H, 64, 64, 64, dtype)
    with pytest.raises(attnjit.ArgumentError, match="forward only"):
        attnjit.attention(q.clone().requires_grad_(), k, v, causal=True, reciprocal_band=(8, 0.5))
    alpha = per_head_alpha().requires_grad_()
    with pytest.raises(attnjit.ArgumentError, match="reciprocal_band's alpha requires grad"):
        attnjit.attention(q, k, v, causal=True, reciprocal_band=(8, alpha))
    # under torch.no_grad() the same call runs
    with torch.no_grad():
        out = attnjit.attention(q.clone().requires_grad_(), k, v, causal=True, reciprocal_band=(8, alpha))
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


@needs_custom_op
def test_compiled_training_with_a_band_is_refused():
    torch._dynamo.reset()
    q, k, v = make_qkv(1, H, H, 64, 64, 64, torch.bfloat16)
    compiled = torch.compile(_band_model, backend="aot_eager")
    with pytest.raises(attnjit.ArgumentError, match="forward only"):
        compiled(q.clone().requires_grad_(), k, v, per_head_alpha())
    torch._dynamo.reset()
