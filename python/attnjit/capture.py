"""What a score_mod or mask reads besides its arguments, and the traced copy of it.

The function runs on a copy (types.FunctionType with the same code) whose closure cells,
default arguments and referenced module globals hold stand-ins:
  torch tensor       -> TensorProxy: indexing it reads an element of a captured tensor
  Python float       -> a runtime scalar (re-read at every call: changing it never recompiles)
  Python int / bool  -> the value itself, baked in as a constant (guarded: changing it retraces)
  Python function    -> its own traced copy (helpers and composed mods are followed)
  math / math.exp... -> attnjit.ops equivalents
Each stand-in remembers its Slot (the cell, globals entry or default) so that a call
reads the current tensor / float from the real function, not the one seen while tracing.
"""
from __future__ import annotations

import dis
import math
import numbers
import re
import types

from . import dtypes, ops
from . import expr as e
from .expr import TensorProxy, fail

RESERVED_NAMES = frozenset(
    "score b h kv_head q_idx kv_idx q_len kv_len inf nan true false select min max pow float "
    "int bool p args exp exp2 log log2 tanh sigmoid abs sqrt rsqrt floor ceil sin cos".split())

# Functions of these modules are called as they are, never copied and rewritten.
_OPAQUE_MODULES = ("torch", "numpy", "math", "functools", "attnjit.ops", "attnjit.expr",
                   "attnjit.capture", "attnjit.trace", "attnjit.torch_functions")


class TensorPlaceholder:
    """A tensor's dtype and rank without the tensor, for building specs without torch:
    capture it like a tensor; bind a real torch tensor to the variable before calling."""

    def __init__(self, dtype: str, rank: int):
        name = dtypes.name_of(dtype)
        if name is None:
            raise ValueError(f"TensorPlaceholder dtype {dtype!r}: use f16, bf16, f32, i32, i64 or u8")
        if not 0 <= rank <= 6:
            raise ValueError(f"TensorPlaceholder rank {rank}: captured tensors have rank 1 to 6 (0: a 0-dim scalar tensor)")
        self.dtype, self.rank = name, rank

    def __repr__(self):
        return f"TensorPlaceholder({self.dtype!r}, rank={self.rank})"

    def __getitem__(self, index):
        # Captured placeholders are replaced by TensorProxy before the function runs; one
        # indexed here was reached some other way (an object's attribute, a container).
        fail(f"{self!r} was indexed, but it is not a captured tensor: attnjit captures tensors "
             "only from the function's closure variables, module globals and default "
             "arguments, not from object attributes (self.bias[h]) or containers. Bind it to a "
             "variable first, e.g. `bias = self.bias` outside the function and `bias[h]` inside "
             "it, or pass it as a default argument: def score_mod(score, b, h, q_idx, kv_idx, "
             "bias=self.bias)")


class Slot:
    """A place a captured value is read from at every call."""

    __slots__ = ("read", "key", "where", "internal", "origin")

    def __init__(self, read, key, where: str, internal: bool = False, origin: tuple = ()):
        self.read = read    # () -> the current value
        self.key = key      # identity of the place, to share one input between copies
        self.where = where  # for messages: "closure variable 'bias' of f"
        # a variable of attnjit.mods' own functions, which never rebind them: not guarded
        self.internal = internal
        # the place itself, ("cell", cell), ("global", namespace, name), ("default", fn, i),
        # ("kwdefault", fn, name) or ("item", sequence, i): torch_ops builds readers from it
        # that torch.compile (dynamo) can follow, which `read` (a lambda over a cell) is not
        self.origin = origin


def _is_mods_function(fn) -> bool:
    return getattr(fn, "__module__", None) == "attnjit.mods"


def cell_slot(cell, name, fn) -> Slot:
    return Slot(lambda: cell.cell_contents, ("cell", id(cell)),
                f"closure variable '{name}' of {fn.__qualname__}", _is_mods_function(fn), ("cell", cell))


def global_slot(namespace: dict, name, fn) -> Slot:
    return Slot(lambda: namespace[name], ("global", id(namespace), name),
                f"global '{name}' of module {fn.__module__}", _is_mods_function(fn), ("global", namespace, name))


def default_slot(fn, index: int, name) -> Slot:
    return Slot(lambda: fn.__defaults__[index], ("default", id(fn), index),
                f"default argument '{name}' of {fn.__qualname__}", origin=("default", fn, index))


