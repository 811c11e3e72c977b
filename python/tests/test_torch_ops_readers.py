"""torch_ops' readers and plans without torch or a GPU: for every place a traced function
reads a captured value from (closure cell, module global, default, keyword default, an item
of a list of functions), the reader torch.compile follows returns the value there now, also
after the variable is rebound. test_torch_compile_gpu.py checks the compiled calls."""
from attnjit import TensorPlaceholder, mods, ops, torch_ops
from attnjit.compiled import CompiledAttention
from attnjit.trace import trace

GLOBAL_TABLE = TensorPlaceholder("f32", 2)
GLOBAL_SCALE = 0.5


def global_reader_mod(score, b, h, q_idx, kv_idx):
    return score * GLOBAL_SCALE + GLOBAL_TABLE[h, kv_idx]


def readers_of(traced):
    return ({t.name: torch_ops.reader(t.slot.origin) for t in traced.tensors},
            {s.name: torch_ops.reader(s.slot.origin) for s in traced.scalars},
            [(torch_ops.reader(g.slot.origin), g.expected) for g in traced.guards])


def test_cell_readers_share_the_closure_cell():
    bias = TensorPlaceholder("bf16", 4)
    cap = 30.0
    window = 8

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * ops.tanh(score / cap) + bias[b, h, q_idx, kv_idx] + ops.where(kv_idx > q_idx - window, 0.0, -1.0)
    tensors, scalars, guards = readers_of(trace(score_mod))
    assert tensors["bias"]() is bias and scalars["cap"]() == 30.0
    assert [read() for read, _ in guards] == [8]
    bias, cap, window = TensorPlaceholder("f32", 4), 2.0, 16  # rebinding: the readers see it
    assert tensors["bias"]() is bias and scalars["cap"]() == 2.0
    assert [read() for read, _ in guards] == [16]


def test_global_readers_read_the_module_namespace():
    global GLOBAL_SCALE
    tensors, scalars, _ = readers_of(trace(global_reader_mod))
    assert tensors["GLOBAL_TABLE"]() is GLOBAL_TABLE and scalars["GLOBAL_SCALE"]() == 0.5
    old = GLOBAL_SCALE
    try:
        GLOBAL_SCALE = 4.0
        assert scalars["GLOBAL_SCALE"]() == 4.0
    finally:
        GLOBAL_SCALE = old
    assert tensors["GLOBAL_TABLE"].__globals__ is globals()


def test_default_and_kwdefault_readers():
    def score_mod(score, b, h, q_idx, kv_idx, slopes=TensorPlaceholder("f32", 1), *, scale=2.0):
        return score * scale + slopes[h]

    tensors, scalars, _ = readers_of(trace(score_mod))
    assert tensors["slopes"]() is score_mod.__defaults__[0]
    score_mod.__kwdefaults__ = {"scale": 3.0}
    assert scalars["scale"]() == 3.0


def test_list_item_guards_read_the_list():
    first, second = mods.causal_mask, mods.sliding_window(4)
    masks = [first, second]

    def mask(b, h, q_idx, kv_idx):
        return masks[0](b, h, q_idx, kv_idx) & masks[1](b, h, q_idx, kv_idx)

    _, _, guards = readers_of(trace(None, mask))
    values = [read() for read, _ in guards]
    assert masks in values and first in values and second in values


def test_plans_are_named_once_per_trace():
    fn = CompiledAttention(mods.softcap(20.0), causal=True)
    name = torch_ops.plan_name(fn)
    assert torch_ops.plan_name(fn) == name
    plan = torch_ops.get_plan(name)
    assert plan.fn is fn and plan.variant is fn._variant and plan.return_lse is False
    assert [read() for read in plan.scalar_readers] == [20.0]
    other = torch_ops.plan_name(CompiledAttention(mods.softcap(20.0), causal=True, return_lse=True))
    assert other != name and torch_ops.get_plan(other).return_lse is True
    # the functions dynamo runs for real are marked as torch.compiler.assume_constant_result marks them
    assert torch_ops._plan_for_callable._dynamo_marked_constant is True
    assert torch_ops._plan_for_functions._dynamo_marked_constant is True
