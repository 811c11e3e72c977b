"""evoformer_attention's layout logic on the CPU with torch (no GPU, no library): which
launches it makes (one over [B S, H, N, c] views when B and S merge, else one per batch
row), that they are views of the inputs (no copies), how the biases are indexed, and, with
a float64 stand-in for the compiled kernel that evaluates the very score_mod attnjit traces,
that outputs and gradients (q, k, v, gate, mask bias, pair bias summed over S) equal an
OpenFold-style reference. The kernels' numbers are test_evoformer_gpu.py's business."""
import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import attnjit  # noqa: E402
from attnjit import evoformer  # noqa: E402


def reference(q, k, v, biases, gate):
    """OpenFold's way, float64: [B, S, N, H, c] -> logits [B, S, H, N, Nk] + biases."""
    qd, kd, vd = (t.double() for t in (q, k, v))
    logits = torch.einsum("bsihc,bsjhc->bshij", qd, kd) / math.sqrt(q.shape[-1])
    for t in biases or ():
        if t is not None:
            logits = logits + t.double()
    out = torch.einsum("bshij,bsjhc->bsihc", torch.softmax(logits, dim=-1), vd)
    return out * torch.sigmoid(gate.double()) if gate is not None else out


class StandIn:
    """Replaces evoformer._callable: a 'compiled callable' that computes attention in float64
    with torch, reading the biases through the score_mod evoformer builds (with broadcasting
    index tensors instead of traced ones), and records its launches."""

    def __init__(self):
        self.launches = []
        self.patterns = []

    def __call__(self, pattern, bias_dtypes):
        score_mod, bind = evoformer._biased_attention(pattern)
        self.patterns.append(pattern)

        def fn(q, k, v, gate=None):
            self.launches.append((q, k, v, gate))
            X, H, N, c = q.shape
            Nk = k.shape[2]
            s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(c)
            b = torch.arange(X).view(X, 1, 1, 1)
            h = torch.arange(H).view(1, H, 1, 1)
            i = torch.arange(N).view(1, 1, N, 1)
            j = torch.arange(Nk).view(1, 1, 1, Nk)
            t = score_mod(s, b, h, i, j)
            out = torch.softmax(t, dim=-1) @ v.double()
            if gate is not None:
                out = out * torch.sigmoid(gate.double())
            return out.to(q.dtype)
        return fn, bind


@pytest.fixture
def stand_in(monkeypatch):
    s = StandIn()
    monkeypatch.setattr(evoformer, "_callable", s)
    return s


def msa(B, S, N, H, c, Nk=None, grad=True):
    torch.manual_seed(7)
    Nk = Nk or N
    q, g = torch.randn(B, S, N, H, c), torch.randn(B, S, N, H, c)
    k, v = torch.randn(B, S, Nk, H, c), torch.randn(B, S, Nk, H, c)
    mask_bias = 1e9 * ((torch.rand(B, S, 1, 1, Nk) > 0.2).float() - 1)
    pair = torch.randn(B, 1, H, N, Nk)
    if grad:
        for t in (q, k, v, g, pair):
            t.requires_grad_()
    return q, k, v, g, mask_bias, pair


def shares_storage(view, tensor):
    return view.storage().data_ptr() == tensor.storage().data_ptr()


def check_against_reference(q, k, v, biases, g, leaves):
    out = attnjit.evoformer_attention(q, k, v, biases, gate=g)
    ref = reference(q, k, v, biases, g)
    assert out.shape == ref.shape and out.dtype == q.dtype
    assert torch.allclose(out.double(), ref, atol=1e-5, rtol=1e-5), (out.double() - ref).abs().max()
    w = torch.randn(out.shape, dtype=torch.float64)
    got = torch.autograd.grad((out.double() * w).sum(), leaves)
    want = torch.autograd.grad((ref * w).sum(), leaves)
    for a, b, n in zip(got, want, range(len(leaves))):
        assert a.shape == b.shape
        assert torch.allclose(a.double(), b.double(), atol=1e-4, rtol=1e-4), f"gradient {n}: {(a - b).abs().max()}"
    return out


@pytest.mark.parametrize("B,c", [(1, 32), (2, 32), (1, 64), (2, 64)])
def test_row_attention_with_mask_and_pair_bias(stand_in, B, c):
    q, k, v, g, mask_bias, pair = msa(B, 3, 50, 4, c)
    check_against_reference(q, k, v, [mask_bias, pair], g, (q, k, v, g, pair))
    # B == 1: one launch over [S, H, N, c]; B == 2 with a pair bias [B, 1, H, N, N] (which
    # would need b // S): one launch per batch row over [S, H, N, c]
    assert len(stand_in.launches) == B
    assert stand_in.patterns == [((True, False, False, True), (False, True, True, True))]
    for lq, lk, lv, lg in stand_in.launches:
        assert lq.shape == (3, 4, 50, c) and lg.shape == lq.shape
        assert all(shares_storage(x, t) for x, t in ((lq, q), (lk, k), (lv, v), (lg, g)))  # views, no copies


