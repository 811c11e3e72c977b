"""Traced values: a score_mod or mask runs once on `Sym` objects, and every operation on
them builds a node of attnjit's expression language (docs/semantics.md). Python
semantics are kept: `/` is true division, `//` and `%` floor (see floordiv/mod below),
int next to float promotes to float. Anything the language cannot express raises
UnsupportedTraceError with what to write instead."""
from __future__ import annotations

import numbers

from .errors import SpecError, UnsupportedTraceError

FLOAT, INT, BOOL = "float", "int", "bool"

# Node kinds.
CONST, VAR, SCALAR, LOAD, UNARY, BINARY, SELECT, CAST = (
    "const", "var", "scalar", "load", "unary", "binary", "select", "cast")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# The limits of dsl/limits.h (docs/spec_format.md, "Limits"), checked as each node is
# built, so a runaway loop in a traced function stops at once with a SpecError.
MAX_EXPR_DEPTH = 256
MAX_EXPR_NODES = 4096

# Element type of a tensor dtype name, as the kernel reads it.
DTYPE_TYPES = {"f16": FLOAT, "bf16": FLOAT, "f32": FLOAT, "i32": INT, "i64": INT, "u8": BOOL}

BOOL_CONTEXT_HINT = (
    "a traced value has no Python truth value: `if`, `while`, `and`, `or`, `not`, a chained "
    "comparison (a < b < c), builtin min()/max() and bool() all need one. Write it as one "
    "expression instead: `&`, `|`, `~` for conditions, torch.where(cond, x, y) (or "
    "attnjit.ops.where) for a choice, torch.minimum/maximum (or attnjit.ops.minimum/maximum)")


def fail(message: str):
    raise UnsupportedTraceError(message)


