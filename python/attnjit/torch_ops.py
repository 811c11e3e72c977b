"""attnjit under torch.compile: the torch ops attnjit::attention and attnjit::attention_backward
(torch.library.custom_op, torch >= 2.4) with fake (meta) implementations and the backward
registered, and the code torch.compile (dynamo) traces when a compiled model calls
attnjit.attention() or a CompiledAttention.

Dynamo cannot trace attnjit's tracer (it copies functions and runs them on symbolic values)
or the ctypes launch, so a call under torch.compile goes like this:
  1. _plan_for_callable / _plan_for_functions are marked as constant-result functions
     (what torch.compiler.assume_constant_result does): dynamo runs them for real, once per
     compilation, and keeps their result, a plan's name. They trace and pick the variant
     (the trace whose int constants and functions match) as an eager call would.
  2. _call_plan, traced by dynamo, reads the plan's captured tensors and float scalars
     through small reader functions that share the user's closure cells / module globals,
     so dynamo follows them as it follows any closure: the tensors become graph inputs
     (updated in place or rebound, the compiled graph reads the current ones), a changed
     int constant or function fails a dynamo guard and recompiles (choosing a new plan).
  3. The graph holds one attnjit::attention node; aot-autograd traces its registered
     backward into attnjit::attention_backward. Both ops look the plan up by name at run
     time and launch through the eager machinery (compiled.py) with the tensors they get.

Nothing here imports torch at import time: install() does, when torch is there.
"""
import functools
import itertools
import types
import weakref

from .errors import InternalError
from .reciprocal_band import check_reciprocal_band

_callables = weakref.WeakValueDictionary()  # uid -> CompiledAttention (plans keep theirs alive)
_uids = itertools.count(1)
_installed = None  # None: not tried; True: ops registered; False: torch too old


def remember(fn) -> int:
    """A CompiledAttention's uid, the constant dynamo passes to _plan_for_callable."""
    uid = next(_uids)
    _callables[uid] = fn
    return uid


# ---- readers dynamo can follow -------------------------------------------------------------

def _cell_reader_code():
    value = None

    def read_captured():
        return value
    return read_captured.__code__


_CELL_CODE = _cell_reader_code()


@functools.lru_cache(maxsize=None)
def _global_code(name: str):
    namespace: dict = {}
    exec(compile(f"def read_captured():\n    return {name}\n", __file__, "exec"), namespace)  # noqa: S102
    return namespace["read_captured"].__code__


def reader(origin):
    """A function of no arguments returning the value at `origin` (capture.Slot.origin),
    built so that dynamo reads it the way it reads the user's own function: a closure over
    the same cell, a function whose globals are the same module namespace."""
    kind = origin[0] if origin else None
    if kind == "cell":
        return types.FunctionType(_CELL_CODE, globals(), "read_captured", None, (origin[1],))
    if kind == "global":
        name = origin[2]
        if not name.isidentifier():
            raise InternalError(f"a captured global has the name {name!r}")
        return types.FunctionType(_global_code(name), origin[1], "read_captured")
    if kind == "default":
        fn, index = origin[1], origin[2]
        return lambda: fn.__defaults__[index]
    if kind == "kwdefault":
        fn, name = origin[1], origin[2]
        return lambda: fn.__kwdefaults__[name]
    if kind == "item":
        sequence, index = origin[1], origin[2]
        return lambda: sequence[index]
    raise InternalError(f"no reader for a captured value at {origin!r}")


# ---- plans -------------------------------------------------------------------------------

class Plan:
    """One CompiledAttention and one of its traces, as a compiled graph calls them."""

    def __init__(self, name: str, fn, variant):
        self.name, self.fn, self.variant = name, fn, variant
        traced = variant.traced
        self.tensor_readers = tuple(reader(t.slot.origin) for t in traced.tensors)
        self.scalar_readers = tuple(reader(s.slot.origin) for s in traced.scalars)
        self.guards = tuple((reader(g.slot.origin), g.expected, g.by_identity) for g in traced.guards)
        self.return_lse = fn.return_lse


class _Plans:
    """Plans by name, one attribute each: dynamo reads an attribute added after it first saw
    this object from the object itself (a dict it had already read could be stale)."""


_plans = _Plans()
_plan_names: dict = {}  # (uid, id(variant)) -> name


def get_plan(name: str) -> Plan:
    p = getattr(_plans, name, None)
    if p is None:
        raise InternalError(f"no attnjit plan named {name!r} in this process (graphs made by torch.compile "
                            "are only valid in the process that traced them)")
    return p


def plan_name(fn) -> str:
    """The plan of a CompiledAttention's current trace (as compiled code would choose it):
    what attnjit::attention's `plan` argument names."""
    variant = fn._current_variant()
    key = (fn._uid, id(variant))
    name = _plan_names.get(key)
    if name is None:
        name = f"p{len(_plan_names) + 1}_{type(fn).__name__}"
        setattr(_plans, name, Plan(name, fn, variant))
        _plan_names[key] = name
    return name


