"""The JSON spec text (docs/spec_format.md) that the C API parses."""
from __future__ import annotations

import json

from . import dtypes
from .errors import SpecError

FORMAT = "attnjit.spec/1"


def build(traced, *, dtype: str, head_dim_qk: int, head_dim_v: int, scale=None,
          return_lse: bool = False, q_heads: int = 0, kv_heads: int = 0) -> str:
    """The spec of a trace for one dtype and head dims. Head counts stay 0 (taken from the
    tensors at launch) unless pinned."""
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
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        raise SpecError(f"scale {scale!r} must be a finite number") from None