def test_b_and_s_merge_into_one_launch(stand_in):
    # B > 1, contiguous tensors, biases that vary over both B and S or neither: one launch
    # over [B S, H, N, c] views, and the result is a view of its output.
    B, S, N, H, c = 2, 3, 50, 4, 32
    q, k, v, g, mask_bias, _ = msa(B, S, N, H, c)
    shared_pair = torch.randn(1, 1, H, N, N, requires_grad=True)
    mask_bias.requires_grad_()
    out = check_against_reference(q, k, v, [mask_bias, shared_pair], g, (q, k, v, g, mask_bias, shared_pair))
    assert len(stand_in.launches) == 1
    lq, lk, lv, lg = stand_in.launches[0]
    assert lq.shape == (B * S, H, N, c) and lq.stride() == (N * H * c, c, H * c, 1)
    assert all(shares_storage(x, t) for x, t in ((lq, q), (lk, k), (lv, v), (lg, g)))
    assert torch.equal(lq[1 * S + 2, 3, 7], q[1, 2, 7, 3])
    assert out.shape == (B, S, N, H, c) and out._base is not None  # a view of the kernel's output


def test_layout_plans():
    B, S, N, H, c = 2, 3, 10, 4, 8
    q, k, v, g, mask_bias, pair = msa(B, S, N, H, c, grad=False)
    flat, pattern, launches = evoformer._launches(q, k, v, g, [mask_bias, pair])
    assert not flat and len(launches) == B and pattern == ((True, False, False, True), (False, True, True, True))
    assert [tuple(t.shape) for t in launches[1][4]] == [(S, 1, 1, N), (1, H, N, N)]
    assert torch.equal(launches[1][4][1], pair[1])
    flat, pattern, launches = evoformer._launches(q, k, v, None, [mask_bias, pair[:1, :1]])
    assert flat and len(launches) == 1 and launches[0][3] is None
    assert [tuple(t.shape) for t in launches[0][4]] == [(B * S, 1, 1, N), (1, H, N, N)]
    # a bias [1, S, ...] shared by the batch rows would need b % S: per batch row
    flat, pattern, _ = evoformer._launches(q, k, v, None, [mask_bias[:1]])
    assert not flat and pattern == ((True, False, False, True),)
    # transposed views (column attention) do not merge B and S: per batch row
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    flat, _, launches = evoformer._launches(qt, kt, vt, None, [])
    assert not flat and launches[0][0].shape == (N, H, S, c) and launches[0][0].stride(-1) == 1
    # ... unless B == 1
    flat, _, launches = evoformer._launches(qt[:1], kt[:1], vt[:1], None, [])
    assert flat and launches[0][0].shape == (N, H, S, c)
    # a gate broadcast over S and B (stride 0) merges; one broadcast over S only does not
    flat, _, _ = evoformer._launches(q, k, v, torch.randn(1, 1, N, H, c).expand(B, S, N, H, c), [])
    assert flat
    flat, _, _ = evoformer._launches(q, k, v, torch.randn(B, 1, N, H, c).expand(B, S, N, H, c), [])
    assert not flat


def test_column_attention_through_transposes(stand_in):
    B, S, N, H, c = 2, 7, 9, 4, 32
    q, k, v, g, _, _ = msa(B, S, N, H, c)
    col_mask = 1e9 * ((torch.rand(B, N, 1, 1, S) > 0.1).float() - 1)
    qt, kt, vt, gt = (t.transpose(1, 2) for t in (q, k, v, g))
    check_against_reference(qt, kt, vt, [col_mask], gt, (q, k, v, g))
    assert len(stand_in.launches) == B
    assert all(shares_storage(x, t) for x, t in zip(stand_in.launches[0], (q, k, v, g)))


def test_broadcast_gate_none_biases_and_no_biases(stand_in):
    B, S, N, H, c = 2, 3, 11, 2, 8
    q, k, v, _, mask_bias, pair = msa(B, S, N, H, c, Nk=13)
    g = torch.randn(1, 1, N, H, c, requires_grad=True)  # broadcast: its gradient sums over B and S
    check_against_reference(q, k, v, [None, pair], g, (q, k, v, g, pair))
    check_against_reference(q, k, v, None, None, (q, k, v))
    check_against_reference(q, k, v, [mask_bias, None], g, (q, g))


def test_bad_arguments_raise_clear_errors(stand_in):
    q, k, v, g, mask_bias, pair = msa(1, 2, 16, 4, 8, grad=False)
    cases = [
        ((q[0], k, v), {}, "5-D tensor [B, S, N, H, c]"),
        ((q, k[:, :, :, :2], v), {}, "must be [B, S, Nk, H, c]"),
        ((q.double(), k.double(), v.double()), {}, "float16, bfloat16 or float32"),
        ((q, k, v), {"gate": g[:, :, :3]}, "shaped like q"),
        ((q, k, v), {"gate": 2.0}, "gate must be a torch.Tensor"),
        ((q, k, v, [mask_bias, pair, pair]), {}, "at most 2"),
        ((q, k, v, [pair[..., :8]]), {}, "broadcastable to [B, S, H, N, Nk]"),
        ((q, k, v, [mask_bias.double()]), {}, "q's dtype"),
        ((q, k, v, [mask_bias.to("meta")]), {}, "is on meta but q is on cpu"),
    ]
    for args, kwargs, fragment in cases:
        with pytest.raises(attnjit.ArgumentError) as info:
            attnjit.evoformer_attention(*args, **kwargs)
        assert fragment in str(info.value), (fragment, str(info.value))
    assert not stand_in.launches