class Sym:
    """One node of a traced expression. Operators follow Python's semantics on numbers."""

    __slots__ = ("kind", "type", "op", "args", "value", "depth", "size")

    def __init__(self, kind, type_, op=None, args=(), value=None):
        self.kind = kind
        self.type = type_
        self.op = op          # operator / function / variable / tensor name
        self.args = args      # child nodes
        self.value = value    # CONST: the Python value; LOAD: the tensor's dtype name
        # Levels down to the deepest leaf, and nodes with a shared one counted at each use.
        self.depth = 1 + max((a.depth for a in args), default=0)
        self.size = 1 + sum(a.size for a in args)
        if self.depth > MAX_EXPR_DEPTH:
            raise SpecError(
                f"the expression is too deep: it nests {self.depth} levels of operations, and the "
                f"limit is {MAX_EXPR_DEPTH} (docs/spec_format.md, Limits). A chain such as "
                "a + b + c + ... is as deep as it is long: group its terms into balanced halves, "
                "(a + b) + (c + d), or use fewer terms")
        if self.size > MAX_EXPR_NODES:
            raise SpecError(
                f"the expression is too large: it has {self.size} nodes (a shared subexpression "
                f"counts at each use), and the limit is {MAX_EXPR_NODES} (docs/spec_format.md, "
                "Limits); use fewer terms, or a captured tensor for a table of values")

    # ---- what Python would need a concrete value for ----------------------------------
    def __bool__(self):
        fail(f"{describe(self)} was used as a Python bool; {BOOL_CONTEXT_HINT}")

    def __index__(self):
        fail(f"{describe(self)} was used as an index into a Python object that is not captured "
             "by attnjit (a list, tuple, dict, numpy array, or a torch tensor reached through a "
             "container or an attribute such as self.bias). Only torch tensors held directly by "
             "a variable (closure, default argument or module global) become captured tensors: "
             "bind it first, e.g. `bias = self.bias`, and index `bias[...]` in the function")

    def __float__(self):
        fail(f"{describe(self)} was converted with float() or passed to a function that needs a "
             "Python number (math.*, numpy); use .float() / attnjit.ops.to_float for a cast, and "
             "torch.* or attnjit.ops.* functions for math")

    def __int__(self):
        fail(f"{describe(self)} was converted with int(); use .int() / attnjit.ops.to_int "
             "(truncates toward zero) instead")

    def __complex__(self):
        fail(f"{describe(self)} cannot become a complex number")

    def __round__(self, ndigits=None):
        fail(f"round({describe(self)}) is not supported; use torch.floor(x + 0.5) or .int()")

    def __iter__(self):
        fail(f"{describe(self)} is a single value and cannot be iterated or unpacked")

    def __len__(self):
        fail(f"{describe(self)} is a single value and has no len()")

    def __getitem__(self, index):
        fail(f"{describe(self)} is a single value and cannot be indexed; only captured tensors "
             "can be indexed")

    __hash__ = object.__hash__  # == builds an expression, so hash by identity

    def __repr__(self):
        from .printer import to_text
        return f"Sym({self.type}: {to_text(self)})"

    # ---- arithmetic ---------------------------------------------------------------
    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return sub(self, o)
    def __rsub__(self, o): return sub(o, self)
    def __mul__(self, o): return mul(self, o)
    def __rmul__(self, o): return mul(o, self)
    def __truediv__(self, o): return truediv(self, o)
    def __rtruediv__(self, o): return truediv(o, self)
    def __floordiv__(self, o): return floordiv(self, o)
    def __rfloordiv__(self, o): return floordiv(o, self)
    def __mod__(self, o): return mod(self, o)
    def __rmod__(self, o): return mod(o, self)
    def __pow__(self, o, m=None): return power(self, o)
    def __rpow__(self, o): return power(o, self)
    def __neg__(self): return neg(self)
    def __pos__(self): return plus(self)
    def __abs__(self): return absolute(self)
    def __floor__(self): return floor(self)  # math.floor(x)
    def __ceil__(self): return ceil(self)    # math.ceil(x)
    def __trunc__(self): return trunc(self)  # math.trunc(x)

    def __divmod__(self, o):
        return floordiv(self, o), mod(self, o)

    # ---- comparisons and logic ----------------------------------------------------
    def __lt__(self, o): return compare("<", self, o)
    def __le__(self, o): return compare("<=", self, o)
    def __gt__(self, o): return compare(">", self, o)
    def __ge__(self, o): return compare(">=", self, o)
    def __eq__(self, o): return compare("==", self, o)
    def __ne__(self, o): return compare("!=", self, o)
    def __and__(self, o): return logical("&", self, o)
    def __rand__(self, o): return logical("&", o, self)
    def __or__(self, o): return logical("|", self, o)
    def __ror__(self, o): return logical("|", o, self)
    def __xor__(self, o): return logical("^", self, o)
    def __rxor__(self, o): return logical("^", o, self)
    def __invert__(self): return logical_not(self)

    def _no_shift(self, o=None):
        fail(f"shifts of {describe(self)} are not supported; multiply or divide by a power of two")
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _no_shift

    def __matmul__(self, o):
        fail(f"{describe(self)} is a single value; @ needs tensors")
    __rmatmul__ = __matmul__

    # ---- the Tensor-method spellings (score.tanh(), q_idx.float(), ...) -----------
    def exp(self): return math_fn("exp", self)
    def exp2(self): return math_fn("exp2", self)
    def log(self): return math_fn("log", self)
    def log2(self): return math_fn("log2", self)
    def tanh(self): return math_fn("tanh", self)
    def sigmoid(self): return math_fn("sigmoid", self)
    def sqrt(self): return math_fn("sqrt", self)
    def rsqrt(self): return math_fn("rsqrt", self)
    def sin(self): return math_fn("sin", self)
    def cos(self): return math_fn("cos", self)
    def abs(self): return absolute(self)
    def floor(self): return floor(self)
    def ceil(self): return ceil(self)
    def trunc(self): return trunc(self)
    def neg(self): return neg(self)
    def square(self): return mul(self, self)
    def reciprocal(self): return truediv(1.0, self)
    def pow(self, o): return power(self, o)
    def clamp(self, min=None, max=None): return clamp(self, min, max)
    clip = clamp
    def minimum(self, o): return minimum(self, o)
    def maximum(self, o): return maximum(self, o)
    def where(self, cond, other): return where(cond, self, other)
    def logical_and(self, o): return logical("&", self, o)
    def logical_or(self, o): return logical("|", self, o)
    def logical_xor(self, o): return logical("^", self, o)
    def logical_not(self): return logical_not(self)
    def float(self): return to_float(self)
    def half(self): return to_float(self)      # all float math is fp32 in the kernel
    def bfloat16(self): return to_float(self)
    def double(self): return to_float(self)
    def int(self): return to_int(self)
    def long(self): return to_int(self)
    def bool(self): return to_bool(self)

    def to(self, dtype, *args, **kwargs):
        name = str(dtype).replace("torch.", "")
        if name in ("float16", "half", "bfloat16", "float32", "float", "float64", "double"):
            return to_float(self)
        if name in ("int32", "int", "int64", "long", "int16", "short", "int8", "uint8"):
            return to_int(self)
        if name == "bool":
            return to_bool(self)
        fail(f"{describe(self)}.to({dtype!r}) is not supported; use .float(), .int() or .bool()")

    def item(self):
        fail(f"{describe(self)}.item(): a traced value has no concrete value")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from .torch_functions import dispatch
        return dispatch(func, args, kwargs or {})


