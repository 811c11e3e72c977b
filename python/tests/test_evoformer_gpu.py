"""attnjit.evoformer_attention (AlphaFold MSA attention, [B, S, N, H, c]) on a CUDA GPU
against an fp64 reference written as OpenFold writes it (einsum, biases, softmax, einsum,
gate): row attention with a mask bias and a pair bias (per batch row when the pair bias
varies over B; one launch over [B S, H, N, c] when B and S merge), column attention through
transposes, gradients of q, k, v, the gate, the mask bias and the pair bias (summed over S),
determinism. test_evoformer_cpu.py checks the layout logic without a GPU."""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import evoformer  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402
from test_torch_gpu import DEVICE, SUMMED_GRAD_TOLERANCE, check, check_grad  # noqa: E402

load_library_or_skip()

DTYPE_IDS = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(2468)


def reference(q, k, v, biases, gate):
    qd, kd, vd = (t.double() for t in (q, k, v))
    logits = torch.einsum("bsihc,bsjhc->bshij", qd, kd) / q.shape[-1] ** 0.5
    for t in biases:
        logits = logits + t.double()
    a = torch.softmax(logits, dim=-1)
    out = torch.einsum("bshij,bsjhc->bsihc", a, vd)
    return out * torch.sigmoid(gate.double()) if gate is not None else out


def msa_inputs(B, S, N, H, c, dtype, grad=True, pair_batch=None):
    q, k, v, g = (torch.randn(B, S, N, H, c, device=DEVICE).to(dtype) for _ in range(4))
    mask = (torch.rand(B, S, 1, 1, N, device=DEVICE) > 0.2).float()
    mask_bias = (1e9 * (mask - 1)).to(dtype)  # AlphaFold's: -1e9 where masked (-inf in float16)
    pair = torch.randn(B if pair_batch is None else pair_batch, 1, H, N, N, device=DEVICE).to(dtype)
    if grad:
        for t in (q, k, v, g, pair):
            t.requires_grad_()
    return q, k, v, g, mask_bias, pair


def check_summed(got, ref, dtype, what):
    """A gradient summed over many score elements (the pair bias over S and the heads' rows,
    the mask bias over rows and heads): reference/tolerance.h's summed_gradient_tolerance."""
    assert got is not None and got.shape == ref.shape and got.dtype == dtype, what
    t = SUMMED_GRAD_TOLERANCE[dtype]
    err = (got.double() - ref).abs()
    bound = t * ref.abs().max().clamp_min(1e-6) + t * ref.abs()
    assert torch.isfinite(got.double()).all() and (err <= bound).all(), \
        f"{what}: max error {err.max().item():.3g} (max |ref| {ref.abs().max().item():.3g})"


def count_launches(monkeypatch):
    """Wraps evoformer's compiled callables to count their calls."""
    calls = []
    real = evoformer._callable

    def counting(pattern, bias_dtypes):
        fn, bind = real(pattern, bias_dtypes)

        def wrapped(*args, **kwargs):
            calls.append(args[0].shape)
            return fn(*args, **kwargs)
        return wrapped, bind
    monkeypatch.setattr(evoformer, "_callable", counting)
    return calls


def row_attention_case(B, S, N, H, c, dtype, pair_batch=None, mask_grad=False):
    q, k, v, g, mask_bias, pair = msa_inputs(B, S, N, H, c, dtype, pair_batch=pair_batch)
    if mask_grad:
        mask_bias.requires_grad_()
    out = attnjit.evoformer_attention(q, k, v, [mask_bias, pair], gate=g)
    assert out.shape == (B, S, N, H, c) and out.dtype == dtype
    ref = reference(q, k, v, [mask_bias, pair], g)
    check(out, ref.detach(), dtype, f"row attention out B {B} c {c} {dtype}")
    d_out = torch.randn_like(out)
    out.backward(d_out)
    tensors = (q, k, v, g, mask_bias, pair)
    leaves = [t.detach().double().requires_grad_() for t in tensors]
    r = reference(*leaves[:3], [leaves[4], leaves[5]], leaves[3])
    (r * d_out.double()).sum().backward()
    for got, leaf, which in zip((q.grad, k.grad, v.grad, g.grad), leaves, ("dq", "dk", "dv", "d gate")):
        check_grad(got, leaf.grad, dtype, f"row attention {which} B {B} c {c} {dtype}")
    # the pair bias is read by every MSA row: its gradient is the sum over S (by the kernel)
    check_summed(pair.grad, leaves[5].grad, dtype, f"d pair bias B {B} c {c} {dtype}")
    if mask_grad:
        check_summed(mask_bias.grad, leaves[4].grad, dtype, f"d mask bias B {B} c {c} {dtype}")


