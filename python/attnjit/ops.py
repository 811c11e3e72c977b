"""Math for score_mod and mask functions that works without torch:

    from attnjit import ops
    def softcap(score, b, h, q_idx, kv_idx):
        return 30.0 * ops.tanh(score / 30.0)

Each function takes traced values (while attnjit traces the function), plain Python
numbers (computed right away), or torch tensors (the matching torch function runs, so the
same score_mod can build an eager reference with index tensors, FlexAttention-style).

Int division: `//` and `%` on traced ints are Python's floor division and modulo (exact;
see expr.floordiv). `trunc_div` and `fmod` are C's truncating `/` and `%`, which is what
the kernel computes natively.
"""
from __future__ import annotations

import math as _math

from . import expr as _e
from .expr import Sym

inf = float("inf")
nan = float("nan")


def _traced(*xs) -> bool:
    return any(isinstance(x, (Sym, _e.TensorProxy)) for x in xs)


def _torch_of(*xs):
    """The torch module when an argument is a torch tensor, else None."""
    for x in xs:
        if _e.is_tensor(x):
            import torch
            return torch
    return None


def _unary(name, sym_fn, number_fn):
    def fn(x):
        if _traced(x):
            return sym_fn(x)
        torch = _torch_of(x)
        if torch is not None:
            return getattr(torch, name)(x)
        return number_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(x) (float result; an int argument is converted)"
    return fn


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + _math.exp(-x)) if x >= 0 else _math.exp(x) / (1.0 + _math.exp(x))


exp = _unary("exp", lambda x: _e.math_fn("exp", x), _math.exp)
exp2 = _unary("exp2", lambda x: _e.math_fn("exp2", x), lambda x: 2.0 ** x)
log = _unary("log", lambda x: _e.math_fn("log", x), _math.log)
log2 = _unary("log2", lambda x: _e.math_fn("log2", x), _math.log2)
tanh = _unary("tanh", lambda x: _e.math_fn("tanh", x), _math.tanh)
sigmoid = _unary("sigmoid", lambda x: _e.math_fn("sigmoid", x), _sigmoid)
sqrt = _unary("sqrt", lambda x: _e.math_fn("sqrt", x), _math.sqrt)
rsqrt = _unary("rsqrt", lambda x: _e.math_fn("rsqrt", x), lambda x: 1.0 / _math.sqrt(x))
sin = _unary("sin", lambda x: _e.math_fn("sin", x), _math.sin)
cos = _unary("cos", lambda x: _e.math_fn("cos", x), _math.cos)
abs = _unary("abs", _e.absolute, lambda x: x if x >= 0 else -x)  # noqa: A001 (keeps int ints)
floor = _unary("floor", _e.floor, _math.floor)
ceil = _unary("ceil", _e.ceil, _math.ceil)
trunc = _unary("trunc", _e.trunc, _math.trunc)
logical_not = _unary("logical_not", _e.logical_not, lambda x: not x)


def to_float(x):
    """x as a float (a condition gives 1.0 / 0.0)."""
    if _traced(x):
        return _e.to_float(x)
    return x.float() if _torch_of(x) else float(x)


def to_int(x):
    """x as an int, truncating toward zero (a condition gives 1 / 0)."""
    if _traced(x):
        return _e.to_int(x)
    return x.int() if _torch_of(x) else int(x)


def _binary(name, sym_fn, number_fn, torch_fn):
    def fn(a, b):
        if _traced(a, b):
            return sym_fn(a, b)
        torch = _torch_of(a, b)
        if torch is not None:
            return torch_fn(torch, a, b)
        return number_fn(a, b)
    fn.__name__ = fn.__qualname__ = name
    return fn


minimum = _binary("minimum", _e.minimum, lambda a, b: b if b < a else a,
                  lambda t, a, b: t.minimum(*_tensors(t, a, b)))
maximum = _binary("maximum", _e.maximum, lambda a, b: b if b > a else a,
                  lambda t, a, b: t.maximum(*_tensors(t, a, b)))
pow = _binary("pow", _e.power, lambda a, b: a ** b, lambda t, a, b: t.pow(a, b))  # noqa: A001
trunc_div = _binary("trunc_div", _e.trunc_div,
                    lambda a, b: int(a / b) if isinstance(a, int) and isinstance(b, int) else float(_math.trunc(a / b)),
                    lambda t, a, b: t.div(a, b, rounding_mode="trunc"))
fmod = _binary("fmod", _e.trunc_mod,
               lambda a, b: a - b * int(a / b) if isinstance(a, int) and isinstance(b, int) else _math.fmod(a, b),
               lambda t, a, b: t.fmod(a, b))
logical_and = _binary("logical_and", lambda a, b: _e.logical("&", a, b), lambda a, b: bool(a) and bool(b),
                      lambda t, a, b: t.logical_and(*_tensors(t, a, b)))
logical_or = _binary("logical_or", lambda a, b: _e.logical("|", a, b), lambda a, b: bool(a) or bool(b),
                     lambda t, a, b: t.logical_or(*_tensors(t, a, b)))


def _tensors(torch, a, b):
    """torch.minimum and friends need tensors on both sides."""
    ref = a if _e.is_tensor(a) else b
    conv = lambda x: x if _e.is_tensor(x) else torch.as_tensor(x, device=ref.device)
    return conv(a), conv(b)


def where(cond, if_true, if_false):
    """cond ? if_true : if_false."""
    if _traced(cond, if_true, if_false):
        return _e.where(cond, if_true, if_false)
    torch = _torch_of(cond, if_true, if_false)
    if torch is not None:
        return torch.where(cond, if_true, if_false)
    return if_true if cond else if_false


select = where


def clamp(x, min=None, max=None):  # noqa: A002 (torch's keyword names)
    """min(max(x, min), max), either bound optional."""
    if _traced(x, min, max):
        return _e.clamp(x, min, max)
    torch = _torch_of(x)
    if torch is not None:
        return torch.clamp(x, min, max)
    if min is not None and x < min:
        x = min
    if max is not None and x > max:
        x = max
    return x


def floordiv(a, b):
    """Python's a // b (floor), for traced values, numbers and tensors."""
    return a // b


__all__ = ["exp", "exp2", "log", "log2", "tanh", "sigmoid", "sqrt", "rsqrt", "sin", "cos",
           "abs", "floor", "ceil", "trunc", "to_float", "to_int", "logical_not", "logical_and",
           "logical_or", "minimum", "maximum", "pow", "trunc_div", "fmod", "where", "select",
           "clamp", "floordiv", "inf", "nan"]