# ---- leaves ------------------------------------------------------------------------

def const(value) -> Sym:
    """A literal: bool, int (must fit int32) or float."""
    if isinstance(value, bool):
        return Sym(CONST, BOOL, value=value)
    if isinstance(value, numbers.Integral):
        v = int(value)
        if not INT32_MIN <= v <= INT32_MAX:
            fail(f"the int constant {v} does not fit the kernel's int32; use a float ({v}.0) or a "
                 "smaller value")
        return Sym(CONST, INT, value=v)
    if isinstance(value, numbers.Real):
        return Sym(CONST, FLOAT, value=float(value))
    raise TypeError(value)


def var(name: str) -> Sym:
    """A built-in variable: score (float) or an index / length (int, never negative)."""
    return Sym(VAR, FLOAT if name == "score" else INT, op=name)


def scalar(name: str) -> Sym:
    """A runtime float scalar, passed at every launch."""
    return Sym(SCALAR, FLOAT, op=name)


def load(name: str, dtype: str, rank: int, index) -> Sym:
    """name[i0, i1, ...] of a captured tensor with this dtype name and rank."""
    idx = index if isinstance(index, tuple) else (index,)
    if len(idx) != rank:
        fail(f"captured tensor '{name}' has {rank} dimension{'s' * (rank != 1)} but was indexed "
             f"with {len(idx)} ind{'ices' if len(idx) != 1 else 'ex'}; index every dimension with "
             "one int (no slices): a stride-0 (expanded) dimension broadcasts")
    parts = []
    for k, i in enumerate(idx):
        if isinstance(i, (slice, type(Ellipsis))) or i is None:
            fail(f"captured tensor '{name}' index {k} is {i!r}; slicing is not supported, index "
                 "each dimension with one int")
        if isinstance(i, Sym):
            if i.type != INT:
                fail(f"captured tensor '{name}' index {k} is {describe(i)}; indices must be ints "
                     "(convert with .int() or attnjit.ops.to_int)")
            parts.append(i)
            continue
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            fail(f"captured tensor '{name}' index {k} is {i!r}; indices must be ints")
        if i < 0:
            fail(f"captured tensor '{name}' index {k} is {i}: negative indices do not wrap around "
                 "in the kernel; write the positive index")
        parts.append(const(i))
    return Sym(LOAD, DTYPE_TYPES[dtype], op=name, args=tuple(parts), value=dtype)