def kwdefault_slot(fn, name) -> Slot:
    return Slot(lambda: fn.__kwdefaults__[name], ("kwdefault", id(fn), name),
                f"default argument '{name}' of {fn.__qualname__}", origin=("kwdefault", fn, name))


class TensorInput:
    """A captured tensor: its name in the spec and where to read it."""

    def __init__(self, name, dtype, rank, zero_dim, slot, torch_dtype):
        self.name, self.dtype, self.rank = name, dtype, rank
        self.zero_dim = zero_dim        # a 0-dim tensor, passed as shape [1]
        self.slot = slot
        self.torch_dtype = torch_dtype  # None for a placeholder


class ScalarInput:
    """A runtime float scalar: its name in the spec and where to read it."""

    def __init__(self, name, slot):
        self.name, self.slot = name, slot


class Guard:
    """A value the trace depends on: an int constant (by value) or a function (by identity)."""

    __slots__ = ("slot", "expected", "by_identity")

    def __init__(self, slot, expected, by_identity):
        self.slot, self.expected, self.by_identity = slot, expected, by_identity

    def holds(self) -> bool:
        try:
            v = self.slot.read()
        except (KeyError, ValueError, IndexError, TypeError):
            return False
        if self.by_identity:
            return v is self.expected
        return type(v) is type(self.expected) and v == self.expected


