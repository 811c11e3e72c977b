"""The output gate (gate=) and the score convolution (score_conv=) through PyTorch on a CUDA
GPU, against fp64 references computed here from the same rounded inputs (tolerances as in
test_torch_gpu.py). Skips without torch, a CUDA GPU or the library."""
import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit.errors import AttnjitError  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402
from test_torch_gpu import (DEVICE, DTYPES, GRAD_TOLERANCE, SUMMED_GRAD_TOLERANCE, check, check_grad,  # noqa: E402
                            check_lse, make_qkv, reference)

load_library_or_skip()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(4321)


def gated_reference(q, k, v, g, causal=False, score=None):
    keep = (lambda b, h, i, j: j <= i) if causal else None
    out, lse = reference(q, k, v, score=score, keep=keep)
    return torch.sigmoid(g.double()) * out, lse


def check_tensor_grad(got, ref, tolerance, what):
    """A captured tensor's gradient against the float64 one (test_torch_gpu's bound)."""
    assert got is not None and got.shape == ref.shape, f"{what}: {None if got is None else tuple(got.shape)}"
    err = (got.double() - ref).abs()
    bound = tolerance * ref.abs().max().clamp_min(1e-6) + tolerance * ref.abs()
    assert torch.isfinite(got.double()).all() and (err <= bound).all(), \
        f"{what}: max error {err.max().item():.3g} (max |ref| {ref.abs().max().item():.3g})"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_gate_forward_and_gradients(dtype):
    q, k, v = (t.requires_grad_() for t in make_qkv(2, 4, 2, 129, 200, 64, dtype))
    g = (2 * torch.randn(2, 4, 129, 64, device=DEVICE)).to(dtype).requires_grad_()
    out, lse = attnjit.attention(q, k, v, causal=True, enable_gqa=True, return_lse=True, gate=g)
    ref_out, ref_lse = gated_reference(q, k, v, g, causal=True)
    check(out, ref_out, dtype, f"gated out {dtype}")
    check_lse(lse, ref_lse, f"gated lse {dtype}")
    d_out = torch.randn_like(out)
    out.backward(d_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, g)]
    r, _ = gated_reference(*leaves[:3], leaves[3], causal=True)
    (r * d_out.double()).sum().backward()
    for grad, leaf, which in zip((q.grad, k.grad, v.grad, g.grad), leaves, ("dq", "dk", "dv", "d gate")):
        check_grad(grad, leaf.grad, dtype, f"{which} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("broadcast", [False, True], ids=["bias", "broadcast_bias"])
def test_gate_with_a_captured_bias_all_gradients(dtype, broadcast):
    # A compiled callable with a captured additive bias, the gate passed at the call: q, k, v,
    # the gate and the bias all get gradients from one backward. The broadcast case reads a
    # [1, Hq, Nq, Nk] bias expanded over the batch (stride 0): its gradient is the batch sum.
    B, Hq, Hkv, Nq, Nk, D = 2, 4, 2, 77, 130, 64
    q, k, v = (t.requires_grad_() for t in make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype))
    g = (2 * torch.randn(B, Hq, Nq, D, device=DEVICE)).to(dtype).requires_grad_()
    leaf = torch.randn(1 if broadcast else B, Hq, Nq, Nk, device=DEVICE).to(dtype).requires_grad_()
    bias = leaf.expand(B, Hq, Nq, Nk)

    def biased(score, b, h, q_idx, kv_idx):
        return score + bias[b, h, q_idx, kv_idx]
    fn = attnjit.compile(biased, causal=True, enable_gqa=True)
    out = fn(q, k, v, gate=g)
    d_out = torch.randn_like(out)
    (out * d_out).sum().backward()
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, g, leaf)]
    bias_d = leaves[4].expand(B, Hq, Nq, Nk)
    r, _ = gated_reference(*leaves[:4], causal=True, score=lambda s, b, h, i, j: s + bias_d[b, h, i, j])
    check(out, r.detach(), dtype, f"gated biased out {dtype}")
    (r * d_out.double()).sum().backward()
    for grad, ref, which in zip((q.grad, k.grad, v.grad, g.grad), leaves, ("dq", "dk", "dv", "d gate")):
        check_grad(grad, ref.grad, dtype, f"{which} {dtype} (gate + bias)")
    assert leaf.grad.dtype == dtype
    tolerance = (SUMMED_GRAD_TOLERANCE if broadcast else GRAD_TOLERANCE)[dtype]
    check_tensor_grad(leaf.grad, leaves[4].grad, tolerance, f"d bias {dtype} (gate + bias)")


