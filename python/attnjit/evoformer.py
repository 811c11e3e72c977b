"""attnjit.evoformer_attention: AlphaFold's MSA attention (row or column) in the
[B, S, N, H, c] layout DeepSpeed's DS4Sci_EvoformerAttention takes, on attnjit's general path.

The biases become a score_mod over captured tensors and the gate the kernel's output gate
(docs/semantics.md), so the attention runs as fused kernels with no N x N tensor and no copy
of q, k, v or the gate: the [B, S, N, H, c] tensors are viewed as [B S, H, N, c] through
strides (one launch) when their B and S dimensions merge, else each batch row's [S, N, H, c]
as [S, H, N, c] (one launch per batch row). _launches() is that layout logic, a pure function
of the tensors (tested on the CPU)."""
from __future__ import annotations

import threading

from . import dtypes
from .capture import TensorPlaceholder
from .errors import ArgumentError

_MAX_BIASES = 2
_cache: dict = {}  # which dims each bias indexes -> (compiled callable, bind)
_cache_lock = threading.Lock()


def _biased_attention(pattern):
    """A score_mod adding up to two captured biases t_k[b?, h?, q?, kv?] to the score, each
    index read only where the bias varies (else index 0: the kernel's backward then sums
    the gradient over that index), and bind(t0, t1) to set the tensors it reads next (its
    closure cells: re-read at every call)."""
    t0 = t1 = None
    n = len(pattern)
    b0, h0, q0, k0 = pattern[0] if n >= 1 else (False,) * 4
    b1, h1, q1, k1 = pattern[1] if n >= 2 else (False,) * 4

    def score_mod(score, b, h, q_idx, kv_idx):
        if n >= 1:
            score = score + t0[b if b0 else 0, h if h0 else 0, q_idx if q0 else 0, kv_idx if k0 else 0]
        if n >= 2:
            score = score + t1[b if b1 else 0, h if h1 else 0, q_idx if q1 else 0, kv_idx if k1 else 0]
        return score

    def bind(a=None, c=None):
        nonlocal t0, t1
        t0, t1 = a, c
    return score_mod, bind


def _callable(pattern, bias_dtypes):
    """The compiled callable and its bind() for these biases (bias_dtypes: torch dtypes), one
    per thread (bind sets closure cells that the next call reads)."""
    names = tuple(dtypes.name_of(d) for d in bias_dtypes)
    key = (pattern, names, threading.get_ident())
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    from .api import compile as compile_attention
    score_mod, bind = _biased_attention(pattern)
    bind(*[TensorPlaceholder(d, 4) for d in names])  # what the trace sees: dtype, rank
    fn = compile_attention(score_mod if pattern else None)
    with _cache_lock:
        _cache[key] = (fn, bind)
    return fn, bind


def _merge_bs(t, B: int, S: int):
    """t [B', S', ...] (B' in (1, B), S' in (1, S)) as [B' S', ...] without a copy, or None
    when its strides do not allow that view."""
    try:
        return t.view(t.shape[0] * t.shape[1], *t.shape[2:])
    except RuntimeError:
        return None


def _heads_major(t):
    """[X, N, H, c] as [X, H, N, c]: a view."""
    return t.transpose(1, 2)


def _launches(q, k, v, gate, biases):
    """How evoformer_attention runs: (flat, pattern, launches).

    q, k, v, gate [B, S, N(k), H, c] (gate expanded to q's shape, or None); biases: 5-D
    tensors broadcastable to [B, S, H, N, Nk] (checked). launches: one (q, k, v, gate,
    biases) per kernel launch, q, k, v, gate as [X, H, N(k), c] views of the inputs and each
    bias as a [X', H', N', Nk'] view (X' = 1 or X, H' = 1 or H, ...), where X = B S when
    `flat` (one launch: every tensor's B and S dimensions merge through strides, and no bias
    varies over one of B and S but not the other), else X = S, one launch per batch row.
    pattern: per bias, which of (batch, head, query, key) it varies over (the score_mod
    indexes those and reads index 0 of the others)."""
    B, S = q.shape[0], q.shape[1]
    flat = None
    if B == 1 or S == 1 or B * S == 0:
        flat = True  # any strides merge a dimension of extent 1
    if flat is None:
        flat = all(_merge_bs(t, B, S) is not None for t in (q, k, v, gate) if t is not None)
        for t in biases:
            if not flat:
                break
            whole = t.shape[0] * t.shape[1]
            flat = (whole == 1 or whole == B * S) and _merge_bs(t, B, S) is not None
    pattern = []
    for t in biases:
        varies = (t.shape[0] * t.shape[1] > 1) if flat else t.shape[1] > 1
        pattern.append((varies, t.shape[2] > 1, t.shape[3] > 1, t.shape[4] > 1))
    pattern = tuple(pattern)
    if flat:
        views = [_merge_bs(t, B, S) if t is not None else None for t in (q, k, v, gate)]
        launch = tuple(_heads_major(t) if t is not None else None for t in views)
        return True, pattern, [launch + ([_merge_bs(t, B, S) for t in biases],)]
    launches = []
    for b in range(B):
        launch = tuple(_heads_major(t[b]) if t is not None else None for t in (q, k, v, gate))
        launches.append(launch + ([t[b if t.shape[0] > 1 else 0] for t in biases],))
    return False, pattern, launches