class TensorProxy:
    """Stands for a captured tensor while tracing: indexing it with ints reads an element."""

    __slots__ = ("name", "dtype", "rank")

    def __init__(self, name: str, dtype: str, rank: int):
        self.name, self.dtype, self.rank = name, dtype, rank

    def __getitem__(self, index):
        return load(self.name, self.dtype, self.rank, index)

    def __repr__(self):
        return f"TensorProxy({self.name}: {self.dtype}, rank {self.rank})"

    def __getattr__(self, attr):
        if attr.startswith("_"):  # protocol probes (hasattr(x, "__array__"), copy, ...)
            raise AttributeError(attr)
        fail(f"captured tensor '{self.name}': .{attr} is not available while tracing; only "
             f"indexing {self.name}[...] is (shapes are not part of the expression: pass sizes "
             "as ints)")

    def _unindexed(self, *a, **k):
        fail(f"captured tensor '{self.name}' was used without indexing; read one element with "
             f"one int per dimension, e.g. {self.name}[{', '.join(['h'] + ['0'] * (self.rank - 1))}]")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unindexed
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = __neg__ = _unindexed
    __lt__ = __le__ = __gt__ = __ge__ = __and__ = __or__ = __invert__ = __bool__ = _unindexed
    __float__ = __int__ = __index__ = __iter__ = __len__ = __abs__ = _unindexed

    def __eq__(self, o):
        self._unindexed()

    __ne__ = __eq__
    __hash__ = object.__hash__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, TensorProxy):
                a._unindexed()
        fail(f"{getattr(func, '__name__', func)} was called on a captured tensor")


# ---- coercion and descriptions -------------------------------------------------------

def describe(x) -> str:
    if isinstance(x, Sym):
        from .printer import to_text
        return f"the traced {x.type} `{to_text(x)}`"
    if isinstance(x, TensorProxy):
        return f"captured tensor '{x.name}'"
    return f"a {type(x).__module__}.{type(x).__qualname__} value" if not isinstance(
        x, (int, float, bool)) else repr(x)


def is_tensor(x) -> bool:
    import sys
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def as_sym(x, context: str) -> Sym:
    """x as a node; Python numbers become literals."""
    if isinstance(x, Sym):
        return x
    if isinstance(x, (bool, numbers.Real)):
        return const(x)
    if isinstance(x, TensorProxy):
        x._unindexed()
    if is_tensor(x):
        fail(f"{context}: a torch tensor {tuple(x.shape)} appears in the expression. Tensors are "
             "captured only when a variable of the function (closure, default argument or module "
             "global) holds them, and are read by indexing, e.g. bias[b, h, q_idx, kv_idx]; "
             "tensors created inside the function (torch.tensor(...)) are not supported: use "
             "Python numbers")
    fail(f"{context}: {describe(x)} cannot be part of an attention expression (numbers, traced "
         "values and captured-tensor elements can)")


def _to_float(s: Sym) -> Sym:
    if s.type == FLOAT:
        return s
    if s.kind == CONST:
        return const(float(s.value))
    return Sym(CAST, FLOAT, op="float", args=(s,))


def _numbers(op: str, a, b) -> tuple[Sym, Sym]:
    """Two numeric operands with the int one promoted when the other is a float."""
    a, b = as_sym(a, f"operator {op}"), as_sym(b, f"operator {op}")
    for s in (a, b):
        if s.type == BOOL:
            fail(f"operator {op} needs numbers but got {describe(s)}; turn a condition into a "
                 "number with torch.where(cond, 1.0, 0.0) (or attnjit.ops.where)")
    if a.type != b.type:
        a, b = _to_float(a), _to_float(b)
    return a, b


def _bin(op: str, a: Sym, b: Sym, type_=None) -> Sym:
    return Sym(BINARY, type_ or a.type, op=op, args=(a, b))


def is_nonneg(s: Sym) -> bool:
    """True when an int expression is provably >= 0 (then C's truncating / and % equal
    Python's flooring // and %)."""
    if s.kind == CONST:
        return s.value >= 0
    if s.kind == VAR:
        return s.type == INT  # indices and lengths
    if s.kind == BINARY:
        a, b = s.args
        if s.op in ("+", "*", "/", "%", "min"):
            return is_nonneg(a) and is_nonneg(b)
        if s.op == "max":
            return is_nonneg(a) or is_nonneg(b)
    if s.kind == SELECT:
        return is_nonneg(s.args[1]) and is_nonneg(s.args[2])
    if s.kind == UNARY and s.op == "abs":
        return True
    return False


