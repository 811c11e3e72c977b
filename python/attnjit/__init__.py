"""attnjit for PyTorch: FlexAttention-style score_mod / mask functions, traced once into
attnjit's expression language and compiled by attnjit's JIT (through libattnjit_c.so).

    import attnjit
    out = attnjit.attention(q, k, v, score_mod=attnjit.mods.softcap(30.0), causal=True)
    fn = attnjit.compile(mask=attnjit.mods.sliding_window(256))
    out = fn(q, k, v)
    out = attnjit.latent_attention(q, k_lat, v_lat, w_qlat, w_vup, causal=True)  # MLA, forward
    attnjit.load_bundle("kernels/")  # kernels compiled ahead of time by attnjit-aot (docs/aot.md)

See python/README.md for the tracing rules, errors and the per-call overhead.
"""
import sys as _sys

from . import mods, ops
from .api import attention, compile, spec_json
from .bundles import load_bundle, num_bundles
from .capture import TensorPlaceholder
from .compiled import CompiledAttention
from .evoformer import evoformer_attention
from .errors import (ArgumentError, AttnjitError, InternalError, LibraryNotFoundError,
                     RuntimeEnvironmentError, SpecError, UnsupportedTraceError)
from .latent import latent_attention
from .trace import trace

__version__ = "0.1.0"

if "torch" in _sys.modules:  # register the torch ops now, before any torch.compile (else: on first use)
    from . import torch_ops as _torch_ops
    _torch_ops.install()

__all__ = ["attention", "compile", "spec_json", "load_bundle", "num_bundles", "evoformer_attention", "latent_attention", "trace", "mods", "ops",
           "CompiledAttention", "TensorPlaceholder", "AttnjitError", "SpecError", "ArgumentError",
           "UnsupportedTraceError", "RuntimeEnvironmentError", "LibraryNotFoundError", "InternalError"]
