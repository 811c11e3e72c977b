"""FlexAttention-style score_mod / mask functions of every variant, written inline.

    score_mod(score, b, h, q_idx, kv_idx) -> score      mask(b, h, q_idx, kv_idx) -> bool

The same function objects go to FlexAttention, to the naive implementation and to the fp64
reference (there the indices are broadcasting index tensors: b [B,1,1,1], h [1,H,1,1],
q_idx [1,1,r,1], kv_idx [1,1,1,Nk]), and to attnjit when attnjit.mods lacks the variant's
helper. The causal part of a variant is not in `mask`: it is the `causal` flag (attnjit's
compile(causal=True), SDPA's is_causal, a causal block mask for flex).

Math as ../shared/SEMANTICS.md and docs/semantics.md define it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

try:  # a module global, as FlexAttention examples write it (absent on machines without torch)
    import torch
except ImportError:  # pragma: no cover - the report and the tests run without torch
    torch = None


@dataclasses.dataclass
class Variant:
    score_mod: Optional[Callable] = None
    mask: Optional[Callable] = None   # without the causal part
    causal: bool = False


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def alibi(slopes):
    def alibi_mod(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)
    return alibi_mod


def softcap(cap: float):
    def softcap_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return softcap_mod


def sliding_window(w: int):
    def window_mask(b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        return (d >= 0) & (d < w)
    return window_mask


def document_mask(doc):
    def doc_mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return doc_mask


def pair_bias(bias):
    """bias [1, H, N, N]: one pair bias for every batch row (read at batch index 0)."""
    def bias_mod(score, b, h, q_idx, kv_idx):
        return score + bias[0, h, q_idx, kv_idx]
    return bias_mod


def and_masks(*masks):
    masks = [m for m in masks if m is not None]
    if not masks:
        return None
    if len(masks) == 1:
        return masks[0]

    def both(b, h, q_idx, kv_idx):
        keep = masks[0](b, h, q_idx, kv_idx)
        for m in masks[1:]:
            keep = keep & m(b, h, q_idx, kv_idx)
        return keep
    return both


def inline_variant(variant: str, caps: dict) -> Variant:
    """The variant's mods over the captured tensors in caps (slopes, doc, bias)."""
    from cases import SOFTCAP, WINDOW, CAUSAL_VARIANTS
    causal = variant in CAUSAL_VARIANTS
    if variant in ("plain", "causal", "gqa", "gqa_causal"):
        return Variant(causal=causal)
    if variant == "alibi_causal":
        return Variant(score_mod=alibi(caps["slopes"]), causal=True)
    if variant == "softcap_causal":
        return Variant(score_mod=softcap(SOFTCAP), causal=True)
    if variant == "sliding_window":
        return Variant(mask=sliding_window(WINDOW))
    if variant == "document":
        return Variant(mask=document_mask(caps["doc"]))
    if variant == "pair_bias":
        return Variant(score_mod=pair_bias(caps["bias"]))
    if variant == "mta_conv":
        return Variant()  # the convolution is structural: impls and reference apply caps["theta"]
    if variant == "reciprocal_band":
        return Variant(causal=True)  # the band is structural: impls and reference apply caps["alpha"]
    if variant in ("msa_row", "msa_col"):
        return Variant(score_mod=msa_biases(caps["mask_bias"], caps.get("pair")))
    if variant == "latent":
        return Variant(causal=True)  # the projections are structural: impls and reference apply them
    raise ValueError(f"unknown variant {variant}")


def msa_biases(mask_bias, pair=None):
    """AlphaFold's MSA attention logits: + mask_bias[b, 0, 0, j] (+ pair[0, h, i, j])."""
    if pair is None:
        def mask_mod(score, b, h, q_idx, kv_idx):
            return score + mask_bias[b, 0, 0, kv_idx]
        return mask_mod

    def msa_mod(score, b, h, q_idx, kv_idx):
        return score + mask_bias[b, 0, 0, kv_idx] + pair[0, h, q_idx, kv_idx]
    return msa_mod


def attnjit_variant(variant: str, caps: dict, attnjit_mods, use_library: bool = True):
    """The variant for attnjit: attnjit.mods' helpers where the package has them, the inline
    functions otherwise. Returns (Variant, source) with source 'attnjit.mods' or 'inline'."""
    from cases import SOFTCAP, WINDOW
    inline = inline_variant(variant, caps)
    if not use_library or attnjit_mods is None:
        return inline, "inline"
    get = lambda name: getattr(attnjit_mods, name, None)
    made = None
    if variant == "alibi_causal" and get("alibi"):
        made = Variant(score_mod=get("alibi")(caps["slopes"]), causal=True)
    elif variant == "softcap_causal" and get("softcap"):
        made = Variant(score_mod=get("softcap")(SOFTCAP), causal=True)
    elif variant == "sliding_window" and get("sliding_window"):
        made = Variant(mask=get("sliding_window")(WINDOW))
    elif variant == "document" and get("document_mask"):
        made = Variant(mask=get("document_mask")(caps["doc"]))
    elif variant == "pair_bias" and get("bias"):
        # attnjit's bias is bias[b, h, i, j]; a stride-0 batch dimension broadcasts
        bias = caps["bias"]
        made = Variant(score_mod=get("bias")(bias.expand(caps["B"], *bias.shape[1:])))
    if made is None:
        return inline, "inline" if (inline.score_mod or inline.mask) else "none"
    return made, "attnjit.mods"