def test_gate_gradients_are_deterministic():
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 4, 4, 200, 200, 64, torch.bfloat16))
    g = torch.randn(1, 4, 200, 64, device=DEVICE, dtype=torch.bfloat16).requires_grad_()
    fn = attnjit.compile(causal=True)
    runs = []
    for _ in range(2):
        for t in (q, k, v, g):
            t.grad = None
        fn(q, k, v, gate=g).float().square().sum().backward()
        runs.append([t.grad.clone() for t in (q, k, v, g)])
    for a, b in zip(*runs):
        assert torch.equal(a, b), "two backward passes with a gate differ"


def test_frozen_broadcast_gate_with_trained_qkv():
    # The gate needs no gradient: it stays broadcast (stride 0) through the backward.
    dtype = torch.float16
    q, k, v = (t.requires_grad_() for t in make_qkv(2, 2, 2, 64, 64, 32, dtype))
    g = torch.randn(1, 2, 1, 32, device=DEVICE).to(dtype)
    out = attnjit.attention(q, k, v, gate=g)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    r, _ = gated_reference(*leaves, g.expand(2, 2, 64, 32))
    (r * d_out.double()).sum().backward()
    for grad, ref, which in zip((q.grad, k.grad, v.grad), leaves, "qkv"):
        check_grad(grad, ref.grad, dtype, f"d{which} with a frozen broadcast gate")


def test_broadcast_gate_gets_the_summed_gradient():
    # A gate [B, 1, Nq, Dv] broadcast over heads: its gradient is the sum over the heads.
    dtype = torch.bfloat16
    q, k, v = make_qkv(1, 4, 4, 100, 100, 32, dtype)
    g = torch.randn(1, 1, 100, 32, device=DEVICE).to(dtype).requires_grad_()
    out = attnjit.attention(q, k, v, gate=g)
    ref_out, _ = gated_reference(q, k, v, g.expand(1, 4, 100, 32))
    check(out, ref_out, dtype, "broadcast gate out")
    d_out = torch.randn_like(out)
    out.backward(d_out)
    gd = g.detach().double().requires_grad_()
    r, _ = gated_reference(q, k, v, gd.expand(1, 4, 100, 32))
    (r * d_out.double()).sum().backward()
    check_grad(g.grad, gd.grad, dtype, "d broadcast gate")


def test_gate_in_bnhd_layout_through_strides():
    # AlphaFold's [B, N, H, c] layout, q, k, v and the gate viewed as [B, H, N, c]: no copies.
    dtype = torch.float16
    q, k, v = make_qkv(2, 8, 8, 77, 77, 32, dtype, layout="bnhd")
    g = torch.randn(2, 77, 8, 32, device=DEVICE).to(dtype).transpose(1, 2)
    out = attnjit.attention(q, k, v, gate=g)
    check(out, gated_reference(q, k, v, g)[0], dtype, "bnhd gate")


def test_bad_gates_raise():
    q, k, v = make_qkv(1, 2, 2, 16, 16, 64, torch.bfloat16)
    with pytest.raises(AttnjitError, match="gate has dtype"):
        attnjit.attention(q, k, v, gate=torch.zeros(1, 2, 16, 64, device=DEVICE))
    with pytest.raises(AttnjitError, match="broadcast to it"):
        attnjit.attention(q, k, v, gate=torch.zeros(1, 2, 15, 64, device=DEVICE, dtype=torch.bfloat16))
    with pytest.raises(AttnjitError, match="gate must be a torch.Tensor"):
        attnjit.attention(q, k, v, gate=[0.0])
    with pytest.raises(AttnjitError, match="gate is on cpu"):
        attnjit.attention(q, k, v, gate=torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16))


