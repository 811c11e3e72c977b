"""Element types: attnjit's names ("f16", ...), the C API codes, and torch dtypes."""
from __future__ import annotations

import sys

# attnjit_dtype values of attnjit_c.h (part of the ABI).
CODES = {"f16": 0, "bf16": 1, "f32": 2, "i32": 3, "i64": 4, "u8": 5}

# Names users may write for the attention dtype.
ALIASES = {"f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
           "bf16": "bf16", "bfloat16": "bf16",
           "f32": "f32", "fp32": "f32", "float32": "f32", "float": "f32",
           "i32": "i32", "int32": "i32", "i64": "i64", "int64": "i64",
           "u8": "u8", "bool": "u8"}

ATTENTION_DTYPES = ("f16", "bf16", "f32")

_torch_names: dict | None = None


def torch_dtype_names() -> dict:
    """{torch dtype: attnjit name} for the dtypes attnjit reads (torch.bool is stored as one
    byte per element, read as a condition)."""
    global _torch_names
    if _torch_names is None:
        import torch
        _torch_names = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                        torch.int32: "i32", torch.int64: "i64", torch.bool: "u8"}
    return _torch_names


def name_of(dtype) -> str | None:
    """attnjit's name for a string or torch dtype, or None when unsupported."""
    if isinstance(dtype, str):
        return ALIASES.get(dtype.lower().replace("torch.", ""))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        return torch_dtype_names().get(dtype)
    return None
