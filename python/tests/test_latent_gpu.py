"""attnjit.latent_attention (MLA's latent projection, SEMANTICS.md section 4) on a CUDA GPU,
against a float64 reference computed here from the same rounded inputs: Q_lat = q w_qlat
(einsum in float64, never rounded), s = scale Q_lat K_lat^T with the latent K / V broadcast
over the heads (scale 1/sqrt(L)), score_mod / mask, softmax, O_lat = P V_lat, out = O_lat
w_vup. L 64, 128, 256 and 512, causal and not, Dqk != Dv,
ragged lengths (1, 200, 333; Nq != Nk), float16 and bfloat16, a softcap score_mod and a
sliding-window mask, strided views (K = V = a slice of one cache), the [B, 1, Nk, L] form;
with a reciprocal band (RA + MLA, L 64 and 256): T_ij = s_ij + alpha[h] [band(i, j)] s_ji
with s_ji = scale <Q_lat[j], K_lat[i]>, before score_mod, causal (the call's causal=True):
band 0 <= i - j <= W and keys j > i masked, non-causal |i - j| <= W; W 0, 1, 64 and wider
than N, alpha per head (and a float), N 1 and 333, float16 / bfloat16, a softcap and a
window on top; training (every input's gradient, and alpha's and a captured bias's, against
torch autograd through the float64 reference; GRAD_TOLERANCE relative to the largest
element, as test_torch_gpu.check_grad); RA + MLA at L 512 (in Q's space) with every gradient;
torch.compile (a graph break).

Inputs as tests/gpu/latent_test.cpp: q, k_lat, v_lat ~ N(0, 1), w_qlat ~ N(0, 1/Dqk) and
w_vup ~ N(0, 1/L) (std 1/sqrt(fan-in)), so Q_lat, the scores and out have unit scale.
Tolerance: |out - ref| <= atol + rtol |ref| per element, float16 3e-3 / 3e-3, bfloat16
2e-2 / 2e-2 (reference/tolerance.h's output tolerance, as latent_test.cpp checks O; the
kernel rounds Q_lat and O_lat to the element type for its mma, and with a band the
projected keys K_lat w_qlat[h]^T of s_ji, which these absorb at unit scale; alpha ~
N(0, 0.49) per head, both signs, so the band term is as large as the score, as in
tests/gpu/latent_test.cpp). The output's memory is poisoned with NaN before each call, and NaN or an
infinity anywhere fails (test_torch_gpu.check). Skips without torch, a CUDA GPU or the
library."""
import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import mods  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402
from test_torch_gpu import DEVICE, TOLERANCE, check, check_grad  # noqa: E402

load_library_or_skip()

HALF_DTYPES = [torch.float16, torch.bfloat16]
SHAPES = [  # (B, Hq, Nq, Nk)
    (1, 2, 1, 1),
    (2, 4, 200, 200),
    (1, 3, 333, 333),
    (1, 2, 1, 333),      # decode: one query row
    (2, 2, 200, 333),    # Nq != Nk
]
SOFTCAP = 5.0


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(4321)


def make_inputs(B, Hq, Nq, Nk, D, L, Dv, dtype):
    """q [B, Hq, Nq, D], k_lat / v_lat [B, Nk, L], w_qlat [Hq, D, L], w_vup [Hq, L, Dv]."""
    def randn(*shape, std=1.0):
        return (std * torch.randn(*shape, device=DEVICE)).to(dtype)
    return (randn(B, Hq, Nq, D), randn(B, Nk, L), randn(B, Nk, L), randn(Hq, D, L, std=D ** -0.5),
            randn(Hq, L, Dv, std=L ** -0.5))