@pytest.mark.parametrize("c", [32, 64])
@pytest.mark.parametrize("B", [1, 2])
def test_row_attention_with_mask_bias_pair_bias_and_gate(monkeypatch, B, c):
    # S 3, N 50 (ragged: not a multiple of any tile), H 4. B == 1: one launch over [S, H, N, c];
    # B == 2 with a pair bias [B, 1, H, N, N]: one launch per batch row.
    launches = count_launches(monkeypatch)
    row_attention_case(B, 3, 50, 4, c, torch.bfloat16)
    assert len(launches) == B and all(s == (3, 4, 50, c) for s in launches)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=lambda d: DTYPE_IDS[d])
def test_row_attention_other_dtypes(dtype):
    row_attention_case(2, 3, 50, 4, 32, dtype)


def test_row_attention_in_one_launch_with_mask_bias_gradient(monkeypatch):
    # B > 1 and a pair bias shared by the batch ([1, 1, H, N, N]): B and S merge, one launch
    # over [B S, H, N, c]; the mask bias [B, S, 1, 1, N] gets its gradient too.
    launches = count_launches(monkeypatch)
    row_attention_case(2, 3, 50, 4, 64, torch.bfloat16, pair_batch=1, mask_grad=True)
    assert launches == [(6, 4, 50, 64)]


@pytest.mark.parametrize("B", [1, 2])
def test_column_attention_through_transposes(B):
    # Attention over S for each residue: the same call on the transposed views, no pair bias;
    # strided views of the [B, S, N, H, c] tensors, gradients through them.
    dtype = torch.float16
    S, N, H, c = 40, 9, 4, 32
    q, k, v, g, _, _ = msa_inputs(B, S, N, H, c, dtype)
    col_mask = (1e9 * ((torch.rand(B, N, 1, 1, S, device=DEVICE) > 0.1).float() - 1)).to(dtype)
    qt, kt, vt, gt = (t.transpose(1, 2) for t in (q, k, v, g))
    out = attnjit.evoformer_attention(qt, kt, vt, [col_mask], gate=gt)
    assert out.shape == (B, N, S, H, c)
    check(out, reference(qt, kt, vt, [col_mask], gt).detach(), dtype, f"column attention out B {B}")
    d_out = torch.randn_like(out)
    out.backward(d_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, g)]
    r = reference(*(t.transpose(1, 2) for t in leaves[:3]), [col_mask], leaves[3].transpose(1, 2))
    (r * d_out.double()).sum().backward()
    for got, leaf, which in zip((q.grad, k.grad, v.grad, g.grad), leaves, ("dq", "dk", "dv", "d gate")):
        check_grad(got, leaf.grad, dtype, f"column attention {which} B {B}")


def test_broadcast_gate_and_no_biases():
    dtype = torch.bfloat16
    q, k, v, _, _, _ = msa_inputs(2, 3, 50, 4, 32, dtype, grad=False)
    g = torch.randn(1, 1, 50, 4, 32, device=DEVICE).to(dtype).requires_grad_()
    out = attnjit.evoformer_attention(q, k, v, gate=g)
    check(out, reference(q, k, v, [], g).detach(), dtype, "broadcast gate out")
    d_out = torch.randn_like(out)
    out.backward(d_out)
    gd = g.detach().double().requires_grad_()
    (reference(q, k, v, [], gd) * d_out.double()).sum().backward()
    check_summed(g.grad, gd.grad, dtype, "d broadcast gate")
    check(attnjit.evoformer_attention(q, k, v, [None, None]), reference(q, k, v, [], None), dtype, "no biases")


@pytest.mark.parametrize("pair_batch", [None, 1], ids=["per_batch_row", "one_launch"])
def test_evoformer_gradients_are_deterministic(pair_batch):
    q, k, v, g, mask_bias, pair = msa_inputs(2, 3, 64, 4, 32, torch.bfloat16, pair_batch=pair_batch)
    grads = []
    for _ in range(2):
        for t in (q, k, v, g, pair):
            t.grad = None
        out = attnjit.evoformer_attention(q, k, v, [mask_bias, pair], gate=g)
        out.float().square().sum().backward()
        grads.append([out.detach().clone()] + [t.grad.clone() for t in (q, k, v, g, pair)])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_bad_evoformer_arguments_raise():
    q, k, v, g, mask_bias, pair = msa_inputs(1, 2, 16, 4, 32, torch.bfloat16, grad=False)
    with pytest.raises(attnjit.ArgumentError, match="5-D"):
        attnjit.evoformer_attention(q[0], k, v)
    with pytest.raises(attnjit.ArgumentError, match="broadcastable"):
        attnjit.evoformer_attention(q, k, v, [pair[:, :, :, :8]])
    with pytest.raises(attnjit.ArgumentError, match="at most 2"):
        attnjit.evoformer_attention(q, k, v, [mask_bias, pair, pair])
    with pytest.raises(attnjit.ArgumentError, match="is on cpu but q is on cuda"):
        attnjit.evoformer_attention(q, k, v, [mask_bias.cpu()])
    with pytest.raises(attnjit.ArgumentError, match="gate has dtype"):
        attnjit.evoformer_attention(q, k, v, gate=g.float())