def _positive_const(s: Sym) -> bool:
    return s.kind == CONST and s.value > 0


# ---- arithmetic with Python semantics --------------------------------------------------

def add(a, b): return _bin("+", *_numbers("+", a, b))
def sub(a, b): return _bin("-", *_numbers("-", a, b))
def mul(a, b): return _bin("*", *_numbers("*", a, b))


def truediv(a, b):
    """Python's `/`: always a float division."""
    a, b = _numbers("/", a, b)
    return _bin("/", _to_float(a), _to_float(b))


def trunc_div(a, b):
    """C's `/` on ints (truncates toward zero); on floats trunc(a / b)."""
    a, b = _numbers("trunc_div", a, b)
    if a.type == INT:
        return _bin("/", a, b)
    return trunc(_bin("/", a, b))


def trunc_mod(a, b):
    """C's `%` (torch.fmod): the result has the sign of a."""
    a, b = _numbers("fmod", a, b)
    if a.type == INT:
        return _bin("%", a, b)
    return sub(a, mul(trunc(_bin("/", a, b)), b))


def floordiv(a, b):
    """Python's `//`. For ints the kernel's `/` truncates toward zero; the two agree when
    both sides are provably >= 0 (indices, lengths, non-negative literals), which is the
    plain `a / b` emitted then. Otherwise the exact floor is spelled out with select()."""
    a, b = _numbers("//", a, b)
    if a.type == FLOAT:
        return floor(_bin("/", a, b))
    q = _bin("/", a, b)
    if is_nonneg(a) and is_nonneg(b):
        return q
    r = _bin("%", a, b)
    if _positive_const(b):
        inexact_negative = compare("<", r, 0)
    else:
        inexact_negative = logical("&", compare("!=", r, 0), compare("!=", compare("<", a, 0), compare("<", b, 0)))
    return where(inexact_negative, sub(q, 1), q)


def mod(a, b):
    """Python's `%` (the result has the sign of b); see floordiv for the int mapping."""
    a, b = _numbers("%", a, b)
    if a.type == FLOAT:
        return sub(a, mul(floor(_bin("/", a, b)), b))
    r = _bin("%", a, b)
    if is_nonneg(a) and is_nonneg(b):
        return r
    if _positive_const(b):
        wrong_sign = compare("<", r, 0)
    else:
        wrong_sign = logical("&", compare("!=", r, 0), compare("!=", compare("<", r, 0), compare("<", b, 0)))
    return where(wrong_sign, add(r, b), r)


def power(a, b):
    """a ** b. An int base with a small int exponent stays an int product (as in Python);
    anything else is pow() on floats."""
    a, b = _numbers("**", a, b)
    if a.type == INT and b.kind == CONST and 1 <= b.value <= 4:
        out = a
        for _ in range(b.value - 1):
            out = _bin("*", out, a)
        return out
    return _bin("pow", _to_float(a), _to_float(b))


def neg(a):
    a = as_sym(a, "unary -")
    if a.type == BOOL:
        fail(f"-{describe(a)}: cannot negate a bool; use ~ for logical not")
    if a.kind == CONST:
        return const(-a.value)
    return Sym(UNARY, a.type, op="-", args=(a,))


def plus(a):
    a = as_sym(a, "unary +")
    if a.type == BOOL:
        fail(f"+{describe(a)}: a bool is not a number")
    return a


def absolute(a):
    a = as_sym(a, "abs")
    if a.type == BOOL:
        fail(f"abs({describe(a)}): needs a number, got a bool")
    return Sym(UNARY, a.type, op="abs", args=(a,))


FLOAT_FUNCTIONS = ("exp", "exp2", "log", "log2", "tanh", "sigmoid", "sqrt", "rsqrt", "sin", "cos")


def math_fn(name: str, a):
    """A float function of the language; an int argument is converted to float first."""
    a = as_sym(a, name)
    if a.type == BOOL:
        fail(f"{name}({describe(a)}): needs a number, got a bool")
    return Sym(UNARY, FLOAT, op=name, args=(_to_float(a),))