def latent_reference(q, k_lat, v_lat, w_qlat, w_vup, causal=False, scale=None, score=None, keep=None, band=None):
    """out [B, Hq, Nq, Dv] in float64. score(s, b, h, i, j) and keep(b, h, i, j) take
    broadcasting index tensors, as test_torch_gpu.reference; rows with no kept key give 0.
    band=(W, alpha) (Nq == Nk; alpha [Hq] or a float): s_ij += alpha[h] [band(i, j)] s_ji
    before score, s_ji = scale <Q_lat[j], K_lat[i]> (s transposed per (b, h)); band(i, j) is
    0 <= i - j <= W when causal (keys j > i masked below), |i - j| <= W when not."""
    B, Hq, Nq, _ = q.shape
    Nk, L = k_lat.shape[-2], k_lat.shape[-1]
    q_lat = torch.einsum("bhnd,hdl->bhnl", q.double(), w_qlat.double())
    k = k_lat.double().reshape(B, 1, Nk, L)  # one head: broadcast over the query heads by matmul
    v = v_lat.double().reshape(B, 1, Nk, L)
    s = (1.0 / math.sqrt(L) if scale is None else scale) * torch.matmul(q_lat, k.transpose(-1, -2))
    b = torch.arange(B, device=DEVICE).view(B, 1, 1, 1)
    h = torch.arange(Hq, device=DEVICE).view(1, Hq, 1, 1)
    i = torch.arange(Nq, device=DEVICE).view(1, 1, Nq, 1)
    j = torch.arange(Nk, device=DEVICE).view(1, 1, 1, Nk)
    if band is not None:
        assert Nq == Nk, "the reciprocal band needs Nq == Nk"
        width, alpha = band
        alpha = (alpha.double() if isinstance(alpha, torch.Tensor) else
                 torch.full((Hq,), float(alpha), dtype=torch.float64, device=DEVICE))
        inside = ((i - j >= 0) & (i - j <= width)) if causal else (i - j).abs() <= width
        s = s + alpha.reshape(-1).expand(Hq).view(1, Hq, 1, 1) * inside * s.transpose(-1, -2)
    t = score(s, b, h, i, j) if score is not None else s
    kept = keep(b, h, i, j) if keep is not None else None
    if causal:
        kept = (j <= i) if kept is None else kept & (j <= i)
    if kept is not None:
        t = t.masked_fill(~kept.expand(t.shape), -math.inf)
    m = t.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(t - m)
    l = p.sum(dim=-1, keepdim=True)
    o_lat = torch.where(l > 0, torch.matmul(p, v) / l.clamp_min(1e-300), torch.zeros((), dtype=torch.float64,
                                                                                     device=DEVICE))
    return torch.einsum("bhnl,hlv->bhnv", o_lat, w_vup.double())


def run(q, k_lat, v_lat, w_qlat, w_vup, **kw):
    """latent_attention over NaN-poisoned memory: the caching allocator's free block of the
    output's size is filled with NaN first, so an element the kernel did not write fails."""
    B, Hq, Nq = q.shape[:3]
    poison = torch.full((B, Hq, Nq, w_vup.shape[2]), math.nan, dtype=q.dtype, device=DEVICE)
    del poison
    with torch.no_grad():
        return attnjit.latent_attention(q, k_lat, v_lat, w_qlat, w_vup, **kw)


def _name(dtype):
    return str(dtype).replace("torch.", "")


# ---- the matrix: L, causal, dtype, ragged shapes, Dqk != Dv --------------------------------

@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_name)
@pytest.mark.parametrize("L", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_matches_the_reference(dtype, L, causal):
    D, Dv = 128, 64
    for B, Hq, Nq, Nk in SHAPES:
        args = make_inputs(B, Hq, Nq, Nk, D, L, Dv, dtype)
        out = run(*args, causal=causal)
        check(out, latent_reference(*args, causal=causal), dtype,
              f"{_name(dtype)} L={L} causal={causal} B={B} H={Hq} Nq={Nq} Nk={Nk} D={D}x{Dv}")


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_name)
def test_dv_larger_than_dqk_and_an_explicit_scale(dtype):
    args = make_inputs(2, 3, 200, 200, 64, 128, 128, dtype)
    check(run(*args, causal=True, scale=0.05), latent_reference(*args, causal=True, scale=0.05), dtype,
          f"{_name(dtype)} D=64x128 scale 0.05")


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_name)
def test_softcap_and_a_sliding_window(dtype):
    args = make_inputs(2, 2, 333, 333, 128, 128, 128, dtype)
    out = run(*args, score_mod=mods.softcap(SOFTCAP), mask=mods.sliding_window(100), causal=True)
    ref = latent_reference(*args, causal=True, score=lambda s, *_: SOFTCAP * torch.tanh(s / SOFTCAP),
                           keep=lambda b, h, i, j: (i - j) < 100)
    check(out, ref, dtype, f"{_name(dtype)} softcap + window")


