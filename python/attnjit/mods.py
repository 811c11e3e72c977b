"""Ready-made score_mods and masks, written as ordinary traced functions (each is a
line or two: a user could write any of them). Masks take (b, h, q_idx, kv_idx), score_mods
(score, b, h, q_idx, kv_idx); the math is docs/semantics.md's.

Captured tensors keep the parameter names used here (slopes, bias, table, doc_ids,
kv_doc_ids, prefix_len) and float arguments become runtime scalars (cap), so two
modifiers built with different float values share one compiled kernel.
"""
from __future__ import annotations

import inspect
import numbers

from . import ops

_EXTRAS = ("q_len", "kv_len", "kv_head")


# ---- masks ----------------------------------------------------------------------------

def causal_mask(b, h, q_idx, kv_idx):
    """Top-left causal: key j is visible to query i when j <= i (SDPA is_causal, FlexAttention)."""
    return q_idx >= kv_idx


def causal_mask_bottom_right(b, h, q_idx, kv_idx, q_len, kv_len):
    """Bottom-right causal: j <= i + Nk - Nq (FlashAttention-2, KV-cache decode)."""
    return kv_idx <= q_idx + (kv_len - q_len)


def sliding_window(window: int, bottom_right: bool = False):
    """Causal, and only the `window` most recent keys: 0 <= d < window with d = i - j
    (bottom_right: d = i + Nk - Nq - j). window = 1 keeps the diagonal only."""
    window = int(window)
    if window < 1:
        raise ValueError(f"sliding_window({window}): the window must be at least 1")
    if bottom_right:
        def sliding_window_mask(b, h, q_idx, kv_idx, q_len, kv_len):
            d = q_idx + (kv_len - q_len) - kv_idx
            return (d >= 0) & (d < window)
    else:
        def sliding_window_mask(b, h, q_idx, kv_idx):
            d = q_idx - kv_idx
            return (d >= 0) & (d < window)
    return sliding_window_mask


def prefix_lm(prefix_len):
    """The first prefix_len keys are visible to every query, the rest causally. prefix_len
    is an int, or an int tensor [B] (one prefix per batch row)."""
    if isinstance(prefix_len, numbers.Integral):
        def prefix_lm_mask(b, h, q_idx, kv_idx):
            return (kv_idx < prefix_len) | (kv_idx <= q_idx)
    else:
        def prefix_lm_mask(b, h, q_idx, kv_idx):
            return (kv_idx < prefix_len[b]) | (kv_idx <= q_idx)
    return prefix_lm_mask


def document_mask(doc_ids, kv_doc_ids=None):
    """Queries attend to keys of the same document: doc_ids[b, i] == kv_doc_ids[b, j]
    (int tensors [B, N]; kv_doc_ids defaults to doc_ids). Ids need not be sorted."""
    if kv_doc_ids is None:
        def document_mask_fn(b, h, q_idx, kv_idx):
            return doc_ids[b, q_idx] == doc_ids[b, kv_idx]
    else:
        def document_mask_fn(b, h, q_idx, kv_idx):
            return doc_ids[b, q_idx] == kv_doc_ids[b, kv_idx]
    return document_mask_fn


# ---- score_mods -----------------------------------------------------------------------

def softcap(cap: float):
    """cap * tanh(score / cap) (Gemma 2, Grok); cap is a runtime scalar."""
    cap = float(cap)

    def softcap_mod(score, b, h, q_idx, kv_idx):
        return cap * ops.tanh(score / cap)
    return softcap_mod


def alibi(slopes):
    """score + slopes[h] * (j - i); slopes: a float tensor [Hq] (alibi_slopes(H) makes the
    usual ones)."""
    def alibi_mod(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)
    return alibi_mod


def alibi_slopes(num_heads: int, device=None):
    """The ALiBi paper's slopes 2^(-8 (h + 1) / H) as a float32 tensor [H]."""
    import torch
    h = torch.arange(1, num_heads + 1, dtype=torch.float64, device=device)
    return torch.exp2(-8.0 * h / num_heads).to(torch.float32)


def bias(bias):
    """score + bias[b, h, i, j]; bias is a float tensor [B, Hq, Nq, Nk]. A dimension of
    stride 0 broadcasts: bias.expand(B, ...) of a [1, H, N, N] tensor serves every row."""
    def bias_mod(score, b, h, q_idx, kv_idx):
        return score + bias[b, h, q_idx, kv_idx]
    return bias_mod


def relative_position_bias(table, max_distance: int):
    """score + table[h, clamp(j - i, -max_distance, max_distance) + max_distance];
    table is a float tensor [Hq, 2 * max_distance + 1]."""
    max_distance = int(max_distance)
    if max_distance < 0:
        raise ValueError(f"relative_position_bias: max_distance is {max_distance}; it must be >= 0")

    def relative_position_bias_mod(score, b, h, q_idx, kv_idx):
        rel = ops.clamp(kv_idx - q_idx, -max_distance, max_distance)
        return score + table[h, rel + max_distance]
    return relative_position_bias_mod


# ---- combinators ----------------------------------------------------------------------

def _extras_of(fn) -> tuple:
    try:
        names = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return ()
    return tuple(n for n in _EXTRAS if n in names)


def _call(fn, args, q_len, kv_len, kv_head):
    given = {"q_len": q_len, "kv_len": kv_len, "kv_head": kv_head}
    return fn(*args, **{n: given[n] for n in _extras_of(fn)})


def _pair(first, second, combine):
    def combined_mask(b, h, q_idx, kv_idx, q_len=None, kv_len=None, kv_head=None):
        args = (b, h, q_idx, kv_idx)
        return combine(_call(first, args, q_len, kv_len, kv_head), _call(second, args, q_len, kv_len, kv_head))
    return combined_mask


def and_masks(*masks):
    """A mask keeping what every one of masks keeps."""
    if not masks:
        raise ValueError("and_masks() needs at least one mask")
    out = masks[0]
    for m in masks[1:]:
        out = _pair(out, m, lambda x, y: x & y)
    return out


def or_masks(*masks):
    """A mask keeping what any one of masks keeps."""
    if not masks:
        raise ValueError("or_masks() needs at least one mask")
    out = masks[0]
    for m in masks[1:]:
        out = _pair(out, m, lambda x, y: x | y)
    return out


def compose(outer, inner):
    """The score_mod outer(inner(score, ...), ...): compose(softcap(30.0), alibi(s)) caps
    the ALiBi-biased score."""
    def composed_mod(score, b, h, q_idx, kv_idx, q_len=None, kv_len=None, kv_head=None):
        inner_score = _call(inner, (score, b, h, q_idx, kv_idx), q_len, kv_len, kv_head)
        return _call(outer, (inner_score, b, h, q_idx, kv_idx), q_len, kv_len, kv_head)
    return composed_mod


__all__ = ["causal_mask", "causal_mask_bottom_right", "sliding_window", "prefix_lm", "document_mask",
           "softcap", "alibi", "alibi_slopes", "bias", "relative_position_bias", "and_masks",
           "or_masks", "compose"]
