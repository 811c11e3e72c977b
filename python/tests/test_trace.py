"""Tracing score_mod / mask functions into expression text. Needs neither torch nor the
library: captured tensors are TensorPlaceholders here."""
import json
import math
import subprocess
import sys

import pytest

import attnjit
from attnjit import TensorPlaceholder, UnsupportedTraceError, mods, ops
from attnjit import expr as e
from attnjit.printer import float_literal
from attnjit.trace import trace

from evaluate import evaluate


def score_text(fn):
    return trace(fn).score_mod


def mask_text(fn):
    return trace(None, fn).mask


def trace_error(score_mod=None, mask=None):
    with pytest.raises(UnsupportedTraceError) as info:
        trace(score_mod, mask)
    return str(info.value)


# ---- operators, precedence, literals ------------------------------------------------------

def test_arithmetic_and_precedence():
    assert score_text(lambda s, b, h, q, kv: s * 2.0 + 1.0) == "score * 2.0 + 1.0"
    assert score_text(lambda s, b, h, q, kv: s * (2.0 + s)) == "score * (2.0 + score)"
    assert score_text(lambda s, b, h, q, kv: s - (s - 1.0)) == "score - (score - 1.0)"
    assert score_text(lambda s, b, h, q, kv: s - s - 1.0) == "score - score - 1.0"
    assert score_text(lambda s, b, h, q, kv: -(s + 1.0)) == "-(score + 1.0)"
    assert score_text(lambda s, b, h, q, kv: -s * 3.0) == "-score * 3.0"
    assert score_text(lambda s, b, h, q, kv: s / (s / 2.0)) == "score / (score / 2.0)"
    assert score_text(lambda s, b, h, q, kv: 1.0 - s) == "1.0 - score"
    assert score_text(lambda s, b, h, q, kv: abs(s)) == "abs(score)"
    assert score_text(lambda s, b, h, q, kv: +s) is None  # the identity


def test_comparisons_and_logic():
    assert mask_text(lambda b, h, q, kv: (q >= kv) & (kv < 10)) == "q_idx >= kv_idx && kv_idx < 10"
    assert mask_text(lambda b, h, q, kv: (q >= kv) | (kv < 10) & (h == 1)) == \
        "q_idx >= kv_idx || kv_idx < 10 && h == 1"
    assert mask_text(lambda b, h, q, kv: ((q >= kv) | (kv < 10)) & (h == 1)) == \
        "(q_idx >= kv_idx || kv_idx < 10) && h == 1"
    assert mask_text(lambda b, h, q, kv: ~(q >= kv)) == "!(q_idx >= kv_idx)"
    assert mask_text(lambda b, h, q, kv: (q >= kv) ^ (h > 0)) == "(q_idx >= kv_idx) != (h > 0)"
    assert mask_text(lambda b, h, q, kv: (q < kv) == (h < 2)) == "(q_idx < kv_idx) == (h < 2)"
    assert mask_text(lambda b, h, q, kv: q - kv >= 0) == "q_idx - kv_idx >= 0"
    assert mask_text(lambda b, h, q, kv: 5 > q) == "q_idx < 5"  # Python reflects it
    assert mask_text(lambda b, h, q, kv: True) is None
    assert mask_text(lambda b, h, q, kv: False) == "false"
    assert mask_text(lambda b, h, q, kv: (q >= kv) & True) == "q_idx >= kv_idx && true"


def test_literals():
    assert float_literal(30.0) == "30.0"
    assert float_literal(0.5) == "0.5"
    assert float_literal(1e-5) == "0.00001"
    assert float_literal(1e-7) == "1e-07"
    assert float_literal(1e20) == "1e+20"
    assert float_literal(-2.5) == "-2.5"
    assert float_literal(0.1) == "0.1"
    assert float_literal(1 / 3) == "0.3333333333333333"
    assert float_literal(float("inf")) == "inf"
    assert float_literal(float("-inf")) == "-inf"
    assert float_literal(float("nan")) == "nan"
    for v in (0.1, 1 / 3, 123456.789, 1e-300, 5e-324, 1.7976931348623157e308, 2.0 ** 0.5):
        assert float(float_literal(v)) == v
    assert score_text(lambda s, b, h, q, kv: s + 3) == "score + 3.0"
    assert score_text(lambda s, b, h, q, kv: s * -2.0) == "score * -2.0"
    assert score_text(lambda s, b, h, q, kv: ops.where(q >= kv, s, -math.inf)) == \
        "select(q_idx >= kv_idx, score, -inf)"
    assert score_text(lambda s, b, h, q, kv: ops.where(q >= kv, s, -float("inf"))) == \
        "select(q_idx >= kv_idx, score, -inf)"
    with pytest.raises(UnsupportedTraceError, match="does not fit the kernel's int32"):
        trace(None, lambda b, h, q, kv: q < 2 ** 40)