def sanitize(name: str) -> str:
    """A usable spec name (a C identifier, not a built-in) made from a variable name."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)[:60] or "v"
    if s[0].isdigit() or s.startswith("__") or s.lower().startswith("attnjit"):
        s = "v_" + s.lstrip("_")
    if s in RESERVED_NAMES:
        s += "_"
    return s


def global_names(code: types.CodeType) -> set:
    """Names the code (and the functions defined in it) reads as globals."""
    names = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= global_names(c)
    return names


def _log(x, base=None):
    return ops.log(x) if base is None else ops.log(x) / math.log(base)


def _make_math_shim() -> types.ModuleType:
    """Stands for the math module inside a traced function: its functions take traced
    values; constants (pi, e, inf) and anything else come from math."""
    shim = types.ModuleType("math", "attnjit's traced stand-in for the math module")
    functions = dict(exp=ops.exp, exp2=ops.exp2, log=_log, log2=ops.log2,
                     log10=lambda x: ops.log(x) / math.log(10.0), tanh=ops.tanh, sqrt=ops.sqrt,
                     sin=ops.sin, cos=ops.cos, floor=ops.floor, ceil=ops.ceil, trunc=ops.trunc,
                     fabs=lambda x: ops.to_float(ops.abs(x)), pow=lambda x, y: ops.pow(ops.to_float(x), y),
                     fmod=ops.fmod)
    vars(shim).update(functions)
    shim.__getattr__ = lambda name: getattr(math, name)
    return shim


MATH_SHIM = _make_math_shim()
_MATH_FUNCTIONS = {getattr(math, n): getattr(MATH_SHIM, n)
                   for n in ("exp", "log", "log2", "log10", "tanh", "sqrt", "sin", "cos", "floor",
                             "ceil", "trunc", "fabs", "pow", "fmod") + (("exp2",) if hasattr(math, "exp2") else ())}


def _is_torch_tensor(x) -> bool:
    return e.is_tensor(x)


class Captures:
    """Collects the inputs and guards of one trace while building traced copies."""

    def __init__(self):
        self.tensors: dict = {}   # slot key -> TensorInput
        self.scalars: dict = {}   # slot key -> ScalarInput
        self.guards: list = []
        self.codes: set = set()   # code objects run by the trace (to locate errors)
        self._names: set = set()
        self._copies: dict = {}   # id(function) -> traced copy
        self._keep: list = []     # originals, so ids stay unique while tracing

    def unique_name(self, name: str) -> str:
        base = sanitize(name)
        out, n = base, 2
        while out in self._names:
            out, n = f"{base}_{n}", n + 1
        self._names.add(out)
        return out

    # ---- one captured value -----------------------------------------------------------
    def stand_in(self, value, name: str, slot: Slot):
        if isinstance(value, (e.Sym, TensorProxy)):
            return value
        if isinstance(value, bool) or (isinstance(value, numbers.Integral)):
            self._guard(slot, value, by_identity=False)
            return value
        if isinstance(value, numbers.Real):
            s = self.scalars.get(slot.key)
            if s is None:
                s = self.scalars[slot.key] = ScalarInput(self.unique_name(name), slot)
            return e.scalar(s.name)
        if _is_torch_tensor(value) or isinstance(value, TensorPlaceholder):
            return self._tensor(value, name, slot)
        if isinstance(value, types.FunctionType):
            if self._opaque(value):
                return value
            self._guard(slot, value, by_identity=True)
            return self.copy_function(value)
        if isinstance(value, (tuple, list)) and value and all(
                v is None or (isinstance(v, types.FunctionType) and not self._opaque(v)) for v in value):
            self._guard(slot, value, by_identity=True)
            for i, v in enumerate(value):
                if v is not None:
                    self._guard(Slot(lambda c=value, i=i: c[i], None, slot.where, slot.internal, ("item", value, i)),
                                v, True)
            return type(value)(None if v is None else self.copy_function(v) for v in value)
        if value is math:
            return MATH_SHIM
        if isinstance(value, types.BuiltinFunctionType) and value in _MATH_FUNCTIONS:
            return _MATH_FUNCTIONS[value]
        return value

    def _guard(self, slot, value, by_identity):
        if not slot.internal:
            self.guards.append(Guard(slot, value, by_identity))

    @staticmethod
    def _opaque(fn) -> bool:
        module = getattr(fn, "__module__", None) or ""
        return any(module == m or module.startswith(m + ".") for m in _OPAQUE_MODULES)

    def _tensor(self, value, name, slot):
        known = self.tensors.get(slot.key)
        if known is not None:
            return e.load(known.name, known.dtype, 1, 0) if known.zero_dim else TensorProxy(known.name, known.dtype, known.rank)
        if isinstance(value, TensorPlaceholder):
            dtype, rank, torch_dtype = value.dtype, value.rank, None
        else:
            torch_dtype, rank = value.dtype, value.dim()
            dtype = dtypes.torch_dtype_names().get(torch_dtype)
            if dtype is None:
                return _BadTensor(name, f"has dtype {torch_dtype}; captured tensors must be float16, "
                                        "bfloat16, float32, int32, int64 or bool (convert it, e.g. .float())")
            if rank > 6:
                return _BadTensor(name, f"has rank {rank}; captured tensors have rank at most 6")
        t = TensorInput(self.unique_name(name), dtype, max(rank, 1), rank == 0, slot, torch_dtype)
        self.tensors[slot.key] = t
        return e.load(t.name, dtype, 1, 0) if rank == 0 else TensorProxy(t.name, dtype, rank)

    # ---- a function ---------------------------------------------------------------------
    def copy_function(self, fn: types.FunctionType) -> types.FunctionType:
        """fn with its closure, defaults and referenced globals replaced by stand-ins."""
        done = self._copies.get(id(fn))
        if done is not None:
            return done
        self._keep.append(fn)
        self._copies[id(fn)] = fn  # a recursive reference runs the original
        code = fn.__code__
        self.codes.add(code)
        closure = None
        if fn.__closure__:
            cells = []
            for name, cell in zip(code.co_freevars, fn.__closure__):
                try:
                    value = cell.cell_contents
                except ValueError:  # not yet assigned
                    cells.append(cell)
                    continue
                cells.append(types.CellType(self.stand_in(value, name, cell_slot(cell, name, fn))))
            closure = tuple(cells)
        namespace = fn.__globals__
        replaced = {}
        for name in global_names(code):
            if name in namespace:
                value = namespace[name]
                new = self.stand_in(value, name, global_slot(namespace, name, fn))
                if new is not value:
                    replaced[name] = new
        if replaced:
            namespace = dict(namespace)
            namespace.update(replaced)
        defaults = fn.__defaults__
        if defaults:
            names = code.co_varnames[code.co_argcount - len(defaults):code.co_argcount]
            defaults = tuple(self.stand_in(v, n, default_slot(fn, i, n))
                             for i, (n, v) in enumerate(zip(names, defaults)))
        copy = types.FunctionType(code, namespace, fn.__name__, defaults, closure)
        if fn.__kwdefaults__:
            copy.__kwdefaults__ = {n: self.stand_in(v, n, kwdefault_slot(fn, n))
                                   for n, v in fn.__kwdefaults__.items()}
        copy.__qualname__ = fn.__qualname__
        self._copies[id(fn)] = copy
        return copy


class _BadTensor(TensorProxy):
    """A captured tensor attnjit cannot read; fails only if the function indexes it."""

    __slots__ = ("problem",)

    def __init__(self, name, problem):
        super().__init__(name, None, 0)
        self.problem = problem

    def __getitem__(self, index):
        fail(f"captured tensor '{self.name}' {self.problem}")