def conv_reference(q, k, v, theta, score=None):
    """SEMANTICS.md section 3 in float64: zero above the diagonal, convolve (F.conv2d with
    explicit zero padding: c_q - 1 rows above, p_k keys on each side), score(C) when given
    (score_mod over the whole [B, H, N, N] tensor), -inf above the diagonal, softmax, P V."""
    B, H, N, D = q.shape
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(D)
    causal = torch.ones(N, N, dtype=torch.bool, device=DEVICE).tril()
    s0 = s.masked_fill(~causal, 0.0)
    cq, ck = theta.shape[1], theta.shape[2]
    pk = (ck - 1) // 2
    padded = torch.nn.functional.pad(s0, (pk, pk, cq - 1, 0))
    c = torch.nn.functional.conv2d(padded, theta.double().unsqueeze(1), groups=H)
    if score is not None:
        c = score(c)
    z = c.masked_fill(~causal, -math.inf)
    p = torch.softmax(z, dim=-1)
    return p @ v.double(), torch.logsumexp(z, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("c", [(1, 1), (3, 3), (6, 11), (8, 15)], ids=lambda c: f"{c[0]}x{c[1]}")
def test_score_conv_forward(dtype, c):
    q, k, v = make_qkv(2, 4, 4, 150, 150, 64, dtype)
    theta = 0.3 * torch.randn(4, c[0], c[1], device=DEVICE)
    theta[:, c[0] - 1, (c[1] - 1) // 2] += 1.0
    out, lse = attnjit.attention(q, k, v, score_conv=theta, return_lse=True)
    ref_out, ref_lse = conv_reference(q, k, v, theta)
    check(out, ref_out, dtype, f"score_conv {c} {dtype}")
    # S0 is staged in f16 (docs/score_convolution.md): LSE within 5e-3 + 1e-4 |LSE|.
    err = (lse.double() - ref_lse).abs()
    assert (err <= 5e-3 + 1e-4 * ref_lse.abs()).all(), f"score_conv LSE max error {err.max().item():.3g}"


@pytest.mark.parametrize("c", [(3, 3), (6, 11), (8, 15)], ids=lambda c: f"{c[0]}x{c[1]}")
def test_score_conv_with_a_document_mask_is_each_document_alone(c):
    """Packed sequences: under a document mask, the convolution of each document alone with
    zero padding at its edges (docs/score_convolution.md), so every document's rows equal
    the reference run on that document's slice, and so do the gradients. Documents of 1 to
    140 rows, boundaries inside tiles."""
    dtype = torch.bfloat16
    lengths = [37, 1, 140, 5, 64, 90, 3, 60]
    n = sum(lengths)
    q, k, v = make_qkv(1, 4, 4, n, n, 64, dtype)
    theta = 0.3 * torch.randn(4, c[0], c[1], device=DEVICE)
    theta[:, c[0] - 1, (c[1] - 1) // 2] += 1.0
    doc = torch.repeat_interleave(torch.arange(len(lengths), device=DEVICE),
                                  torch.tensor(lengths, device=DEVICE)).to(torch.int32)

    def same_document(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    out, lse = attnjit.attention(q, k, v, mask=same_document, score_conv=theta, return_lse=True)
    start = 0
    for length in lengths:
        rows = slice(start, start + length)
        ref_out, ref_lse = conv_reference(q[:, :, rows], k[:, :, rows], v[:, :, rows], theta)
        check(out[:, :, rows], ref_out, dtype, f"score_conv {c} document at {start}")
        err = (lse[:, :, rows].double() - ref_lse).abs()
        assert (err <= 5e-3 + 1e-4 * ref_lse.abs()).all(), f"document at {start}: LSE max error {err.max().item():.3g}"
        start += length
    # Gradients: dq, dk, dv and d theta against float64 autograd of every document alone.
    leaves = [t.detach().requires_grad_() for t in (q, k, v, theta)]
    out = attnjit.attention(*leaves[:3], mask=same_document, score_conv=leaves[3])
    d_out = torch.randn_like(out)
    out.backward(d_out)
    ref = [t.detach().double().requires_grad_() for t in (q, k, v, theta)]
    start = 0
    for length in lengths:
        rows = slice(start, start + length)
        ref_out, _ = conv_reference(ref[0][:, :, rows], ref[1][:, :, rows], ref[2][:, :, rows], ref[3])
        (ref_out * d_out[:, :, rows].double()).sum().backward()
        start += length
    for which, got, want in zip("qkv", leaves[:3], ref[:3]):
        check_grad(got.grad, want.grad, dtype, f"score_conv {c} documents d{which}")
    check_tensor_grad(leaves[3].grad, ref[3].grad, SUMMED_GRAD_TOLERANCE[dtype], f"score_conv {c} documents d theta")


def test_score_conv_compiled_callable_and_its_refusals():
    q, k, v = make_qkv(1, 2, 2, 64, 64, 128, torch.bfloat16)
    theta = torch.randn(2, 6, 11, device=DEVICE)
    fn = attnjit.compile()
    check(fn(q, k, v, score_conv=theta), conv_reference(q, k, v, theta)[0], torch.bfloat16, "compiled score_conv")
    with pytest.raises(AttnjitError, match="c_k"):
        fn(q, k, v, score_conv=torch.randn(2, 6, 10, device=DEVICE))
    with pytest.raises(AttnjitError, match="f16 / bf16"):
        q32, k32, v32 = make_qkv(1, 2, 2, 64, 64, 128, torch.float32)
        attnjit.attention(q32, k32, v32, score_conv=theta)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("c", [(3, 3), (6, 11)], ids=lambda c: f"{c[0]}x{c[1]}")
@pytest.mark.parametrize("d", [64, 200], ids=lambda d: f"d{d}")
def test_score_conv_gradients(dtype, c, d):
    """dq, dk, dv and d theta (autograd through attnjit's backward) against float64 autograd
    of conv_reference; d theta, a sum over every score, at the summed gradients' bound. d 200:
    the backward's tile of 256 columns, split in halves."""
    q, k, v = (t.requires_grad_() for t in make_qkv(2, 4, 4, 150, 150, d, dtype))
    theta = 0.3 * torch.randn(4, c[0], c[1], device=DEVICE)
    theta[:, c[0] - 1, (c[1] - 1) // 2] += 1.0
    theta.requires_grad_()
    out = attnjit.attention(q, k, v, score_conv=theta)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, theta)]
    r, _ = conv_reference(*leaves)
    (r * d_out.double()).sum().backward()
    for grad, leaf, which in zip((q.grad, k.grad, v.grad), leaves, ("dq", "dk", "dv")):
        check_grad(grad, leaf.grad, dtype, f"score_conv {c} {which} {dtype}")
    check_tensor_grad(theta.grad, leaves[3].grad, SUMMED_GRAD_TOLERANCE[dtype], f"score_conv {c} d theta {dtype}")


@pytest.mark.parametrize("broadcast", [False, True], ids=["bias", "pair_bias"])
def test_score_conv_with_a_learnable_bias_and_cap(broadcast):
    """score_mod after the convolution, softcap(C + bias) with a learnable bias (per element,
    or a pair bias [1, H, N, N] broadcast over the batch: its gradient is the batch sum) and a
    learnable cap: every gradient against float64 autograd of conv_reference."""
    dtype, B, H, N, D = torch.bfloat16, 2, 4, 150, 64
    q, k, v = (t.requires_grad_() for t in make_qkv(B, H, H, N, N, D, dtype))
    theta = 0.3 * torch.randn(H, 6, 11, device=DEVICE)
    theta[:, 5, 5] += 1.0
    theta.requires_grad_()
    leaf = torch.randn(1 if broadcast else B, H, N, N, device=DEVICE).to(dtype).requires_grad_()
    bias = leaf.expand(B, H, N, N)
    cap = torch.tensor(4.0, device=DEVICE, requires_grad=True)

    def capped(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh((score + bias[b, h, q_idx, kv_idx]) / cap)
    out = attnjit.compile(capped)(q, k, v, score_conv=theta)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, theta, leaf, cap)]
    bias_d, cap_d = leaves[4].expand(B, H, N, N), leaves[5]
    r, _ = conv_reference(*leaves[:4], score=lambda c: cap_d * torch.tanh((c + bias_d) / cap_d))
    check(out, r.detach(), dtype, "score_conv softcap(C + bias) out")
    (r * d_out.double()).sum().backward()
    for grad, ref, which in zip((q.grad, k.grad, v.grad), leaves, ("dq", "dk", "dv")):
        check_grad(grad, ref.grad, dtype, f"score_conv + bias {which}")
    check_tensor_grad(theta.grad, leaves[3].grad, SUMMED_GRAD_TOLERANCE[dtype], "score_conv + bias d theta")
    tolerance = (SUMMED_GRAD_TOLERANCE if broadcast else GRAD_TOLERANCE)[dtype]
    check_tensor_grad(leaf.grad, leaves[4].grad, tolerance, "score_conv d bias")
    check_tensor_grad(cap.grad.reshape(1), leaves[5].grad.reshape(1), SUMMED_GRAD_TOLERANCE[dtype],
                      "score_conv d cap")
