"""A test-only evaluator of traced expressions with the kernel's semantics (C int / and %
truncate toward zero), to check that the emitted text computes Python's semantics."""
import math

from attnjit import expr as e


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_mod(a, b):
    return a - b * _c_div(a, b)


_UNARY = {"exp": math.exp, "log": math.log, "tanh": math.tanh, "sqrt": math.sqrt, "floor": math.floor,
          "ceil": math.ceil, "sin": math.sin, "cos": math.cos, "abs": abs, "exp2": lambda x: 2.0 ** x,
          "log2": math.log2, "sigmoid": lambda x: 1 / (1 + math.exp(-x)), "rsqrt": lambda x: x ** -0.5}


def evaluate(s, env):
    """Value of node s; env maps variable / scalar names to values."""
    k = s.kind
    if k == e.CONST:
        return s.value
    if k in (e.VAR, e.SCALAR):
        return env[s.op]
    if k == e.CAST:
        v = evaluate(s.args[0], env)
        return float(v) if s.op == "float" else int(v)
    if k == e.SELECT:
        return evaluate(s.args[1] if evaluate(s.args[0], env) else s.args[2], env)
    if k == e.UNARY:
        v = evaluate(s.args[0], env)
        if s.op == "-":
            return -v
        if s.op == "!":
            return not v
        out = _UNARY[s.op](v)
        return float(out) if s.op in ("floor", "ceil") else out
    if k == e.BINARY:
        a, b = evaluate(s.args[0], env), evaluate(s.args[1], env)
        if s.op == "/":
            return _c_div(a, b) if s.type == e.INT else a / b
        if s.op == "%":
            return _c_mod(a, b)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "min": lambda: min(a, b),
                "max": lambda: max(a, b), "pow": lambda: a ** b, "==": lambda: a == b, "!=": lambda: a != b,
                "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
                "&&": lambda: a and b, "||": lambda: a or b}[s.op]()
    raise AssertionError(k)
