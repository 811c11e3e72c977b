"""Expression text in the syntax of attnjit's C++ printer (dsl/printer.cpp), which the
JSON spec parser reads back: C operators and precedence, calls for functions, min, max,
pow and select, float(x) / int(x) casts, tensor loads name[i, j], float literals that
always contain '.', 'e', 'inf' or 'nan'."""
from __future__ import annotations

import math

from .expr import BINARY, CAST, CONST, FLOAT, LOAD, SCALAR, SELECT, UNARY, VAR, BOOL, Sym

# C precedence of the infix operators; calls and atoms bind tightest.
_PRECEDENCE = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
               "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_UNARY_PREC = 7
_ATOM_PREC = 100
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def float_literal(v: float) -> str:
    """The shortest text that reads back as v; fixed notation when it is at most two
    characters longer than the exponent form ("30.0", "0.00001", "1e-07")."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    best = repr(v)
    for prec in range(1, 18):
        s = "%.*g" % (prec, v)
        if float(s) == v:
            best = s
            break
    if abs(v) < 1e15:
        for digits in range(1, 18):
            s = "%.*f" % (digits, v)
            if float(s) == v:
                if len(s) <= len(best) + 2:
                    best = s
                break
    if not any(c in best for c in ".en"):
        best += ".0"
    return best


def _prec(s: Sym) -> int:
    if s.kind == BINARY:
        return _PRECEDENCE.get(s.op, _ATOM_PREC)
    if s.kind == UNARY:
        return _UNARY_PREC if s.op in ("-", "!") else _ATOM_PREC
    if s.kind == CONST and s.type != BOOL and s.value < 0:
        return _UNARY_PREC
    return _ATOM_PREC


def to_text(s: Sym) -> str:
    # A loop over an explicit stack, not recursion: the text of a deep expression must not
    # depend on Python's recursion limit. Items are text to write or nodes to print.
    out: list[str] = []
    stack: list = [s]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        else:
            stack.extend(reversed(_parts(item)))
    return "".join(out)


def _child(s: Sym, min_prec: int) -> list:
    return ["(", s, ")"] if _prec(s) < min_prec else [s]


def _call(name: str, args) -> list:
    parts: list = [name + "("]
    for i, a in enumerate(args):
        if i:
            parts.append(", ")
        parts.append(a)
    return parts + [")"]


def _parts(s: Sym) -> list:
    """The text of one node: strings, and its operands as nodes still to print."""
    k = s.kind
    if k == CONST:
        if s.type == BOOL:
            return ["true" if s.value else "false"]
        if s.type == FLOAT:
            return [float_literal(s.value)]
        return [str(s.value)]
    if k in (VAR, SCALAR):
        return [s.op]
    if k == LOAD:
        return [s.op + "["] + _call("", s.args)[1:-1] + ["]"]
    if k == UNARY:
        if s.op not in ("-", "!"):
            return _call(s.op, s.args)
        # -(2.0) keeps a negated literal distinct from the literal -2.0
        a = s.args[0]
        wrap = _prec(a) <= _UNARY_PREC or a.kind == CONST
        return [s.op, "(", a, ")"] if wrap else [s.op, a]
    if k == BINARY:
        p = _PRECEDENCE.get(s.op)
        if p is None:
            return _call(s.op, s.args)
        # left-associative; a comparison of comparisons is parenthesised for the reader
        left, right = (5, 5) if s.op in _COMPARISONS else (p, p + 1)
        return _child(s.args[0], left) + [f" {s.op} "] + _child(s.args[1], right)
    if k == SELECT:
        return _call("select", s.args)
    if k == CAST:
        return _call(s.op, s.args)
    raise AssertionError(k)


def referenced_names(s: Sym, scalars: set, tensors: set) -> None:
    """Adds the runtime scalars and captured tensors that s reads."""
    stack = [s]
    while stack:
        n = stack.pop()
        if n.kind == SCALAR:
            scalars.add(n.op)
        elif n.kind == LOAD:
            tensors.add(n.op)
        stack.extend(n.args)
