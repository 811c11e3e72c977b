"""The JSON spec text (docs/spec_format.md) that the C API parses."""
from __future__ import annotations

import json

from . import dtypes
from .errors import SpecError

FORMAT = "attnjit.spec/1"


SINK_DTYPES = ("f32", "f16", "bf16")


def sinks_name(traced) -> str:
    """The name the spec gives the sinks tensor: "sinks", unless the trace captures a
    tensor or scalar of that name (then "sinks_1", ...)."""
    taken = {t.name for t in traced.tensors} | {s.name for s in traced.scalars}
    name, n = "sinks", 0
    while name in taken:
        n += 1
        name = f"sinks_{n}"
    return name


def build(traced, *, dtype: str, head_dim_qk: int, head_dim_v: int, scale=None,
          return_lse: bool = False, q_heads: int = 0, kv_heads: int = 0, sinks_dtype: str | None = None) -> str:
    """The spec of a trace for one dtype and head dims. Head counts stay 0 (taken from the
    tensors at launch) unless pinned. sinks_dtype ("f32", "f16", "bf16"): attention sinks,
    a tensor [Hq] named sinks_name(traced)."""
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
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        raise SpecError(f"scale {scale!r} must be a finite number") from None