@pytest.mark.parametrize("causal", [True, False])
def test_l512_matches_the_reference(causal):
    """L 512 (DeepSeek's c_kv): two warps a row group split the latent columns."""
    args = make_inputs(1, 2, 200, 200, 128, 512, 128, torch.bfloat16)
    out = run(*args, causal=causal)
    check(out, latent_reference(*args, causal=causal), torch.bfloat16, f"bf16 L=512 causal={causal}")


# ---- RA + MLA: a reciprocal band beside the projection (L up to 256) ------------------------

BAND_SHAPES = [(1, 2, 1), (2, 3, 333)]  # (B, Hq, N): Nq == Nk, one row, and not a multiple of the tiles


def band_alpha(Hq):
    return 0.7 * torch.randn(Hq, device=DEVICE)  # per head, both signs: the band term as large as the score


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_name)
@pytest.mark.parametrize("L", [64, 256])
@pytest.mark.parametrize("width", [0, 1, 64, 1000], ids=lambda w: f"W{w}")  # 1000: wider than N
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_band_forward_matches_the_reference(dtype, L, width, causal):
    D, Dv = 128, 64
    for B, Hq, N in BAND_SHAPES:
        args = make_inputs(B, Hq, N, N, D, L, Dv, dtype)
        alpha = band_alpha(Hq)
        out = run(*args, causal=causal, reciprocal_band=(width, alpha))
        check(out, latent_reference(*args, causal=causal, band=(width, alpha)), dtype,
              f"{_name(dtype)} L={L} band W={width} causal={causal} B={B} H={Hq} N={N} D={D}x{Dv}")


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_name)
def test_band_with_a_float_alpha_a_softcap_and_a_window_on_top(dtype):
    """alpha a float (every head); the band is added before score_mod: softcap(s + alpha band
    s^T), then the window and causal masks; Dv > Dqk, an explicit scale."""
    args = make_inputs(2, 2, 333, 333, 64, 128, 128, dtype)
    out = run(*args, score_mod=mods.softcap(SOFTCAP), mask=mods.sliding_window(100), causal=True, scale=0.1,
              reciprocal_band=(70, -0.6))
    ref = latent_reference(*args, causal=True, scale=0.1, band=(70, -0.6),
                           score=lambda s, *_: SOFTCAP * torch.tanh(s / SOFTCAP),
                           keep=lambda b, h, i, j: (i - j) < 100)
    check(out, ref, dtype, f"{_name(dtype)} band + softcap + window")


def test_band_four_d_latent_and_a_new_alpha_reuses_the_kernel():
    """[B, 1, Nk, L] with a band; a new alpha (same W and form) is read, not compiled again."""
    from attnjit import latent
    dtype = torch.float16
    q, k_lat, v_lat, wq, wv = make_inputs(1, 4, 200, 200, 64, 64, 64, dtype)
    alpha = band_alpha(4)
    check(run(q, k_lat.unsqueeze(1), v_lat.unsqueeze(1), wq, wv, causal=True, reciprocal_band=(64, alpha)),
          latent_reference(q, k_lat, v_lat, wq, wv, causal=True, band=(64, alpha)), dtype, "band [B, 1, Nk, L]")
    fn = latent._cached(None, None, True, None)
    compiled = len(fn._attn._variant.launchers)
    alpha2 = band_alpha(4)
    check(run(q, k_lat, v_lat, wq, wv, causal=True, reciprocal_band=(64, alpha2)),
          latent_reference(q, k_lat, v_lat, wq, wv, causal=True, band=(64, alpha2)), dtype, "band, new alpha")
    assert len(fn._attn._variant.launchers) == compiled


# ---- layouts: [B, 1, Nk, L], strided views --------------------------------------------------