def _plan_for_callable(uid: int) -> str:
    fn = _callables.get(uid)
    if fn is None:
        raise InternalError(f"no CompiledAttention with uid {uid}")
    return plan_name(fn)


def _plan_for_functions(score_mod, mask, causal, scale, enable_gqa, return_lse) -> str:
    from .api import _cached  # noqa: PLC0415 (api imports compiled, which imports this)
    return plan_name(_cached(score_mod, mask, causal, scale, enable_gqa, return_lse))


# torch.compiler.assume_constant_result sets this attribute; set here directly so that attnjit
# needs neither torch nor torch._dynamo (seconds to import) for it.
_plan_for_callable._dynamo_marked_constant = True
_plan_for_functions._dynamo_marked_constant = True


# ---- what dynamo traces --------------------------------------------------------------------

def call_compiled(fn, q, k, v, extras):
    """CompiledAttention.__call__ under torch.compile; extras: (sinks, gate, score_conv,
    reciprocal_band)."""
    return _call_plan(_plan_for_callable(fn._uid), q, k, v, extras)


def attention_compiled(q, k, v, score_mod, mask, causal, scale, enable_gqa, return_lse, extras):
    """attnjit.attention under torch.compile."""
    return _call_plan(_plan_for_functions(score_mod, mask, causal, scale, enable_gqa, return_lse), q, k, v, extras)


def _call_plan(name, q, k, v, extras):
    import torch

    p = getattr(_plans, name)
    # Reading the guarded values makes dynamo guard them: a changed int constant or
    # function recompiles (and the plan functions then trace again, as an eager call would).
    for read, expected, by_identity in p.guards:
        value = read()
        if by_identity:
            if value is not expected:
                raise InternalError("a traced function changed while torch.compile traced attnjit")
        elif value != expected:
            raise InternalError("a traced int constant changed while torch.compile traced attnjit")
    captured = [read() for read in p.tensor_readers]
    scalars = [float(read()) for read in p.scalar_readers]
    sinks, gate, conv, band = extras
    width, alpha = -1, None
    if band is not None:  # (W, alpha) -> W, alpha as a float32 tensor [Hq], as an eager call takes it
        width, alpha = check_reciprocal_band(band, q, k, torch)
    structural = (sinks, gate, conv, alpha)
    training = False
    if torch.is_grad_enabled():
        training = q.requires_grad or k.requires_grad or v.requires_grad or any(
            x is not None and x.requires_grad for x in structural)
        for t in captured:
            training = training or t.requires_grad
        if gate is not None and gate.requires_grad:  # its gradient is per element: materialise a broadcast
            gate = gate.expand(q.shape[0], q.shape[1], q.shape[2], v.shape[3]).contiguous()
    out, lse = torch.ops.attnjit.attention(q, k, v, captured, scalars, sinks, gate, conv, alpha, width, name,
                                           p.return_lse or training)
    return (out, lse) if p.return_lse else out


# ---- the ops -------------------------------------------------------------------------------

# reciprocal_band: the band's alpha [Hq] float32 (a stride-0 view of one weight too),
# reciprocal_band_width its W (-1 without a band); the backward takes both again, and
# reciprocal_band_needs asks it for d alpha ([Hq] float32, contiguous).
FORWARD_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor[] captured, float[] scalars, Tensor? sinks, Tensor? gate, "
                  "Tensor? score_conv, Tensor? reciprocal_band, int reciprocal_band_width, str plan, bool need_lse) "
                  "-> (Tensor, Tensor)")
BACKWARD_SCHEMA = ("(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor[] captured, "
                   "float[] scalars, Tensor? sinks, Tensor? gate, Tensor? score_conv, Tensor? reciprocal_band, "
                   "int reciprocal_band_width, str plan, bool[] captured_needs, bool sinks_needs, bool gate_needs, "
                   "bool reciprocal_band_needs) -> (Tensor, Tensor, Tensor, Tensor[])")


def install() -> bool:
    """Registers the torch ops once (torch >= 2.4 with torch.library.custom_op); returns
    whether attnjit works under torch.compile. Called at import when torch is already
    imported, and on attnjit's first compile() or call otherwise."""
    global _installed
    if _installed is not None:
        return _installed
    import torch

    from . import compiled  # noqa: PLC0415

    library = getattr(torch, "library", None)
    compiler = getattr(torch, "compiler", None)
    if not all(hasattr(library, n) for n in ("custom_op", "register_fake", "register_autograd")) or not hasattr(
            compiler, "is_compiling"):
        compiled._is_compiling = compiled._not_compiling
        _installed = False
        return False
    _define_ops(torch)
    compiled._is_compiling = compiler.is_compiling
    _installed = True
    return True


