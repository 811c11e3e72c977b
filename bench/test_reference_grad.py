"""Tests of reference.reference_grad and reference.check_grads on small CPU tensors (skipped
without torch): the chunked fp64 gradients against torch.autograd through a row-by-row
float64 attention, chunking changing nothing, and the check flagging NaN and a bad element.

    python3 -m pytest bench/test_reference_grad.py
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mods  # noqa: E402
from reference import GRAD_TOLERANCE, SUMMED_GRAD_TOLERANCE, check_grads, reference, reference_grad  # noqa: E402


def naive(q, k, v, score_mod, mask, causal, scale):
    """out [B, Hq, Nq, Dv] row by row, softmax over the kept keys only (a row without one is
    0): written without reference.py's chunking, max shift or GQA repeat, for autograd."""
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    qi, kj = torch.arange(Nq).view(Nq, 1), torch.arange(Nk).view(1, Nk)
    rows = []
    for b in range(B):
        for h in range(Hq):
            kh, vh = k[b, h // (Hq // Hkv)], v[b, h // (Hq // Hkv)]
            s = q[b, h] @ kh.T * scale
            bt, ht = torch.tensor(b), torch.tensor(h)
            if score_mod is not None:
                s = score_mod(s, bt, ht, qi, kj)
            keep = torch.ones(Nq, Nk, dtype=torch.bool)
            if mask is not None:
                keep = keep & mask(bt, ht, qi, kj)
            if causal:
                keep = keep & (kj <= qi)
            for i in range(Nq):
                kept = keep[i].nonzero().flatten()
                if kept.numel() == 0:
                    rows.append(torch.zeros(vh.shape[-1], dtype=q.dtype))
                else:
                    rows.append(torch.softmax(s[i, kept], dim=0) @ vh[kept])
    return torch.stack(rows).view(B, Hq, Nq, -1)


def inputs(B, Hq, Hkv, Nq, Nk, D, Dv, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Nq, D, generator=g)
    k = torch.randn(B, Hkv, Nk, D, generator=g)
    v = torch.randn(B, Hkv, Nk, Dv, generator=g)
    dO = torch.randn(B, Hq, Nq, Dv, generator=g)
    return q, k, v, dO


def autograd_grads(q, k, v, dO, score_mod, mask, causal, scale):
    leaves = [t.double().requires_grad_(True) for t in (q, k, v)]
    out = naive(*leaves, score_mod, mask, causal, scale)
    out.backward(dO.double())
    return out.detach(), [t.grad for t in leaves]


def slopes(H):
    return torch.exp2(-8.0 * torch.arange(1, H + 1, dtype=torch.float64) / H)


# (name, shape (B, Hq, Hkv, Nq, Nk, D, Dv), score_mod, mask, causal)
CASES = [
    ("softcap_causal_gqa", (1, 2, 1, 37, 37, 16, 16), mods.softcap(3.0), None, True),
    # ALiBi reads h; rows i % 4 == 1 keep no key (zero gradients); Nq != Nk, Dv != D
    ("alibi_empty_rows", (2, 4, 2, 23, 37, 16, 8), mods.alibi(slopes(4)),
     lambda b, h, i, j: (i % 4 != 1) & ((i - j).abs() < 9), False),
    # a 16-bit captured bias, a constant (it promotes to float64 without a copy)
    ("pair_bias_window", (1, 2, 2, 29, 29, 16, 16),
     mods.pair_bias(torch.randn(1, 2, 29, 29, generator=torch.Generator().manual_seed(5)).bfloat16()),
     mods.sliding_window(7), False),
]


@pytest.mark.parametrize("name,shape,score_mod,mask,causal", CASES, ids=[c[0] for c in CASES])
def test_reference_grad_matches_autograd(name, shape, score_mod, mask, causal):
    B, Hq, Hkv, Nq, Nk, D, Dv = shape
    q, k, v, dO = inputs(*shape)
    scale = 1.0 / math.sqrt(D)
    out, want = autograd_grads(q, k, v, dO, score_mod, mask, causal, scale)
    got = reference_grad(q, k, v, dO, score_mod, mask, causal)
    assert [tuple(g.shape) for g in got] == [(B, Hq, Nq, D), (B, Hkv, Nk, D), (B, Hkv, Nk, Dv)]
    for g, w in zip(got, want):
        assert g.dtype == torch.float64
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(reference(q, k, v, score_mod, mask, causal), out, rtol=1e-12, atol=1e-12)
    if name == "alibi_empty_rows":
        assert torch.all(got[0][:, :, 1::4] == 0)


@pytest.mark.parametrize("which", ["slopes", "bias"])
def test_captured_tensor_gradients_match_autograd(which):
    # ALiBi slopes [H] and a [1, H, N, N] pair bias read by every batch row, as float64 leaves:
    # their gradients summed over the blocks of rows (chunked: three rows a block) equal autograd's.
    B, Hq, Hkv, Nq, Nk, D = 2, 4, 2, 19, 23, 8
    q, k, v, dO = inputs(B, Hq, Hkv, Nq, Nk, D, D, seed=3)
    if which == "slopes":
        t = slopes(Hq)
        make_mod, mask, causal = mods.alibi, None, True
    else:
        t = torch.randn(1, Hq, Nq, Nk, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
        make_mod, mask, causal = mods.pair_bias, mods.sliding_window(5), False
    leaf = t.clone().requires_grad_(True)
    got = reference_grad(q, k, v, dO, make_mod(leaf), mask, causal, captured=[leaf],
                         chunk_scores=3 * B * Hq * Nk)
    assert leaf.grad is None and len(got) == 4 and got[3].shape == t.shape
    want_leaf = t.clone().requires_grad_(True)
    qkv = [x.double().requires_grad_(True) for x in (q, k, v)]
    naive(*qkv, make_mod(want_leaf), mask, causal, 1.0 / math.sqrt(D)).backward(dO.double())
    for g, w in zip(got, [x.grad for x in qkv] + [want_leaf.grad]):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    assert got[3].abs().max() > 0
    if which == "bias":  # the same gradient summed from each block's dL/dt (reference_grads_of's pair bias)
        d = torch.zeros_like(t)

        def add(i0, i1, dt):
            d[0, :, i0:i1] += dt.sum(dim=0)
        reference_grad(q, k, v, dO, make_mod(t), mask, causal, chunk_scores=3 * B * Hq * Nk, on_block_dt=add)
        torch.testing.assert_close(d, want_leaf.grad, rtol=1e-12, atol=1e-12)
    # checked as a summed gradient: one element off by 3x the summed tolerance fails
    grads = [g.float() for g in got]
    assert check_grads(grads, got, "fp32", (which,))["grad_ok"]
    grads[3].view(-1)[2] += 3 * SUMMED_GRAD_TOLERANCE["fp32"] * (got[3].abs().max() + got[3].view(-1)[2].abs())
    res = check_grads(grads, got, "fp32", (which,))
    assert not res["grad_ok"] and res["grad_bad"] == 1 and res[f"d{which}_max_err"] > 0


@pytest.mark.parametrize("name,shape,score_mod,mask,causal", CASES, ids=[c[0] for c in CASES])
def test_chunking_changes_nothing(name, shape, score_mod, mask, causal):
    q, k, v, dO = inputs(*shape, seed=1)
    whole = reference_grad(q, k, v, dO, score_mod, mask, causal)
    for chunk in (64, 3 * shape[1] * shape[0] * shape[4]):  # one row per block; three rows
        for g, w in zip(reference_grad(q, k, v, dO, score_mod, mask, causal, chunk_scores=chunk), whole):
            torch.testing.assert_close(g, w, rtol=1e-13, atol=1e-13)


def test_inputs_that_require_grad_are_left_alone():
    q, k, v, dO = inputs(1, 2, 1, 9, 9, 8, 8)
    leaves = [t.bfloat16().requires_grad_(True) for t in (q, k, v)]
    reference_grad(*leaves, dO.bfloat16(), mods.softcap(5.0), None, True)
    assert all(t.grad is None for t in leaves)


def grads_and_ref():
    q, k, v, dO = inputs(1, 2, 1, 37, 37, 16, 16, seed=2)
    ref = reference_grad(q, k, v, dO, mods.softcap(3.0), None, True)
    return [r.float() for r in ref], ref


def test_check_grads_passes_rounded_gradients():
    grads, ref = grads_and_ref()
    res = check_grads(grads, ref, "fp32")
    assert res["grad_ok"] and res["grad_bad"] == 0
    for name in ("dq", "dk", "dv"):
        assert 0 <= res[f"{name}_max_err"] < 1e-6 and 0 <= res[f"{name}_rel_err"] < 1e-6
    assert check_grads([r.bfloat16() for r in ref], ref, "bf16")["grad_ok"]


def test_check_grads_flags_nan_and_a_perturbed_element():
    grads, ref = grads_and_ref()
    grads[0][0, 1, 5, 3] = float("nan")
    res = check_grads(grads, ref, "fp32")
    assert not res["grad_ok"] and res["grad_bad"] == 1
    assert res["dq_max_err"] is None and res["dq_rel_err"] is None   # NaN: no finite error to report
    assert res["dk_max_err"] < 1e-6

    grads, ref = grads_and_ref()
    t = GRAD_TOLERANCE["fp32"]
    g_max = float(ref[2].abs().max())
    # just inside the tolerance passes, twice it fails: atol scales with max |ref|
    grads[2][0, 0, 4, 2] = ref[2][0, 0, 4, 2] + 0.5 * t * g_max
    assert check_grads(grads, ref, "fp32")["grad_ok"]
    grads[2][0, 0, 4, 2] = ref[2][0, 0, 4, 2] + 2 * t * (g_max + abs(float(ref[2][0, 0, 4, 2])))
    res = check_grads(grads, ref, "fp32")
    assert not res["grad_ok"] and res["grad_bad"] == 1
    assert res["dv_max_err"] == pytest.approx(2 * t * (g_max + abs(float(ref[2][0, 0, 4, 2]))), rel=1e-3)  # fp32 storage

    grads, ref = grads_and_ref()
    grads[1][0, 0, 0, 0] = float("inf")
    assert not check_grads(grads, ref, "bf16")["grad_ok"]


def test_check_grads_missing_or_misshapen():
    grads, ref = grads_and_ref()
    res = check_grads([grads[0], None, grads[2][..., :8]], ref, "fp32")
    assert not res["grad_ok"] and res["dk_max_err"] is None
    assert "dk: no gradient" in res["grad_check_error"] and "dv: shape" in res["grad_check_error"]


def test_band_reference_matches_the_definition_and_its_gradient():
    """band_reference (the reciprocal band's fp64 check of the harness) against the causal
    band written element by element, and band_reference_grad against central differences."""
    from reference import band_reference, band_reference_grad
    g = torch.Generator().manual_seed(3)
    B, H, N, D, W = 1, 2, 7, 4, 2
    q, k, v = (torch.randn(B, H, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    alpha = torch.tensor([0.5, -0.7], dtype=torch.float64)
    out = band_reference(q, k, v, alpha, W)
    for h in range(H):
        s = lambda i, j: float(q[0, h, i] @ k[0, h, j]) / math.sqrt(D)
        for i in range(N):
            t = [s(i, j) + (alpha[h].item() * s(j, i) if i - j <= W else 0.0) for j in range(i + 1)]
            p = torch.softmax(torch.tensor(t, dtype=torch.float64), dim=0)
            assert torch.allclose(out[0, h, i], p @ v[0, h, : i + 1], atol=1e-12)
    dO = torch.randn(B, H, N, D, generator=g, dtype=torch.float64)
    dq, dk, dv, dalpha = band_reference_grad(q, k, v, alpha, W, dO)
    loss = lambda a: float((band_reference(q, k, v, a, W) * dO).sum())
    for h in range(H):
        e = torch.zeros(H, dtype=torch.float64)
        e[h] = 1e-6
        fd = (loss(alpha + e) - loss(alpha - e)) / 2e-6
        assert abs(dalpha[h].item() - fd) < 1e-6 * max(1.0, abs(fd))
    e = torch.zeros_like(q)
    e[0, 1, 3, 2] = 1e-6
    fd = (float((band_reference(q + e, k, v, alpha, W) * dO).sum()) -
          float((band_reference(q - e, k, v, alpha, W) * dO).sum())) / 2e-6
    assert abs(dq[0, 1, 3, 2].item() - fd) < 1e-6 * max(1.0, abs(fd))


def test_latent_reference_matches_the_definition():
    """latent_reference (the harness's fp64 check of the latent case) against the definition
    written per head without chunking (causal and not), and its chunking changing nothing."""
    from reference import latent_reference
    g = torch.Generator().manual_seed(5)
    B, H, N, D, L, Dv = 2, 3, 9, 4, 8, 5
    q = torch.randn(B, H, N, D, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, N, L, generator=g, dtype=torch.float64) for _ in range(2))
    wq, wv = torch.randn(H, D, L, generator=g, dtype=torch.float64), torch.randn(H, L, Dv, generator=g,
                                                                                 dtype=torch.float64)
    for causal in (False, True):
        out = latent_reference(q, k, v, wq, wv, causal=causal)
        for b in range(B):
            for h in range(H):
                s = (q[b, h] @ wq[h]) @ k[b].T / math.sqrt(L)
                if causal:
                    s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
                assert torch.allclose(out[b, h], torch.softmax(s, dim=-1) @ v[b] @ wv[h], atol=1e-12)
        assert torch.allclose(latent_reference(q, k, v, wq, wv, causal=causal, chunk_scores=2 * N), out, atol=1e-12)


def test_latent_reference_grad_matches_autograd_of_the_definition():
    """latent_reference_grad against torch autograd through the unchunked definition (causal
    and not), and its row blocks changing nothing."""
    from reference import latent_reference_grad
    g = torch.Generator().manual_seed(6)
    B, H, N, D, L, Dv = 2, 3, 9, 4, 8, 5
    q = torch.randn(B, H, N, D, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, N, L, generator=g, dtype=torch.float64) for _ in range(2))
    wq, wv = torch.randn(H, D, L, generator=g, dtype=torch.float64), torch.randn(H, L, Dv, generator=g,
                                                                                 dtype=torch.float64)
    dO = torch.randn(B, H, N, Dv, generator=g, dtype=torch.float64)
    for causal in (False, True):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v, wq, wv)]
        ql, kl, vl, wql, wvl = leaves
        s = torch.einsum("bhnd,hdl,bml->bhnm", ql, wql, kl) / math.sqrt(L)
        if causal:
            s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
        out = torch.einsum("bhnm,bml,hlv->bhnv", torch.softmax(s, dim=-1), vl, wvl)
        (out * dO).sum().backward()
        for chunk in (1 << 27, 2 * N):
            got = latent_reference_grad(q, k, v, wq, wv, dO, causal=causal, chunk_scores=chunk)
            for name, a, leaf in zip(("dq", "dk", "dv", "dw_qlat", "dw_vup"), got, leaves):
                assert torch.allclose(a, leaf.grad, atol=1e-10), f"{name} causal={causal} chunk={chunk}"