def test_four_d_latent_and_strided_views():
    """k_lat / v_lat as [B, 1, Nk, L]; q stored [B, N, H, D]; K = V = the first L columns of
    a [B, Nk, L + 64] cache (DeepSeek's absorbed MLA aliases V to K's c_kv part)."""
    dtype, L = torch.bfloat16, 128
    q, k_lat, v_lat, wq, wv = make_inputs(2, 4, 200, 200, 128, L, 128, dtype)
    check(run(q, k_lat.unsqueeze(1), v_lat.unsqueeze(1), wq, wv, causal=True),
          latent_reference(q, k_lat, v_lat, wq, wv, causal=True), dtype, "[B, 1, Nk, L]")
    q_t = q.transpose(1, 2).contiguous().transpose(1, 2)
    cache = torch.randn(2, 200, L + 64, device=DEVICE).to(dtype)
    kv = cache[:, :, :L]
    assert not q_t.is_contiguous() and not kv.is_contiguous()
    check(run(q_t, kv, kv, wq, wv, causal=True), latent_reference(q, kv, kv, wq, wv, causal=True), dtype,
          "strided q, K = V = a cache slice")


def test_repeated_calls_reuse_the_kernel_and_see_new_values():
    from attnjit import latent
    args = make_inputs(1, 2, 64, 64, 64, 64, 64, torch.float16)
    run(*args, causal=True)
    fn = latent._cached(None, None, True, None)
    compiled = len(fn._attn._variant.launchers)
    args2 = make_inputs(1, 2, 64, 64, 64, 64, 64, torch.float16)
    check(run(*args2, causal=True), latent_reference(*args2, causal=True), torch.float16, "second call")
    assert latent._cached(None, None, True, None) is fn and len(fn._attn._variant.launchers) == compiled


# ---- the checker, the refusals, torch.compile ------------------------------------------------

def test_nan_fails_the_check():
    args = make_inputs(1, 2, 64, 64, 64, 64, 64, torch.bfloat16)
    out = run(*args)
    ref = latent_reference(*args)
    check(out, ref, torch.bfloat16, "clean")
    out[0, 1, 5, 3] = math.nan
    with pytest.raises(AssertionError, match="NaN"):
        check(out, ref, torch.bfloat16, "one NaN")
    atol, rtol = TOLERANCE[torch.bfloat16]
    out[0, 1, 5, 3] = ref[0, 1, 5, 3] + 2 * (atol + rtol * abs(ref[0, 1, 5, 3].item()))
    with pytest.raises(pytest.fail.Exception):
        check(out, ref, torch.bfloat16, "one element off")


# ---- training: every input's gradient against torch autograd through the float64 reference --

NAMES = ("q", "k_lat", "v_lat", "w_qlat", "w_vup")


def check_summed(grad, ref, what, t=5e-2):
    """A gradient that sums over many score elements (alpha, a per-key bias): their sums cancel,
    so reference/tolerance.h's summed_gradient_tolerance (bf16 5e-2): |g - ref| <= t max|ref|
    + t |ref| per element."""
    assert grad is not None, f"{what}: no gradient"
    err = (grad.double() - ref).abs()
    bound = t * ref.abs().max() + t * ref.abs()
    assert (err <= bound).all(), f"{what}: max error {err.max().item():.3g}, max |ref| {ref.abs().max().item():.3g}"


def train_and_check(args, dtype, needs=NAMES, ref_kw=None, **kw):
    """latent_attention with autograd on the inputs named in `needs`, loss sum(out * d_out);
    the gradients against torch autograd through latent_reference (float64, the same rounded
    inputs); the other inputs must get none."""
    leaves = [a.clone().requires_grad_(name in needs) for name, a in zip(NAMES, args)]
    out = attnjit.latent_attention(*leaves, **kw)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    refs = [a.detach().double().requires_grad_(name in needs) for name, a in zip(NAMES, args)]
    ref = latent_reference(*refs, **(ref_kw if ref_kw is not None else kw))
    (ref * d_out.double()).sum().backward()
    check(out.detach(), ref.detach(), dtype, "out")
    for name, a, r in zip(NAMES, leaves, refs):
        if name in needs:
            check_grad(a.grad, r.grad, dtype, f"d {name}")
        else:
            assert a.grad is None, f"{name} does not require grad but got one"
    return leaves


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=_name)
@pytest.mark.parametrize("D,L,Dv", [(64, 128, 64), (128, 512, 128), (64, 200, 96)], ids=lambda x: str(x))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradients_match_the_reference(dtype, D, L, Dv, causal):
    train_and_check(make_inputs(2, 3, 150, 150, D, L, Dv, dtype), dtype, causal=causal)