def _define_ops(torch):
    Tensor = torch.Tensor

    @torch.library.custom_op("attnjit::attention", mutates_args=(), schema=FORWARD_SCHEMA)
    def attention_op(q: Tensor, k: Tensor, v: Tensor, captured: list, scalars: list, sinks, gate, score_conv,
                     reciprocal_band, reciprocal_band_width: int, plan: str, need_lse: bool):
        p = get_plan(plan)
        band = None if reciprocal_band is None else (reciprocal_band_width, reciprocal_band)
        return p.fn._op_forward(p.variant, q, k, v, list(captured), list(scalars), (sinks, gate, score_conv, band),
                                need_lse)

    @attention_op.register_fake
    def _(q, k, v, captured, scalars, sinks, gate, score_conv, reciprocal_band, reciprocal_band_width, plan,
          need_lse):
        # as the eager call allocates them: contiguous out [B, Hq, Nq, Dv] in q's dtype, lse fp32
        B, Hq, Nq = q.shape[0], q.shape[1], q.shape[2]
        out = q.new_empty((B, Hq, Nq, v.shape[3]))
        lse = q.new_empty((B, Hq, Nq) if need_lse else (0,), dtype=torch.float32)
        return out, lse

    @torch.library.custom_op("attnjit::attention_backward", mutates_args=(), schema=BACKWARD_SCHEMA)
    def attention_backward_op(d_out: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                              captured: list, scalars: list, sinks, gate, score_conv, reciprocal_band,
                              reciprocal_band_width: int, plan: str, captured_needs: list, sinks_needs: bool,
                              gate_needs: bool, reciprocal_band_needs: bool):
        p = get_plan(plan)
        band = None if reciprocal_band is None else (reciprocal_band_width, reciprocal_band)
        return p.fn._op_backward(p.variant, d_out, q, k, v, out, lse, list(captured), list(scalars),
                                 (sinks, gate, score_conv, band), list(captured_needs),
                                 (sinks_needs, gate_needs, False, reciprocal_band_needs))

    @attention_backward_op.register_fake
    def _(d_out, q, k, v, out, lse, captured, scalars, sinks, gate, score_conv, reciprocal_band,
          reciprocal_band_width, plan, captured_needs, sinks_needs, gate_needs, reciprocal_band_needs):
        grads = [t.new_empty(t.shape) for t, need in zip(captured, captured_needs) if need]
        for x, need in ((sinks, sinks_needs), (gate, gate_needs), (reciprocal_band, reciprocal_band_needs)):
            if x is not None and need:
                grads.append(x.new_empty(x.shape))  # contiguous (alpha's too, when it is a stride-0 view)
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), grads

    def setup_context(ctx, inputs, output):
        q, k, v, captured, scalars, sinks, gate, score_conv, reciprocal_band, width, plan, _need_lse = inputs
        out, lse = output
        ctx.mark_non_differentiable(lse)  # as in eager: lse carries no gradient
        ctx.save_for_backward(q, k, v, out, lse, sinks, gate, score_conv, reciprocal_band, *captured)
        ctx.attnjit_scalars = list(scalars)
        ctx.attnjit_plan = plan
        ctx.attnjit_band_width = width

    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse, sinks, gate, score_conv, band, *captured = ctx.saved_tensors
        needs = ctx.needs_input_grad  # a list input (captured) has a list of flags
        captured_needs = needs[3] if isinstance(needs[3], (list, tuple)) else [bool(needs[3])] * len(captured)
        captured_needs = [bool(n) for n in captured_needs]
        sinks_needs = sinks is not None and bool(needs[5])
        gate_needs = gate is not None and bool(needs[6])
        band_needs = band is not None and bool(needs[8])  # d alpha: asked for only when alpha requires grad
        if d_out is None:
            d_out = torch.zeros_like(out)
        dq, dk, dv, grads = torch.ops.attnjit.attention_backward(
            d_out, q, k, v, out, lse, captured, ctx.attnjit_scalars, sinks, gate, score_conv, band,
            ctx.attnjit_band_width, ctx.attnjit_plan, captured_needs, sinks_needs, gate_needs, band_needs)
        at = 0
        captured_grads = []
        for need in captured_needs:
            captured_grads.append(grads[at] if need else None)
            at += 1 if need else 0
        d_sinks = grads[at] if sinks_needs else None
        at += 1 if sinks_needs else 0
        d_gate = grads[at] if gate_needs else None
        at += 1 if gate_needs else 0
        d_alpha = grads[at] if band_needs else None  # [Hq]; autograd sums it into an expanded weight
        # the gradient's structure follows the inputs': a list for a list of tensors (also
        # when empty), one None for a (non-empty) list of floats
        return (dq if needs[0] else None, dk if needs[1] else None, dv if needs[2] else None, captured_grads,
                None if ctx.attnjit_scalars else [], d_sinks, d_gate, None, d_alpha, None, None, None)

    attention_op.register_autograd(backward, setup_context=setup_context)
