"""Tracing: a score_mod / mask Python function -> expression text plus what it reads.

    score_mod(score, b, h, q_idx, kv_idx) -> new score (float)
    mask(b, h, q_idx, kv_idx)             -> keep (bool)

Both may also declare parameters named q_len, kv_len or kv_head (e.g.
`def mask(b, h, q_idx, kv_idx, q_len, kv_len)` for a bottom-right causal mask); they
receive those built-ins. The function runs once, on symbolic values (capture.py says what
its closure and globals become)."""
from __future__ import annotations

import inspect
import os
import types

from . import expr as e
from .capture import Captures
from .errors import UnsupportedTraceError
from .printer import referenced_names, to_text

SCORE_MOD_ARGS = ("score", "b", "h", "q_idx", "kv_idx")
MASK_ARGS = ("b", "h", "q_idx", "kv_idx")
EXTRA_ARGS = ("q_len", "kv_len", "kv_head")


class Traced:
    """The result of tracing: the expressions as text and every input the call must read."""

    def __init__(self, score_mod, mask, tensors, scalars, guards):
        self.score_mod = score_mod  # text or None (identity)
        self.mask = mask            # text or None (keep everything)
        self.tensors = tensors      # [TensorInput] sorted by name (the spec's positional order)
        self.scalars = scalars      # [ScalarInput] sorted by name
        self.guards = guards        # [Guard]: the trace is valid while all hold

    def guards_hold(self) -> bool:
        return all(g.holds() for g in self.guards)

    def __repr__(self):
        return (f"Traced(score_mod={self.score_mod!r}, mask={self.mask!r}, tensors="
                f"{[(t.name, t.dtype, t.rank) for t in self.tensors]}, scalars={[s.name for s in self.scalars]})")


def describe_function(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"'{name}'"
    return f"'{name}' ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _failing_line(tb, codes) -> str:
    """' line N' of the innermost traced frame of a traceback."""
    line = ""
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            line = f", line {tb.tb_lineno}"
        tb = tb.tb_next
    return line


def _extra_kwargs(fn, positional: int) -> dict:
    """Symbols for parameters named q_len, kv_len or kv_head after the positional ones."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    out = {}
    for i, p in enumerate(params):
        by_keyword = p.kind == p.KEYWORD_ONLY or (p.kind == p.POSITIONAL_OR_KEYWORD and i >= positional)
        if p.name in EXTRA_ARGS and by_keyword:
            out[p.name] = e.var(p.name)
    return out


def _run(fn, role: str, names: tuple, caps: Captures):
    if not callable(fn):
        raise UnsupportedTraceError(f"{role} must be a function {role}({', '.join(names)}), got {fn!r}")
    run = caps.copy_function(fn) if isinstance(fn, types.FunctionType) else fn
    args = [e.var(n) for n in names]
    try:
        return run(*args, **_extra_kwargs(run, len(names)))
    except UnsupportedTraceError as err:
        where = describe_function(fn)
        line = _failing_line(err.__traceback__, caps.codes)
        raise UnsupportedTraceError(f"{role} {where}{line}: {err.message}") from None
    except Exception as err:
        if hasattr(err, "add_note"):
            err.add_note(f"(raised while attnjit traced {role} {describe_function(fn)}, called as "
                         f"{role}({', '.join(names)}) with symbolic values)")
        raise


def _check_score(value, fn) -> e.Sym:
    if isinstance(value, e.Sym):
        if value.type == e.BOOL:
            raise UnsupportedTraceError(
                f"score_mod {describe_function(fn)} returned a condition ({e.describe(value)}); a "
                "score_mod returns the new score (a float). Put conditions in mask, or write "
                "torch.where(cond, score, -float('inf'))")
        return e.to_float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnsupportedTraceError(
            f"score_mod {describe_function(fn)} returned {e.describe(value)}; it must return the "
            "new score, a float expression of its arguments")
    return e.const(float(value))


def _check_mask(value, fn):
    if isinstance(value, bool):
        return value
    if isinstance(value, e.Sym) and value.type == e.BOOL:
        return value
    what = e.describe(value)
    raise UnsupportedTraceError(
        f"mask {describe_function(fn)} returned {what}; a mask returns a condition (True keeps the "
        "key), e.g. q_idx >= kv_idx. Combine conditions with & and |; a number-valued term "
        "belongs in score_mod")


def trace(score_mod=None, mask=None, causal: bool = False) -> Traced:
    """Traces score_mod and mask; causal=True ANDs the top-left causal condition q_idx >= kv_idx."""
    caps = Captures()
    score = None
    if score_mod is not None:
        score = _check_score(_run(score_mod, "score_mod", SCORE_MOD_ARGS, caps), score_mod)
    keep = True
    if mask is not None:
        keep = _check_mask(_run(mask, "mask", MASK_ARGS, caps), mask)
    if causal:
        diagonal = e.compare(">=", e.var("q_idx"), e.var("kv_idx"))
        keep = diagonal if keep is True else keep if keep is False else e.logical("&", keep, diagonal)
    if keep is True or (isinstance(keep, e.Sym) and keep.kind == e.CONST and keep.value is True):
        keep = None
    elif keep is False:
        keep = e.const(False)
    scalars, tensors = set(), set()
    for s in (score, keep):
        if s is not None:
            referenced_names(s, scalars, tensors)
    if isinstance(score, e.Sym) and score.kind == e.VAR and score.op == "score":
        score = None  # the identity
    return Traced(
        score_mod=None if score is None else to_text(score),
        mask=None if keep is None else to_text(keep),
        tensors=sorted((t for t in caps.tensors.values() if t.name in tensors), key=lambda t: t.name),
        scalars=sorted((s for s in caps.scalars.values() if s.name in scalars), key=lambda s: s.name),
        guards=caps.guards)
