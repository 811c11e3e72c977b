"""Tests of reference.reference's score_conv= and gate= on small CPU tensors (skipped
without torch): against the definition written as plain loops (SEMANTICS.md section 3 with
the mask rule of docs/score_convolution.md), the identity kernel against causal attention,
query-row chunking (the halo rows) changing nothing, conv_reference (the harness's MTA
reference) agreeing, and the gate.

    /usr/bin/python3 -m pytest -q bench/test_reference_conv_gate.py
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from reference import conv_reference, reference  # noqa: E402


def loops(q, k, v, theta, scale, keep=None, cap=None, gate=None):
    """The definition element by element in Python floats: keep [Hq, Nq, Nk] bools or None,
    cap a softcap applied to C, gate [B, Hq, Nq, Dv] or None."""
    B, Hq, Nq, D = q.shape
    Hkv, Nk, Dv = k.shape[1], k.shape[2], v.shape[3]
    c_q, c_k = theta.shape[1], theta.shape[2]
    p_k = (c_k - 1) // 2
    out = torch.zeros(B, Hq, Nq, Dv, dtype=torch.float64)
    for b in range(B):
        for h in range(Hq):
            kvh = h // (Hq // Hkv)

            def mask(i, j):
                return True if keep is None else bool(keep[h, i, j])

            def s0(i, j):
                if i < 0 or i >= Nq or j < 0 or j >= Nk or j > i or not mask(i, j):
                    return 0.0
                return scale * sum(float(q[b, h, i, d]) * float(k[b, kvh, j, d]) for d in range(D))

            for i in range(Nq):
                z = [-math.inf] * Nk
                for j in range(Nk):
                    if j > i or not mask(i, j):
                        continue
                    c = 0.0
                    for a in range(c_q):
                        for bb in range(c_k):
                            ii, jj = i - (c_q - 1) + a, j - p_k + bb
                            if 0 <= jj < Nk and ii >= 0 and mask(i, jj) and mask(ii, j):
                                c += float(theta[h, a, bb]) * s0(ii, jj)
                    z[j] = c if cap is None else cap * math.tanh(c / cap)
                m = max(z)
                if m == -math.inf:
                    continue  # no kept key: 0
                w = [math.exp(x - m) for x in z]
                total = sum(w)
                for d in range(Dv):
                    o = sum(w[j] / total * float(v[b, kvh, j, d]) for j in range(Nk))
                    if gate is not None:
                        o /= 1.0 + math.exp(-float(gate[b, h, i, d]))
                    out[b, h, i, d] = o
    return out


def inputs(B, Hq, Hkv, Nq, Nk, D, c_q, c_k, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Nq, D, generator=g)
    k = torch.randn(B, Hkv, Nk, D, generator=g)
    v = torch.randn(B, Hkv, Nk, D, generator=g)
    theta = 0.5 * torch.randn(Hq, c_q, c_k, generator=g)
    return q, k, v, theta, g


@pytest.mark.parametrize("rows_per_chunk", [1, 2, 100])
def test_matches_the_loops_with_a_mask_softcap_and_gate(rows_per_chunk):
    B, Hq, Hkv, Nq, Nk, D = 2, 2, 1, 6, 7, 3
    q, k, v, theta, g = inputs(B, Hq, Hkv, Nq, Nk, D, 3, 5, seed=1)
    keep = torch.rand(Hq, Nq, Nk, generator=g) < 0.7  # no equivalence: both tap conditions matter
    gate = torch.randn(B, Hq, Nq, D, generator=g)
    cap, scale = 2.0, 0.6
    out = reference(q, k, v, score_mod=lambda s, b, h, i, j: cap * torch.tanh(s / cap),
                    mask=lambda b, h, i, j: keep[h.view(-1)][None, :, i.view(-1)][..., j.view(-1)],
                    scale=scale, chunk_scores=rows_per_chunk * B * Hq * Nk, score_conv=theta, gate=gate)
    torch.testing.assert_close(out, loops(q, k, v, theta, scale, keep, cap, gate), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("c_q,c_k", [(1, 1), (3, 3), (6, 11)])
def test_identity_kernel_is_causal_attention(c_q, c_k):
    q, k, v, _, _ = inputs(1, 2, 2, 9, 9, 4, c_q, c_k, seed=2)
    theta = torch.zeros(2, c_q, c_k)
    theta[:, c_q - 1, (c_k - 1) // 2] = 1.0
    torch.testing.assert_close(reference(q, k, v, score_conv=theta, chunk_scores=2 * 2 * 9),
                               reference(q, k, v, causal=True), rtol=1e-12, atol=1e-12)


def test_paper_kernel_without_a_mask_matches_the_loops_and_conv_reference():
    q, k, v, theta, _ = inputs(1, 2, 2, 8, 8, 4, 6, 11, seed=3)
    out = reference(q, k, v, score_conv=theta, chunk_scores=3 * 2 * 8)
    torch.testing.assert_close(out, loops(q, k, v, theta, 0.5), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, conv_reference(q, k, v, theta), rtol=1e-12, atol=1e-12)


def test_gate_scales_the_output_and_broadcasts():
    q, k, v, _, g = inputs(2, 2, 2, 5, 6, 4, 1, 1, seed=4)
    gate = torch.randn(1, 2, 5, 4, generator=g)  # one gate for both batch rows
    plain = reference(q, k, v, causal=True)
    torch.testing.assert_close(reference(q, k, v, causal=True, gate=gate),
                               plain * torch.sigmoid(gate.double()), rtol=0, atol=0)


def test_conv_reference_grad_matches_finite_differences():
    """conv_reference_grad (the harness's fwdbwd reference of mta_conv) against central
    differences of sum(conv_reference * dO), for an element of q, k, v and theta each."""
    from reference import conv_reference_grad
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=g, dtype=torch.float64) for _ in range(3))
    theta = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    dO = torch.randn(1, 2, 9, 4, generator=g, dtype=torch.float64)
    grads = conv_reference_grad(q, k, v, theta, dO)
    for which, t, idx in ((0, q, (0, 1, 5, 2)), (1, k, (0, 0, 3, 1)), (2, v, (0, 1, 7, 3)), (3, theta, (1, 2, 1))):
        eps = 1e-6
        plus, minus = t.clone(), t.clone()
        plus[idx] += eps
        minus[idx] -= eps
        args = [q, k, v, theta]
        f = []
        for x in (plus, minus):
            args[which] = x
            f.append(float((conv_reference(*args) * dO).sum()))
        fd = (f[0] - f[1]) / (2 * eps)
        assert abs(float(grads[which][idx]) - fd) <= 1e-6 + 1e-6 * abs(fd), (which, float(grads[which][idx]), fd)
