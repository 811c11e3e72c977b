"""The JSON spec text (docs/spec_format.md) that the C API parses."""
from __future__ import annotations

import json

from . import dtypes
from .errors import SpecError

FORMAT = "attnjit.spec/1"


SINK_DTYPES = ("f32", "f16", "bf16")


# The structural tensors a call may pass besides the captured ones, by keyword: attention
# sinks [Hq], an output gate [B, Hq, Nq, Dv], a score convolution's kernel [Hq, c_q, c_k] and
# the reciprocal band's alpha [Hq] (f32). The latent projection's two tensors are named by
# latent_names (latent.py passes them; attention() and compile() callables do not).
STRUCTURAL = ("sinks", "gate", "score_conv", "reciprocal_band")


def structural_name(traced, kind: str) -> str:
    """The name the spec gives a structural tensor (kind: one of STRUCTURAL): the kind
    itself, unless the trace captures a tensor or scalar of that name (then "sinks_1", ...)."""
    taken = {t.name for t in traced.tensors} | {s.name for s in traced.scalars}
    name, n = kind, 0
    while name in taken:
        n += 1
        name = f"{kind}_{n}"
    return name


def sinks_name(traced) -> str:
    """The name the spec gives the sinks tensor (structural_name(traced, "sinks"))."""
    return structural_name(traced, "sinks")


def latent_names(traced) -> tuple:
    """The names the spec gives a latent projection's two tensors, w_qlat [Hq, Dqk, L] and
    w_vup [Hq, L, Dv]: "w_qlat" and "w_vup" unless the trace captures those names."""
    return structural_name(traced, "w_qlat"), structural_name(traced, "w_vup")


def build(traced, *, dtype: str, head_dim_qk: int, head_dim_v: int, scale=None,
          return_lse: bool = False, q_heads: int = 0, kv_heads: int = 0, sinks_dtype: str | None = None,
          gate: bool = False, score_conv: tuple | None = None, reciprocal_band: tuple | None = None,
          latent: int | None = None) -> str:
    """The spec of a trace for one dtype and head dims. Head counts stay 0 (taken from the
    tensors at launch) unless pinned. sinks_dtype ("f32", "f16", "bf16"): attention sinks,
    a tensor [Hq] named sinks_name(traced). gate: an output gate, a tensor [B, Hq, Nq, Dv] of
    the dtype. score_conv (c_q, c_k, dtype): a score convolution, its kernel [Hq, c_q, c_k].
    reciprocal_band (W, causal): the reciprocal band of width W, its alpha an f32 tensor [Hq].
    latent L: a latent projection (MLA) of dim L, its w_qlat [Hq, Dqk, L] and w_vup
    [Hq, L, Dv] tensors of the dtype (latent_names); head_dim_qk / head_dim_v stay Q's and
    the output's. The C library checks L (a multiple of 8, and what the kernels take)."""
    name = dtypes.name_of(dtype)
    if name not in dtypes.ATTENTION_DTYPES:
        raise SpecError(f"dtype {dtype!r}: q, k and v must be float16, bfloat16 or float32")
    if scale is not None:
        scale = float(scale)
    doc = {
        "format": FORMAT,
        "dtype": name,
        "head_dim_qk": int(head_dim_qk),
        "head_dim_v": int(head_dim_v),
        "q_heads": int(q_heads),
        "kv_heads": int(kv_heads),
        "scale": scale,
        "return_lse": bool(return_lse),
        "scalars": {s.name: "float" for s in traced.scalars},
        "tensors": {t.name: {"dtype": t.dtype, "rank": t.rank} for t in traced.tensors},
        "score_mod": traced.score_mod,
        "mask": traced.mask,
    }
    if sinks_dtype is not None:
        sd = dtypes.name_of(sinks_dtype)
        if sd not in SINK_DTYPES:
            raise SpecError(f"sinks of dtype {sinks_dtype!r}: sink logits are float32, float16 or bfloat16")
        name = sinks_name(traced)
        doc["tensors"][name] = {"dtype": sd, "rank": 1}
        doc["tensors"] = dict(sorted(doc["tensors"].items()))
        doc["sinks"] = name
    if gate:
        name = structural_name(traced, "gate")
        doc["tensors"][name] = {"dtype": dtypes.name_of(dtype), "rank": 4}
        doc["gate"] = name
    if score_conv is not None:
        c_q, c_k, cd = score_conv
        name = structural_name(traced, "score_conv")
        doc["tensors"][name] = {"dtype": dtypes.name_of(cd), "rank": 3}
        doc["score_conv"] = {"tensor": name, "c_q": int(c_q), "c_k": int(c_k)}
    if reciprocal_band is not None:
        width, causal = reciprocal_band
        if isinstance(width, bool) or not isinstance(width, int) or width < 0:
            raise SpecError(f"reciprocal_band width {width!r}: the band width W is an int >= 0 (0: the diagonal alone)")
        name = structural_name(traced, "reciprocal_band")
        doc["tensors"][name] = {"dtype": "f32", "rank": 1}
        doc["reciprocal_band"] = {"width": width, "alpha": name, "causal": bool(causal)}
    if latent is not None:
        if isinstance(latent, bool) or not isinstance(latent, int):
            raise SpecError(f"latent dim {latent!r}: the latent dim L is an int (the last dimension of K and V)")
        w_qlat, w_vup = latent_names(traced)
        for name in (w_qlat, w_vup):
            doc["tensors"][name] = {"dtype": dtypes.name_of(dtype), "rank": 3}
        doc["latent"] = {"dim": latent, "w_qlat": w_qlat, "w_vup": w_vup}
    doc["tensors"] = dict(sorted(doc["tensors"].items()))
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        raise SpecError(f"scale {scale!r} must be a finite number") from None
