"""attnjit.evoformer_attention (AlphaFold MSA attention, [B, S, N, H, c]) on a CUDA GPU
against an fp64 reference written as OpenFold writes it (einsum, biases, softmax, einsum,
gate): row attention with a mask bias and a pair bias, column attention through
transposes, gradients of q, k, v, the gate and the pair bias (summed over S), determinism."""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import attnjit  # noqa: E402
from library_or_skip import load_library_or_skip  # noqa: E402
from test_torch_gpu import DEVICE, check, check_grad  # noqa: E402

load_library_or_skip()


def reference(q, k, v, biases, gate):
    qd, kd, vd = (t.double() for t in (q, k, v))
    logits = torch.einsum("bsihc,bsjhc->bshij", qd, kd) / q.shape[-1] ** 0.5
    for t in biases:
        logits = logits + t.double()
    a = torch.softmax(logits, dim=-1)
    out = torch.einsum("bshij,bsjhc->bsihc", a, vd)
    return out * torch.sigmoid(gate.double()) if gate is not None else out


def msa_inputs(B, S, N, H, c, dtype, grad=True):
    q, k, v, g = (torch.randn(B, S, N, H, c, device=DEVICE).to(dtype) for _ in range(4))
    mask = (torch.rand(B, S, 1, 1, N, device=DEVICE) > 0.2).to(dtype)
    mask_bias = (1e9 * (mask - 1)).to(dtype)  # AlphaFold's: -1e9 where masked
    pair = torch.randn(B, 1, H, N, N, device=DEVICE).to(dtype)
    if grad:
        for t in (q, k, v, g, pair):
            t.requires_grad_()
    return q, k, v, g, mask_bias, pair


@pytest.mark.parametrize("B,S,N,c", [(1, 3, 50, 32), (2, 4, 77, 64)])
def test_row_attention_with_pair_bias_and_gate(B, S, N, c):
    dtype = torch.bfloat16
    q, k, v, g, mask_bias, pair = msa_inputs(B, S, N, 4, c, dtype)
    out = attnjit.evoformer_attention(q, k, v, [mask_bias, pair], gate=g)
    assert out.shape == (B, S, N, 4, c)
    check(out, reference(q, k, v, [mask_bias, pair], g), dtype, "row attention out")
    d_out = torch.randn_like(out)
    out.backward(d_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v, g, pair)]
    r = reference(*leaves[:3], [mask_bias, leaves[4]], leaves[3])
    (r * d_out.double()).sum().backward()
    for got, leaf, which in zip((q.grad, k.grad, v.grad, g.grad), leaves, ("dq", "dk", "dv", "d gate")):
        check_grad(got, leaf.grad, dtype, f"row attention {which}")
    # the pair bias is read by every MSA row: its gradient sums over S (bf16 rounding of a sum)
    ref, got = leaves[4].grad, pair.grad.double()
    err = (got - ref).abs()
    assert (err <= 2e-2 * ref.abs().max() + 2e-2 * ref.abs()).all(), f"d pair bias max error {err.max().item():.3g}"


def test_column_attention_through_transposes():
    # Attention over S for each residue: the same call on the transposed views, no pair bias.
    dtype = torch.float16
    B, S, N, H, c = 1, 40, 9, 4, 32
    q, k, v, g, _, _ = msa_inputs(B, S, N, H, c, dtype, grad=False)
    col_mask = (1e9 * ((torch.rand(B, N, 1, 1, S, device=DEVICE) > 0.1).to(dtype) - 1)).to(dtype)
    qt, kt, vt, gt = (t.transpose(1, 2) for t in (q, k, v, g))
    out = attnjit.evoformer_attention(qt, kt, vt, [col_mask], gate=gt)
    check(out, reference(qt, kt, vt, [col_mask], gt), dtype, "column attention out")


def test_evoformer_gradients_are_deterministic():
    q, k, v, g, mask_bias, pair = msa_inputs(1, 3, 64, 4, 32, torch.bfloat16)
    grads = []
    for _ in range(2):
        for t in (q, k, v, g, pair):
            t.grad = None
        out = attnjit.evoformer_attention(q, k, v, [mask_bias, pair], gate=g)
        out.backward(torch.ones_like(out))
        grads.append([t.grad.clone() for t in (q, k, v, g, pair)])
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
