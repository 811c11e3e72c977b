"""torch.* calls on traced values. Sym defines __torch_function__, so torch.tanh(score),
torch.where(c, x, y), torch.clamp(d, min=0), ... arrive here by name and become expression
nodes; anything else raises UnsupportedTraceError listing what is supported."""
from __future__ import annotations

from . import expr as e


def _arg(args, kwargs, i, name, default=None):
    if i < len(args):
        return args[i]
    return kwargs.get(name, default)


def _unary(fn):
    return lambda a, k: fn(_arg(a, k, 0, "input"))


def _binary(fn):
    return lambda a, k: fn(_arg(a, k, 0, "input"), _arg(a, k, 1, "other"))


def _with_alpha(fn):
    def call(a, k):
        other, alpha = _arg(a, k, 1, "other"), _arg(a, k, 2, "alpha", 1)
        return fn(_arg(a, k, 0, "input"), other if alpha == 1 else e.mul(other, alpha))
    return call


def _div(a, k):
    x, y, mode = _arg(a, k, 0, "input"), _arg(a, k, 1, "other"), k.get("rounding_mode")
    if mode is None:
        return e.truediv(x, y)
    if mode == "trunc":
        return e.trunc_div(x, y)
    if mode == "floor":
        return e.floordiv(x, y)
    e.fail(f"torch.div rounding_mode={mode!r} is not supported")


def _min_max(fn, name):
    def call(a, k):
        if len(a) + len(k) != 2 or k.keys() - {"input", "other"}:
            e.fail(f"torch.{name} with one argument (a reduction) or dim= is not supported on a "
                   f"traced value; use torch.{name}imum(a, b) for two values")
        return fn(_arg(a, k, 0, "input"), _arg(a, k, 1, "other"))
    return call


_TABLE = {
    "where": lambda a, k: e.where(_arg(a, k, 0, "condition"), _arg(a, k, 1, "input"), _arg(a, k, 2, "other")),
    "clamp": lambda a, k: e.clamp(_arg(a, k, 0, "input"), _arg(a, k, 1, "min"), _arg(a, k, 2, "max")),
    "minimum": _binary(e.minimum),
    "maximum": _binary(e.maximum),
    "min": _min_max(e.minimum, "min"),
    "max": _min_max(e.maximum, "max"),
    "pow": lambda a, k: e.power(_arg(a, k, 0, "input"), _arg(a, k, 1, "exponent")),
    "add": _with_alpha(e.add),
    "sub": _with_alpha(e.sub),
    "rsub": lambda a, k: e.sub(_arg(a, k, 1, "other"), _arg(a, k, 0, "input")),
    "mul": _binary(e.mul),
    "div": _div,
    "floor_divide": _binary(e.floordiv),
    "remainder": _binary(e.mod),
    "fmod": _binary(e.trunc_mod),
    "eq": _binary(lambda x, y: e.compare("==", x, y)),
    "ne": _binary(lambda x, y: e.compare("!=", x, y)),
    "lt": _binary(lambda x, y: e.compare("<", x, y)),
    "le": _binary(lambda x, y: e.compare("<=", x, y)),
    "gt": _binary(lambda x, y: e.compare(">", x, y)),
    "ge": _binary(lambda x, y: e.compare(">=", x, y)),
    "logical_and": _binary(lambda x, y: e.logical("&", x, y)),
    "logical_or": _binary(lambda x, y: e.logical("|", x, y)),
    "logical_xor": _binary(lambda x, y: e.logical("^", x, y)),
    "logical_not": _unary(e.logical_not),
    "abs": _unary(e.absolute),
    "neg": _unary(e.neg),
    "floor": _unary(e.floor),
    "ceil": _unary(e.ceil),
    "trunc": _unary(e.trunc),
    "square": _unary(lambda x: e.mul(x, x)),
    "reciprocal": _unary(lambda x: e.truediv(1.0, x)),
    "relu": _unary(lambda x: e.maximum(x, 0)),
}
for _name in e.FLOAT_FUNCTIONS:
    _TABLE[_name] = _unary(lambda x, _n=_name: e.math_fn(_n, x))
_ALIASES = {"clip": "clamp", "absolute": "abs", "negative": "neg", "fix": "trunc", "subtract": "sub",
            "multiply": "mul", "divide": "div", "true_divide": "div", "greater": "gt", "less": "lt",
            "greater_equal": "ge", "less_equal": "le", "not_equal": "ne", "expit": "sigmoid",
            "special_expit": "sigmoid", "special_exp2": "exp2"}
for _alias, _name in _ALIASES.items():
    _TABLE[_alias] = _TABLE[_name]

SUPPORTED = sorted(_TABLE)


def _real_tensors(args, kwargs):
    for x in list(args) + list(kwargs.values()):
        if e.is_tensor(x):
            yield x
        elif isinstance(x, (tuple, list)):
            yield from _real_tensors(x, {})


def dispatch(func, args, kwargs):
    name = getattr(func, "__name__", str(func))
    if name == "__getitem__" or name == "index":
        e.fail("a traced index was used on a torch tensor that is not captured. Only tensors held "
               "directly by a variable (closure, default argument or module global) become captured "
               "tensors, not tensors inside lists, dicts or attributes such as self.bias: bind it "
               "first (`bias = self.bias`) and index bias[...] in the function")
    if any(True for _ in _real_tensors(args, kwargs)):
        e.fail(f"torch.{name.strip('_')} was called with a torch tensor and a traced value; "
               "tensors take part only through indexing a captured tensor (bias[b, h, q_idx, "
               "kv_idx]); tensors made inside the function are not supported, use Python numbers")
    impl = _TABLE.get(name)
    if impl is None:
        e.fail(f"torch.{name} is not supported on traced values; supported: {', '.join(SUPPORTED)} "
               "(and the operators + - * / // % ** < <= > >= == != & | ^ ~ abs())")
    return impl(args, kwargs)
