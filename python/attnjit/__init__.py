"""attnjit for PyTorch: FlexAttention-style score_mod / mask functions, traced once into
attnjit's expression language and compiled by attnjit's JIT (through libattnjit_c.so).

    import attnjit
    out = attnjit.attention(q, k, v, score_mod=attnjit.mods.softcap(30.0), causal=True)
    fn = attnjit.compile(mask=attnjit.mods.sliding_window(256))
    out = fn(q, k, v)

See python/README.md for the tracing rules, errors and the per-call overhead.
"""
from . import mods, ops
from .api import attention, compile, spec_json
from .capture import TensorPlaceholder
from .compiled import CompiledAttention
from .errors import (ArgumentError, AttnjitError, InternalError, LibraryNotFoundError,
                     RuntimeEnvironmentError, SpecError, UnsupportedTraceError)
from .trace import trace

__version__ = "0.1.0"

__all__ = ["attention", "compile", "spec_json", "trace", "mods", "ops", "CompiledAttention",
           "TensorPlaceholder", "AttnjitError", "SpecError", "ArgumentError", "UnsupportedTraceError",
           "RuntimeEnvironmentError", "LibraryNotFoundError", "InternalError"]