def evoformer_attention(q, k, v, biases=(), gate=None):
    """out[b, s, i, h] = sigmoid(gate[b, s, i, h]) * sum_j softmax_j(q[b, s, i, h] . k[b, s, j, h]
    / sqrt(c) + sum of biases[b, s, h, i, j]) v[b, s, j, h]   (AlphaFold's MSA attention)

    q [B, S, N, H, c], k and v [B, S, Nk, H, c]: CUDA tensors of one dtype (float16,
    bfloat16, float32), any strides with a contiguous last dimension (B batch, S MSA rows,
    N residues, H heads, c head dim: a multiple of 8 up to 256).
    gate (optional): the output gate's logits, of q's dtype, shaped like q or broadcastable to
    it (sigmoid is applied inside the kernel's epilogue).
    biases: a list of up to two tensors (None entries are skipped, as DeepSpeed allows)
    broadcastable to [B, S, H, N, Nk] (extent 1 or full in each dimension), of q's dtype or
    float32, e.g. AlphaFold's mask bias [B, S, 1, 1, Nk] (1e9 * (mask - 1)) and pair bias
    [B, 1, H, N, Nk], as DeepSpeed's DS4Sci_EvoformerAttention(q, k, v, [mask_bias,
    pair_bias]) takes them.
    Returns out [B, S, N, H, c] in q's dtype.

    How it runs: the biases become a score_mod reading them as captured tensors, the gate
    the kernel's fused output gate; q, k, v and the gate are not copied: they are viewed as
    [B S, H, N, c] through strides, one launch, when each one's B and S dimensions merge
    (stride(0) == S * stride(1), true of contiguous tensors; always when B == 1) and no
    bias varies over one of B and S only; otherwise (e.g. B > 1 with a pair bias
    [B, 1, H, N, Nk], whose read b // S attnjit cannot differentiate yet, or column
    attention's transposed views) each batch row's tensors are viewed as [S, H, N, c] and
    the batch rows run one launch each. The result is then a view of the kernel's output
    (flat) or a new [B, S, N, H, c] tensor (per batch row). Only a q, k, v or gate whose last
    dimension is not contiguous (stride(-1) != 1), which no strided view can express, is
    copied (.contiguous()) first.

    Row attention attends over residues for each MSA row; column attention is the same call
    on the tensors with S and N swapped by the caller (q.transpose(1, 2), ..., a
    [B, N, 1, 1, S] mask bias, no pair bias): views, no copies.

    Autograd: q, k, v, the gate and the biases get .grad when they require grad (and grad
    mode is on). A bias broadcast over a dimension gets the sum over it: the pair bias
    [B, 1, H, N, Nk] is read at index 0 of S by the kernel, whose backward sums its gradient
    over the MSA rows deterministically. A broadcast gate is materialised for its gradient
    and autograd sums it back.
    """
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 5:
            raise ArgumentError(f"{name} must be a 5-D tensor [B, S, N, H, c], got "
                                f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    B, S, N, H, c = q.shape
    Nk = k.shape[2]
    if tuple(k.shape) != (B, S, Nk, H, c) or tuple(v.shape) != (B, S, Nk, H, c):
        raise ArgumentError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must be [B, S, Nk, H, c] with q's "
                            f"B, S, H, c = {B}, {S}, {H}, {c}")
    if dtypes.name_of(q.dtype) not in dtypes.ATTENTION_DTYPES:
        raise ArgumentError(f"q has dtype {q.dtype}; evoformer_attention takes float16, bfloat16 or float32")
    if gate is not None:
        if not isinstance(gate, torch.Tensor):
            raise ArgumentError(f"gate must be a torch.Tensor, got {type(gate).__name__}")
        if tuple(gate.shape) != (B, S, N, H, c):
            try:
                gate = gate.expand(B, S, N, H, c)
            except RuntimeError:
                raise ArgumentError(f"gate has shape {tuple(gate.shape)}; it must be shaped like q, "
                                    f"[B, S, N, H, c] = {[B, S, N, H, c]}, or broadcast to it") from None
    if biases is None or isinstance(biases, torch.Tensor):
        biases = () if biases is None else (biases,)
    biases = [t for t in biases if t is not None]
    if len(biases) > _MAX_BIASES:
        raise ArgumentError(f"{len(biases)} biases given; evoformer_attention takes at most {_MAX_BIASES} "
                            "(a mask bias and a pair bias): add the others together first")
    full = (B, S, H, N, Nk)
    for n, t in enumerate(biases):
        if not isinstance(t, torch.Tensor) or t.dim() != 5 or any(
                d not in (1, f) for d, f in zip(t.shape, full)):
            raise ArgumentError(f"biases[{n}] has shape {tuple(getattr(t, 'shape', ()))}; each bias must be "
                                f"broadcastable to [B, S, H, N, Nk] = {list(full)} (extent 1 or full per "
                                "dimension)")
        if t.dtype is not q.dtype and t.dtype is not torch.float32:
            raise ArgumentError(f"biases[{n}] has dtype {t.dtype}; use q's dtype ({q.dtype}) or float32")
        if t.device != q.device:
            raise ArgumentError(f"biases[{n}] is on {t.device} but q is on {q.device}; move it to the same device")
    # the last resort: a last dimension that is not contiguous cannot be expressed by strides
    q, k, v, gate = (t.contiguous() if t is not None and t.stride(-1) != 1 and t.shape[-1] > 1 else t
                     for t in (q, k, v, gate))

    flat, pattern, launches = _launches(q, k, v, gate, biases)
    fn, bind = _callable(pattern, tuple(t.dtype for t in biases))
    outs = []
    try:
        for lq, lk, lv, lg, lb in launches:
            bind(*lb)
            outs.append(fn(lq, lk, lv, gate=lg))
    finally:
        bind()  # drop the references to this call's biases
    if flat:  # [B S, H, N, c] -> [B, S, N, H, c]: a view
        return outs[0].view(B, S, H, N, c).transpose(2, 3)
    return torch.stack([o.transpose(1, 2) for o in outs])