def floor(a):
    a = as_sym(a, "floor")
    if a.type == BOOL:
        fail(f"floor({describe(a)}): needs a number, got a bool")
    return a if a.type == INT else Sym(UNARY, FLOAT, op="floor", args=(a,))


def ceil(a):
    a = as_sym(a, "ceil")
    if a.type == BOOL:
        fail(f"ceil({describe(a)}): needs a number, got a bool")
    return a if a.type == INT else Sym(UNARY, FLOAT, op="ceil", args=(a,))


def trunc(a):
    """Round toward zero, staying a float for a float (torch.trunc)."""
    a = as_sym(a, "trunc")
    if a.type != FLOAT:
        return floor(a)
    return where(compare("<", a, 0.0), ceil(a), floor(a))


def minimum(a, b): return _bin("min", *_numbers("minimum", a, b))
def maximum(a, b): return _bin("max", *_numbers("maximum", a, b))


def clamp(x, lo=None, hi=None):
    out = as_sym(x, "clamp")
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return out


# ---- comparisons, logic, choice --------------------------------------------------------

def compare(op: str, a, b) -> Sym:
    a, b = as_sym(a, f"operator {op}"), as_sym(b, f"operator {op}")
    if a.type == BOOL or b.type == BOOL:
        if a.type != b.type or op not in ("==", "!="):
            fail(f"{describe(a)} {op} {describe(b)}: bools compare only with bools, by == and !=")
        return _bin(op, a, b, BOOL)
    a, b = _numbers(op, a, b)
    return _bin(op, a, b, BOOL)


_LOGICAL = {"&": "&&", "|": "||", "^": "!="}


def logical(op: str, a, b) -> Sym:
    """& | ^ on conditions (the kernel has no bitwise int operations)."""
    a, b = as_sym(a, f"operator {op}"), as_sym(b, f"operator {op}")
    for s in (a, b):
        if s.type != BOOL:
            fail(f"operator {op} on {describe(s)}: & | ^ ~ are logical operations on conditions "
                 "here; bitwise operations on ints are not supported. Compare first, e.g. "
                 "(q_idx >= kv_idx) & (kv_idx < n)")
    return _bin(_LOGICAL[op], a, b, BOOL)


def logical_not(a) -> Sym:
    a = as_sym(a, "operator ~")
    if a.type != BOOL:
        fail(f"~{describe(a)}: ~ is logical not on a condition; bitwise not of ints is not supported")
    if a.kind == CONST:
        return const(not a.value)
    return Sym(UNARY, BOOL, op="!", args=(a,))


def where(cond, if_true, if_false):
    """cond ? if_true : if_false (torch.where). A Python bool condition picks a branch."""
    if isinstance(cond, bool):
        return if_true if cond else if_false
    c = as_sym(cond, "where")
    if c.type != BOOL:
        fail(f"where({describe(c)}, ...): the condition must be a bool; compare first, e.g. x != 0")
    t, f = as_sym(if_true, "where"), as_sym(if_false, "where")
    if t.type != f.type:
        if BOOL in (t.type, f.type):
            fail(f"where(cond, {describe(t)}, {describe(f)}): the branches must both be bools or "
                 "both be numbers")
        t, f = _to_float(t), _to_float(f)
    return Sym(SELECT, t.type, args=(c, t, f))


# ---- casts -----------------------------------------------------------------------------

def to_float(a) -> Sym:
    a = as_sym(a, "to_float")
    if a.type == BOOL:
        return where(a, 1.0, 0.0)
    return _to_float(a)


def to_int(a) -> Sym:
    """int(x) truncating toward zero, like torch's .int() and C's cast."""
    a = as_sym(a, "to_int")
    if a.type == BOOL:
        return where(a, 1, 0)
    if a.type == INT:
        return a
    if a.kind == CONST:
        return const(int(a.value))
    return Sym(CAST, INT, op="int", args=(a,))


def to_bool(a) -> Sym:
    a = as_sym(a, "to_bool")
    return a if a.type == BOOL else compare("!=", a, 0)