def test_gradients_with_nq_other_than_nk_and_a_softcap_and_window():
    dtype = torch.bfloat16
    args = make_inputs(1, 2, 100, 257, 128, 256, 128, dtype)
    train_and_check(args, dtype, score_mod=mods.softcap(SOFTCAP), mask=mods.sliding_window(64),
                    ref_kw=dict(score=lambda s, *_: SOFTCAP * torch.tanh(s / SOFTCAP),
                                keep=lambda b, h, i, j: (i - j >= 0) & (i - j < 64)))


def test_frozen_projections_and_only_q_trained():
    """Frozen weights (no grad) and only q requiring grad: those get gradients, the rest none."""
    dtype = torch.float16
    args = make_inputs(1, 2, 80, 80, 64, 128, 64, dtype)
    train_and_check(args, dtype, needs=("q", "k_lat", "v_lat"), causal=True)
    train_and_check(args, dtype, needs=("q",), causal=True)


@pytest.mark.parametrize("L,causal", [(64, True), (512, False), (512, True)], ids=["L64_causal", "L512_full",
                                                                                    "L512_causal"])
def test_band_with_a_learnable_alpha_gets_every_gradient(L, causal):
    """RA + MLA training: alpha [Hq] requires grad (the band's d alpha), besides the five inputs;
    at L 512 the library runs the band in Q's space (K and V projected per head)."""
    dtype = torch.bfloat16
    D = 64 if L == 64 else 128
    args = make_inputs(1, 4, 200, 200, D, L, D, dtype)
    alpha = (0.7 * torch.randn(4, device=DEVICE)).requires_grad_(True)
    alpha_ref = alpha.detach().double().requires_grad_(True)
    train_and_check(args, dtype, causal=causal, reciprocal_band=(64, alpha),
                    ref_kw=dict(causal=causal, band=(64, alpha_ref)))
    check_summed(alpha.grad, alpha_ref.grad, "d alpha")


def test_a_captured_bias_that_requires_grad_gets_its_gradient():
    """A per-key bias (a per-head one would cancel in the softmax: its gradient is 0) summed
    over the batch, the heads and the rows: within 5% of the largest element."""
    dtype = torch.bfloat16
    args = make_inputs(2, 2, 90, 90, 64, 128, 64, dtype)
    bias = torch.randn(90, device=DEVICE, requires_grad=True)
    bias_ref = bias.detach().double().requires_grad_(True)
    train_and_check(args, dtype, score_mod=lambda s, b, h, qi, kv: s + bias[kv],
                    ref_kw=dict(score=lambda s, b, h, i, j: s + bias_ref[j]))
    check_summed(bias.grad, bias_ref.grad, "d bias")


def test_no_grad_mode_records_nothing():
    args = [a.clone().requires_grad_(True) for a in make_inputs(1, 2, 64, 64, 64, 64, 64, torch.bfloat16)]
    with torch.no_grad():
        out = attnjit.latent_attention(*args, causal=True)
    assert not out.requires_grad


def test_under_torch_compile_it_runs_outside_the_graph():
    if not hasattr(torch, "compiler") or not hasattr(torch.compiler, "disable"):
        pytest.skip("torch.compiler.disable needs torch >= 2.1")
    args = make_inputs(1, 2, 64, 64, 64, 64, 64, torch.bfloat16)

    def block(q, k_lat, v_lat, w_qlat, w_vup):
        return attnjit.latent_attention(q * 2, k_lat, v_lat, w_qlat, w_vup, causal=True) + 1

    with torch.no_grad():
        eager = block(*args)
        compiled = torch.compile(block, backend="eager")(*args)
    assert torch.equal(compiled, eager)
