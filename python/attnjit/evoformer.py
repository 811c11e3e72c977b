"""attnjit.evoformer_attention: AlphaFold's MSA attention (row or column) in the
[B, S, N, H, c] layout DeepSpeed's DS4Sci_EvoformerAttention takes, on attnjit's general path.

The biases become a score_mod over captured tensors and the gate the kernel's output gate
(docs/semantics.md), so one fused kernel runs per batch row with no N x N tensor and no
copy of q, k, v or the gate: each batch row's [S, N, H, c] tensors are viewed as
[S, H, N, c] through strides."""
from __future__ import annotations

import threading

from . import dtypes
from .capture import TensorPlaceholder
from .errors import ArgumentError

_MAX_BIASES = 2
_cache: dict = {}  # which dims each bias indexes -> (compiled callable, bind)
_cache_lock = threading.Lock()


def _biased_attention(pattern):
    """A compiled callable adding up to two captured biases t_k[s?, h?, q?, kv?] to the
    score, each index read only where the bias is not broadcast (else index 0), and bind(t0,
    t1) to set the tensors it reads next (its closure cells: re-read at every call)."""
    t0 = t1 = None
    n = len(pattern)
    s0, h0, q0, k0 = pattern[0] if n >= 1 else (False,) * 4
    s1, h1, q1, k1 = pattern[1] if n >= 2 else (False,) * 4

    def score_mod(score, b, h, q_idx, kv_idx):
        if n >= 1:
            score = score + t0[b if s0 else 0, h if h0 else 0, q_idx if q0 else 0, kv_idx if k0 else 0]
        if n >= 2:
            score = score + t1[b if s1 else 0, h if h1 else 0, q_idx if q1 else 0, kv_idx if k1 else 0]
        return score

    def bind(a=None, c=None):
        nonlocal t0, t1
        t0, t1 = a, c
    return score_mod, bind


def _callable(pattern, dtypes_of_biases):
    """The compiled callable and its bind() for these biases, one per thread (bind sets
    closure cells that the next call reads)."""
    key = (pattern, dtypes_of_biases, threading.get_ident())
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    from .api import compile as compile_attention
    score_mod, bind = _biased_attention(pattern)
    bind(*[TensorPlaceholder(d, 4) for d in dtypes_of_biases])  # what the trace sees: dtype, rank
    fn = compile_attention(score_mod if pattern else None)
    with _cache_lock:
        _cache[key] = (fn, bind)
    return fn, bind


def evoformer_attention(q, k, v, biases=(), gate=None):
    """out[b, s, i, h] = sigmoid(gate[b, s, i, h]) * sum_j softmax_j(q[b, s, i, h] . k[b, s, j, h]
    / sqrt(c) + sum of biases[b, s, h, i, j]) v[b, s, j, h].

    q [B, S, N, H, c], k and v [B, S, Nk, H, c], gate (optional) like q: CUDA tensors of one
    dtype (float16, bfloat16, float32), any strides with a contiguous last dimension.
    biases: up to two tensors broadcastable to [B, S, H, N, Nk] (extent 1 or full in each
    dimension), e.g. AlphaFold's mask bias [B, S, 1, 1, Nk] and pair bias [B, 1, H, N, Nk].
    Row attention attends over residues for each MSA row; column attention is the same call
    with the S and N axes swapped by the caller (q.transpose(1, 2), a [B, N, 1, 1, S] mask
    bias, no pair bias): views, no copies.
    Returns [B, S, N, H, c] (a view of the kernel's [B S, H, N, c] output when B == 1).
    Autograd: q, k, v, the gate and the biases get gradients when they require grad; a pair
    bias broadcast over S gets the sum over S, from the kernel (deterministic).
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
    if gate is not None and (not isinstance(gate, torch.Tensor) or tuple(gate.shape) != (B, S, N, H, c)):
        raise ArgumentError(f"gate must be shaped like q, {[B, S, N, H, c]}")
    biases = list(biases or ())
    if len(biases) > _MAX_BIASES:
        raise ArgumentError(f"{len(biases)} biases given; evoformer_attention takes at most {_MAX_BIASES} "
                            "(a mask bias and a pair bias): add the others together first")
    full = (B, S, H, N, Nk)
    pattern = []
    for n, t in enumerate(biases):
        if not isinstance(t, torch.Tensor) or t.dim() != 5 or any(
                d not in (1, f) for d, f in zip(t.shape, full)):
            raise ArgumentError(f"biases[{n}] has shape {tuple(getattr(t, 'shape', ()))}; each bias must be "
                                f"broadcastable to [B, S, H, N, Nk] = {list(full)} (extent 1 or full per "
                                "dimension)")
        if t.dtype is not q.dtype and t.dtype is not torch.float32:
            raise ArgumentError(f"biases[{n}] has dtype {t.dtype}; use q's dtype ({q.dtype}) or float32")
        pattern.append(tuple(d != 1 for d in t.shape[1:]))
    pattern = tuple(pattern)
    fn, bind = _callable(pattern, tuple(dtypes.name_of(t.dtype) for t in biases))

    def heads_major(t, b):  # [S, N, H, c] of batch row b as [S, H, N, c]: a view
        return t[b].transpose(1, 2)
    outs = []
    for b in range(B):
        bind(*[t[b if t.shape[0] > 1 else 0] for t in biases])
        g = heads_major(gate, b) if gate is not None else None
        outs.append(fn(heads_major(q, b), heads_major(k, b), heads_major(v, b), gate=g))
    bind()  # drop the references to this call's biases
    if B == 1:
        return outs[0].transpose(1, 2).unsqueeze(0)
    return torch.stack([o.transpose(1, 2) for o in outs])