def test_int_float_promotion():
    assert score_text(lambda s, b, h, q, kv: s + q) == "score + float(q_idx)"
    assert score_text(lambda s, b, h, q, kv: s * (q - kv)) == "score * float(q_idx - kv_idx)"
    assert mask_text(lambda b, h, q, kv: q * 0.5 < kv) == "float(q_idx) * 0.5 < float(kv_idx)"
    # Python's / is a true division, also for ints
    assert score_text(lambda s, b, h, q, kv: s + q / 2) == "score + float(q_idx) / 2.0"
    assert score_text(lambda s, b, h, q, kv: s + q) == "score + float(q_idx)"
    # a score_mod returning an int becomes a float
    assert score_text(lambda s, b, h, q, kv: q - kv) == "float(q_idx - kv_idx)"
    assert score_text(lambda s, b, h, q, kv: 2) == "2.0"


def test_floor_division_and_modulo_of_non_negative_ints_are_the_c_operators():
    assert mask_text(lambda b, h, q, kv: q // 64 >= kv // 64) == "q_idx / 64 >= kv_idx / 64"
    assert mask_text(lambda b, h, q, kv: q % 4 == kv % 4) == "q_idx % 4 == kv_idx % 4"
    assert mask_text(lambda b, h, q, kv: (q + kv) // (h + 1) == 0) == "(q_idx + kv_idx) / (h + 1) == 0"


@pytest.mark.parametrize("divisor", [3, -3, "h_minus_2"])
def test_floor_division_and_modulo_keep_python_semantics(divisor):
    d = (lambda h: h - 2) if divisor == "h_minus_2" else (lambda h: divisor)
    floor_div = trace(lambda s, b, h, q, kv: s + (q - kv) // d(h))
    modulo = trace(lambda s, b, h, q, kv: s + (q - kv) % d(h))
    assert "select(" in floor_div.score_mod and "select(" in modulo.score_mod
    fd = trace_sym(lambda s, b, h, q, kv: (q - kv) // d(h))
    md = trace_sym(lambda s, b, h, q, kv: (q - kv) % d(h))
    for q in range(0, 12):
        for kv in range(0, 12):
            for h in (0, 1, 3, 5):
                dv = h - 2 if divisor == "h_minus_2" else divisor
                if dv == 0:
                    continue
                env = {"q_idx": q, "kv_idx": kv, "h": h, "score": 0.0}
                assert evaluate(fd, env) == (q - kv) // dv
                assert evaluate(md, env) == (q - kv) % dv


def trace_sym(fn):
    """The traced node of a score_mod body (before the float conversion)."""
    return fn(*(e.var(n) for n in ("score", "b", "h", "q_idx", "kv_idx")))


def test_float_floor_division_modulo_and_power():
    assert score_text(lambda s, b, h, q, kv: s // 2.0) == "floor(score / 2.0)"
    assert score_text(lambda s, b, h, q, kv: s % 2.0) == "score - floor(score / 2.0) * 2.0"
    assert score_text(lambda s, b, h, q, kv: s ** 2) == "pow(score, 2.0)"
    assert score_text(lambda s, b, h, q, kv: 2.0 ** s) == "pow(2.0, score)"
    assert mask_text(lambda b, h, q, kv: (q - kv) ** 2 < 100) == "(q_idx - kv_idx) * (q_idx - kv_idx) < 100"
    assert score_text(lambda s, b, h, q, kv: s + q ** 0.5) == "score + pow(float(q_idx), 0.5)"


def test_c_style_division_and_casts():
    assert mask_text(lambda b, h, q, kv: ops.trunc_div(q - kv, 2) == 0) == "(q_idx - kv_idx) / 2 == 0"
    assert mask_text(lambda b, h, q, kv: ops.fmod(q - kv, 2) == 0) == "(q_idx - kv_idx) % 2 == 0"
    assert mask_text(lambda b, h, q, kv: (q.float() * 0.5).int() < kv) == "int(float(q_idx) * 0.5) < kv_idx"
    assert score_text(lambda s, b, h, q, kv: s + ops.to_float(q >= kv)) == \
        "score + select(q_idx >= kv_idx, 1.0, 0.0)"
    assert mask_text(lambda b, h, q, kv: ops.to_int(q >= kv) + h > 1) == "select(q_idx >= kv_idx, 1, 0) + h > 1"
    assert mask_text(lambda b, h, q, kv: (q - kv).bool()) == "q_idx - kv_idx != 0"


def test_math_functions_and_methods():
    assert score_text(lambda s, b, h, q, kv: ops.tanh(s) + ops.exp(s) + ops.log(s)) == \
        "tanh(score) + exp(score) + log(score)"
    assert score_text(lambda s, b, h, q, kv: s.tanh() * s.sigmoid() - s.sqrt().exp2()) == \
        "tanh(score) * sigmoid(score) - exp2(sqrt(score))"
    assert score_text(lambda s, b, h, q, kv: ops.rsqrt(s) + ops.sin(s) * ops.cos(s) + ops.log2(s)) == \
        "rsqrt(score) + sin(score) * cos(score) + log2(score)"
    assert score_text(lambda s, b, h, q, kv: ops.floor(s) + ops.ceil(s)) == "floor(score) + ceil(score)"
    assert score_text(lambda s, b, h, q, kv: s + ops.exp(q)) == "score + exp(float(q_idx))"
    assert score_text(lambda s, b, h, q, kv: ops.minimum(s, 1.0) + ops.maximum(s, q)) == \
        "min(score, 1.0) + max(score, float(q_idx))"
    assert mask_text(lambda b, h, q, kv: ops.clamp(q - kv, 0, 8) < 4) == "min(max(q_idx - kv_idx, 0), 8) < 4"
    assert mask_text(lambda b, h, q, kv: ops.clamp(q - kv, min=2) < 4) == "max(q_idx - kv_idx, 2) < 4"
    assert score_text(lambda s, b, h, q, kv: s.clamp(max=5.0)) == "min(score, 5.0)"
    assert score_text(lambda s, b, h, q, kv: ops.pow(s, 3.0)) == "pow(score, 3.0)"
    assert score_text(lambda s, b, h, q, kv: ops.where(q > kv, s, q)) == \
        "select(q_idx > kv_idx, score, float(q_idx))"
    assert score_text(lambda s, b, h, q, kv: s.square() + s.reciprocal()) == "score * score + 1.0 / score"
    # Python numbers are computed right away
    assert ops.tanh(0.0) == 0.0 and ops.where(True, 1, 2) == 1 and ops.clamp(5, 0, 3) == 3
    assert ops.trunc_div(-7, 2) == -3 and ops.fmod(-7, 2) == -1 and ops.sigmoid(0.0) == 0.5


def test_math_module_inside_a_traced_function():
    from math import exp as math_exp

    def mod(score, b, h, q_idx, kv_idx):
        return score * math.exp(-0.5) + math.tanh(score) + math_exp(score) + math.pi + math.floor(score)

    assert score_text(mod) == ("score * 0.6065306597126334 + tanh(score) + exp(score) + 3.141592653589793"
                               " + floor(score)")
    assert math.exp(1.0) == pytest.approx(2.718281828)  # the real module is untouched


def test_torch_function_table_by_name():
    """Sym.__torch_function__ maps torch functions by name (checked here without torch)."""
    from attnjit.torch_functions import dispatch

    def fn(name):
        f = lambda *a, **k: None  # noqa: E731
        f.__name__ = name
        return f

    s, q, kv = e.var("score"), e.var("q_idx"), e.var("kv_idx")
    text = lambda x: attnjit.printer.to_text(x)  # noqa: E731
    assert text(dispatch(fn("tanh"), (s,), {})) == "tanh(score)"
    assert text(dispatch(fn("where"), (q >= kv, s, -math.inf), {})) == "select(q_idx >= kv_idx, score, -inf)"
    assert text(dispatch(fn("clamp"), (q - kv,), {"min": 0, "max": 4})) == "min(max(q_idx - kv_idx, 0), 4)"
    assert text(dispatch(fn("div"), (q - kv, 2), {"rounding_mode": "trunc"})) == "(q_idx - kv_idx) / 2"
    assert text(dispatch(fn("div"), (q, 2), {})) == "float(q_idx) / 2.0"
    assert text(dispatch(fn("maximum"), (s, q), {})) == "max(score, float(q_idx))"
    assert text(dispatch(fn("add"), (s, q), {"alpha": 2})) == "score + float(q_idx * 2)"
    assert text(dispatch(fn("remainder"), (q, 3), {})) == "q_idx % 3"
    assert text(dispatch(fn("fmod"), (q - kv, 3), {})) == "(q_idx - kv_idx) % 3"
    assert text(dispatch(fn("logical_not"), (q > kv,), {})) == "!(q_idx > kv_idx)"
    with pytest.raises(UnsupportedTraceError, match="torch.softmax is not supported"):
        dispatch(fn("softmax"), (s,), {})
    with pytest.raises(UnsupportedTraceError, match="reduction"):
        dispatch(fn("max"), (s,), {})


# ---- what the closure and globals become -------------------------------------------------

GLOBAL_SCALE = 0.25
GLOBAL_WINDOW = 16
GLOBAL_BIAS = TensorPlaceholder("f32", 4)


def test_closure_floats_become_runtime_scalars_and_ints_constants():
    cap, window, unused = 30.0, 128, 2.0

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * ops.tanh(score / cap)

    def window_mask(b, h, q_idx, kv_idx):
        return q_idx - kv_idx < window

    t = trace(softcap, window_mask)
    assert t.score_mod == "cap * tanh(score / cap)"
    assert t.mask == "q_idx - kv_idx < 128"
    assert [s.name for s in t.scalars] == ["cap"]
    assert t.guards_hold()
    assert unused  # read nowhere: not an input


def test_scalar_slots_read_the_current_value():
    cap = 30.0

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * ops.tanh(score / cap)

    t = trace(softcap)
    assert t.scalars[0].slot.read() == 30.0
    cap = 50.0  # noqa: F841 (read through the closure cell)
    assert t.scalars[0].slot.read() == 50.0
    assert t.guards_hold()


def test_int_constant_change_breaks_the_guard():
    window = 128

    def window_mask(b, h, q_idx, kv_idx):
        return q_idx - kv_idx < window

    t = trace(None, window_mask)
    assert t.guards_hold()
    window = 64  # noqa: F841
    assert not t.guards_hold()
    assert trace(None, window_mask).mask == "q_idx - kv_idx < 64"


def test_module_globals():
    def mod(score, b, h, q_idx, kv_idx):
        return score * GLOBAL_SCALE + GLOBAL_BIAS[b, h, q_idx, kv_idx] + (q_idx < GLOBAL_WINDOW)

    with pytest.raises(UnsupportedTraceError, match="needs numbers but got the traced bool"):
        trace(mod)

    def mod2(score, b, h, q_idx, kv_idx):
        return score * GLOBAL_SCALE + GLOBAL_BIAS[b, h, q_idx, kv_idx] + ops.where(q_idx < GLOBAL_WINDOW, 1.0, 0.0)

    t = trace(mod2)
    assert t.score_mod == ("score * GLOBAL_SCALE + GLOBAL_BIAS[b, h, q_idx, kv_idx] + "
                           "select(q_idx < 16, 1.0, 0.0)")
    assert [s.name for s in t.scalars] == ["GLOBAL_SCALE"]
    assert [(x.name, x.dtype, x.rank) for x in t.tensors] == [("GLOBAL_BIAS", "f32", 4)]
    assert t.tensors[0].slot.read() is GLOBAL_BIAS


def test_default_arguments_are_captured():
    doc = TensorPlaceholder("i64", 2)

    def mask(b, h, q_idx, kv_idx, ids=doc, limit=4):
        return (ids[b, q_idx] == ids[b, kv_idx]) & (kv_idx < limit)

    t = trace(None, mask)
    assert t.mask == "ids[b, q_idx] == ids[b, kv_idx] && kv_idx < 4"
    assert t.tensors[0].slot.read() is doc


def test_tensor_names_are_sanitized_and_unique():
    h_, score_ = TensorPlaceholder("f32", 1), TensorPlaceholder("f32", 1)

    def inner_factory(t):
        def inner(score, b, h, q_idx, kv_idx):
            return score + t[h]
        return inner

    def outer(score, b, h, q_idx, kv_idx):
        return first(score, b, h, q_idx, kv_idx) + second(score, b, h, q_idx, kv_idx)

    first, second = inner_factory(h_), inner_factory(score_)
    t = trace(outer)
    assert t.score_mod == "score + t[h] + (score + t_2[h])"
    assert [x.name for x in t.tensors] == ["t", "t_2"]

    from attnjit.capture import sanitize
    assert sanitize("h") == "h_" and sanitize("score") == "score_" and sanitize("exp") == "exp_"
    assert sanitize("__x") == "v_x" and sanitize("attnjit_bias") == "v_attnjit_bias"
    assert sanitize("bias") == "bias"


def test_same_tensor_variable_read_twice_is_one_input():
    bias = TensorPlaceholder("bf16", 4)

    def mod(score, b, h, q_idx, kv_idx):
        return score + bias[b, h, q_idx, kv_idx] * bias[b, h, kv_idx, q_idx]

    t = trace(mod)
    assert [x.name for x in t.tensors] == ["bias"]


def test_zero_dim_tensor_is_a_one_element_tensor():
    temperature = TensorPlaceholder("f32", 0)

    t = trace(lambda s, b, h, q, kv: s / temperature)
    assert t.score_mod == "score / temperature[0]"
    assert [(x.name, x.rank, x.zero_dim) for x in t.tensors] == [("temperature", 1, True)]


def test_int_and_bool_tensors():
    ids = TensorPlaceholder("i32", 2)
    keep = TensorPlaceholder("bool", 2)
    assert mask_text(lambda b, h, q, kv: (ids[b, q] == ids[b, kv]) & keep[q, kv]) == \
        "ids[b, q_idx] == ids[b, kv_idx] && keep[q_idx, kv_idx]"
    table = TensorPlaceholder("f32", 1)
    assert score_text(lambda s, b, h, q, kv: s + table[ops.clamp(ids[b, kv], 0, 9)]) == \
        "score + table[min(max(ids[b, kv_idx], 0), 9)]"


def test_extra_builtins_by_parameter_name():
    def bottom_right(b, h, q_idx, kv_idx, q_len, kv_len):
        return kv_idx <= q_idx + kv_len - q_len

    assert mask_text(bottom_right) == "kv_idx <= q_idx + kv_len - q_len"

    def per_kv_head(score, b, h, q_idx, kv_idx, *, kv_head):
        return score + kv_head

    assert score_text(per_kv_head) == "score + float(kv_head)"


def test_helpers_and_lists_of_functions_are_followed():
    bias = TensorPlaceholder("f32", 1)

    def helper(x, h):
        return x + bias[h]

    mask_fns = [mods.causal_mask, mods.sliding_window(8)]

    def both(b, h, q_idx, kv_idx):
        return mask_fns[0](b, h, q_idx, kv_idx) & mask_fns[1](b, h, q_idx, kv_idx)

    t = trace(lambda s, b, h, q, kv: helper(s, h), both)
    assert t.score_mod == "score + bias[h]"
    assert t.mask == "q_idx >= kv_idx && (q_idx - kv_idx >= 0 && q_idx - kv_idx < 8)"
    assert t.guards_hold()
    mask_fns[1] = mods.sliding_window(4)
    assert not t.guards_hold()


def test_causal_flag():
    assert trace(causal=True).mask == "q_idx >= kv_idx"
    assert trace(None, lambda b, h, q, kv: kv < 100, causal=True).mask == "kv_idx < 100 && q_idx >= kv_idx"
    assert trace(None, lambda b, h, q, kv: False, causal=True).mask == "false"


# ---- ready-made modifiers -----------------------------------------------------------------

def test_mods_text():
    P = TensorPlaceholder
    cases = [
        (None, mods.causal_mask, None, "q_idx >= kv_idx"),
        (None, mods.causal_mask_bottom_right, None, "kv_idx <= q_idx + (kv_len - q_len)"),
        (None, mods.sliding_window(256), None, "q_idx - kv_idx >= 0 && q_idx - kv_idx < 256"),
        (None, mods.sliding_window(3, bottom_right=True), None,
         "q_idx + (kv_len - q_len) - kv_idx >= 0 && q_idx + (kv_len - q_len) - kv_idx < 3"),
        (None, mods.prefix_lm(16), None, "kv_idx < 16 || kv_idx <= q_idx"),
        (None, mods.prefix_lm(P("i32", 1)), None, "kv_idx < prefix_len[b] || kv_idx <= q_idx"),
        (None, mods.document_mask(P("i32", 2)), None, "doc_ids[b, q_idx] == doc_ids[b, kv_idx]"),
        (None, mods.document_mask(P("i64", 2), P("i64", 2)), None, "doc_ids[b, q_idx] == kv_doc_ids[b, kv_idx]"),
        (mods.softcap(30), None, "cap * tanh(score / cap)", None),
        (mods.alibi(P("f32", 1)), None, "score + slopes[h] * float(kv_idx - q_idx)", None),
        (mods.bias(P("bf16", 4)), None, "score + bias[b, h, q_idx, kv_idx]", None),
        (mods.relative_position_bias(P("f32", 2), 32), None,
         "score + table[h, min(max(kv_idx - q_idx, -32), 32) + 32]", None),
        (mods.compose(mods.softcap(20.0), mods.alibi(P("f32", 1))), None,
         "cap * tanh((score + slopes[h] * float(kv_idx - q_idx)) / cap)", None),
        (None, mods.and_masks(mods.causal_mask, mods.prefix_lm(4)), None,
         "q_idx >= kv_idx && (kv_idx < 4 || kv_idx <= q_idx)"),
        (None, mods.or_masks(mods.causal_mask_bottom_right, mods.sliding_window(2)), None,
         "kv_idx <= q_idx + (kv_len - q_len) || q_idx - kv_idx >= 0 && q_idx - kv_idx < 2"),
    ]
    for score_mod, mask, want_score, want_mask in cases:
        t = trace(score_mod, mask)
        assert (t.score_mod, t.mask) == (want_score, want_mask)
    assert mods.softcap(30)(0.0, 0, 0, 0, 0) == 0.0  # eager use on numbers
    with pytest.raises(ValueError):
        mods.sliding_window(0)
    with pytest.raises(ValueError):
        mods.relative_position_bias(P("f32", 2), -1)


def test_two_softcaps_are_two_scalars_of_one_spec():
    a = attnjit.spec_json(mods.softcap(30.0))
    b = attnjit.spec_json(mods.softcap(50.0))
    assert a == b  # the value is passed at launch


def test_spec_json_document():
    doc = json.loads(attnjit.spec_json(mods.softcap(30.0), mods.document_mask(TensorPlaceholder("i32", 2)),
                                       causal=True, scale=0.125, return_lse=True, dtype="float16",
                                       head_dim=64, head_dim_v=128))
    assert doc == {
        "format": "attnjit.spec/1", "dtype": "f16", "head_dim_qk": 64, "head_dim_v": 128,
        "q_heads": 0, "kv_heads": 0, "scale": 0.125, "return_lse": True,
        "scalars": {"cap": "float"}, "tensors": {"doc_ids": {"dtype": "i32", "rank": 2}},
        "score_mod": "cap * tanh(score / cap)",
        "mask": "doc_ids[b, q_idx] == doc_ids[b, kv_idx] && q_idx >= kv_idx"}
    plain = json.loads(attnjit.spec_json())
    assert plain["score_mod"] is None and plain["mask"] is None and plain["scale"] is None
    with pytest.raises(attnjit.SpecError, match="float16, bfloat16 or float32"):
        attnjit.spec_json(dtype="int32")


# ---- errors --------------------------------------------------------------------------------

def test_python_control_flow_on_a_traced_value():
    def with_if(b, h, q_idx, kv_idx):
        if q_idx >= kv_idx:
            return True
        return False

    msg = trace_error(mask=with_if)
    assert "mask 'test_python_control_flow_on_a_traced_value.<locals>.with_if'" in msg
    assert "test_trace.py" in msg and ", line " in msg
    assert "`q_idx >= kv_idx` was used as a Python bool" in msg and "torch.where" in msg
    assert "Python bool" in trace_error(mask=lambda b, h, q, kv: (q >= kv) and (kv < 4))
    assert "Python bool" in trace_error(mask=lambda b, h, q, kv: (q >= kv) or (kv < 4))
    assert "Python bool" in trace_error(mask=lambda b, h, q, kv: not (q >= kv))
    assert "chained comparison" in trace_error(mask=lambda b, h, q, kv: 0 <= q - kv < 8)
    assert "min()/max()" in trace_error(score_mod=lambda s, b, h, q, kv: min(s, 1.0))
    assert "Python bool" in trace_error(mask=lambda b, h, q, kv: bool(q > kv))


def test_conversions_and_indexing_errors():
    assert "int()" in trace_error(mask=lambda b, h, q, kv: int(q) > 0)
    assert "float()" in trace_error(score_mod=lambda s, b, h, q, kv: float(s))
    table = [1.0, 2.0]
    assert "index into a Python object that is not captured" in trace_error(
        score_mod=lambda s, b, h, q, kv: s + table[h])
    assert "cannot be indexed" in trace_error(score_mod=lambda s, b, h, q, kv: s[0])
    assert "round(" in trace_error(score_mod=lambda s, b, h, q, kv: round(s))


def test_wrong_result_types():
    assert "returned a condition" in trace_error(score_mod=lambda s, b, h, q, kv: s > 0)
    msg = trace_error(mask=lambda b, h, q, kv: q - kv * 1.0)
    assert "returned the traced float" in msg and "a mask returns a condition" in msg
    assert "a mask returns a condition" in trace_error(mask=lambda b, h, q, kv: 1)
    assert "must return the new score" in trace_error(score_mod=lambda s, b, h, q, kv: None)
    assert "must be a function" in trace_error(score_mod=42)


def test_type_errors_in_expressions():
    assert "needs numbers but got" in trace_error(score_mod=lambda s, b, h, q, kv: s + (q > kv))
    assert "bitwise operations on ints are not supported" in trace_error(mask=lambda b, h, q, kv: (q & 1) == 0)
    assert "bitwise not" in trace_error(mask=lambda b, h, q, kv: ~q == 0)
    assert "shifts" in trace_error(mask=lambda b, h, q, kv: (q >> 1) == 0)
    assert "cannot negate a bool" in trace_error(mask=lambda b, h, q, kv: -(q > kv))
    assert "bools compare only with bools" in trace_error(mask=lambda b, h, q, kv: (q > kv) < 1)
    assert "condition must be a bool" in trace_error(score_mod=lambda s, b, h, q, kv: ops.where(q, s, 0.0))
    assert "cannot be part of an attention expression" in trace_error(score_mod=lambda s, b, h, q, kv: s + "x")


def test_captured_tensor_errors():
    bias = TensorPlaceholder("f32", 2)
    assert "has 2 dimensions but was indexed with 1 index" in trace_error(
        score_mod=lambda s, b, h, q, kv: s + bias[h])
    assert "slicing is not supported" in trace_error(score_mod=lambda s, b, h, q, kv: s + bias[h, :])
    assert "negative indices do not wrap" in trace_error(score_mod=lambda s, b, h, q, kv: s + bias[h, -1])
    assert "indices must be ints" in trace_error(score_mod=lambda s, b, h, q, kv: s + bias[h, s])
    assert "indices must be ints" in trace_error(score_mod=lambda s, b, h, q, kv: s + bias[h, 1.0])
    assert "used without indexing" in trace_error(score_mod=lambda s, b, h, q, kv: s + bias)
    assert ".shape is not available" in trace_error(score_mod=lambda s, b, h, q, kv: s + bias.shape[0])
    with pytest.raises(ValueError):
        TensorPlaceholder("f64", 2)


def test_indexing_a_placeholder_attribute_says_how_to_capture_it():
    # A placeholder held by an object (self.bias) is not captured: indexing it used to
    # raise Python's bare "'TensorPlaceholder' object is not subscriptable".
    class Model:
        def __init__(self):
            self.bias = TensorPlaceholder("f32", 1)

        def score_mod(self, score, b, h, q_idx, kv_idx):
            return score + self.bias[h]

    model = Model()
    for fn in (model.score_mod, lambda s, b, h, q, kv: s + model.bias[h]):
        message = trace_error(score_mod=fn)
        assert "TensorPlaceholder('f32', rank=1) was indexed, but it is not a captured tensor" in message
        assert "`bias = self.bias` outside the function" in message
    # The fixes the message names work.
    bias = model.bias
    assert score_text(lambda s, b, h, q, kv: s + bias[h]) == "score + bias[h]"
    assert score_text(lambda s, b, h, q, kv, bias=model.bias: s + bias[h]) == "score + bias[h]"


# ---- limits (docs/spec_format.md, "Limits") ---------------------------------------------------

def test_long_chains_raise_a_spec_error_not_a_recursion_error():
    # Before the limit, printing ~500 summed terms raised a bare RecursionError.
    for terms in (e.MAX_EXPR_DEPTH + 1, 5000):
        def long_sum(score, b, h, q_idx, kv_idx):
            total = score
            for _ in range(terms - 1):
                total = total + score
            return total

        with pytest.raises(attnjit.SpecError, match="the expression is too deep: it nests 257 levels"):
            trace(long_sum)

    def long_and(b, h, q_idx, kv_idx):
        keep = q_idx >= kv_idx
        for _ in range(1000):
            keep = keep & (q_idx >= kv_idx)
        return keep

    with pytest.raises(attnjit.AttnjitError, match="too deep"):
        trace(None, long_and)


def test_the_deepest_allowed_chain_prints_without_recursion():
    def deepest(score, b, h, q_idx, kv_idx):
        total = score
        for _ in range(e.MAX_EXPR_DEPTH - 1):
            total = total + score
        return total

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the printer must not need a frame a level
    try:
        text = trace(deepest).score_mod
    finally:
        sys.setrecursionlimit(limit)
    assert text == " + ".join(["score"] * e.MAX_EXPR_DEPTH)


def test_shared_subexpressions_count_at_each_use():
    def doubling(score, b, h, q_idx, kv_idx):
        x = score
        for _ in range(64):
            x = x + x
        return x

    with pytest.raises(attnjit.SpecError, match="too large: it has 8191 nodes"):
        trace(doubling)


def test_int_constants_must_fit_int32():
    assert "does not fit the kernel's int32" in trace_error(mask=lambda b, h, q, kv: q < 2**31)
    assert "does not fit the kernel's int32" in trace_error(mask=lambda b, h, q, kv: abs(q) > -(2**63))
    assert mask_text(lambda b, h, q, kv: q > -(2**31)) == "q_idx > -2147483648"


def test_other_exceptions_pass_through_with_a_note():
    def broken(score, b, h, q_idx, kv_idx):
        return score + undefined_name  # noqa: F821

    with pytest.raises(NameError) as info:
        trace(broken)
    assert any("while attnjit traced score_mod" in n for n in getattr(info.value, "__notes__", []))


def test_errors_are_in_the_hierarchy():
    assert issubclass(UnsupportedTraceError, attnjit.AttnjitError)
    assert issubclass(UnsupportedTraceError, TypeError)
    assert issubclass(attnjit.SpecError, ValueError) and issubclass(attnjit.ArgumentError, ValueError)
    assert issubclass(attnjit.LibraryNotFoundError, attnjit.RuntimeEnvironmentError)
    assert issubclass(attnjit.InternalError, RuntimeError)


def test_import_needs_neither_torch_nor_the_library():
    code = ("import sys; sys.path.insert(0, %r); import attnjit; "
            "attnjit.spec_json(attnjit.mods.softcap(30.0), causal=True); "
            "assert 'torch' not in sys.modules; print('ok')") % (attnjit.__path__[0].rsplit("/", 1)[0],)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"ATTNJIT_LIBRARY": "/nonexistent/libattnjit_c.so", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
