"""The autograd Function's plumbing for the structural tensors (attention sinks, the output
gate), on the CPU with torch (no GPU, no library): a fake backward launch stands in for the
kernels, and the test checks which gradients are asked for and where they go. The numbers
are test_torch_gpu.py's business."""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

from attnjit import autograd  # noqa: E402


class FakeCall:
    """Fills each gradient with a constant; records whether d sinks was asked for (by the
    sinks' name among the input gradients, as captured tensors' are)."""
    grad_names, grad_values, extra_names = (), (), ("sinks", "gate", "score_conv", "reciprocal_band")

    def __init__(self):
        self.asked_d_sinks = []
        self.asked_d_gate = []

    def launch(self, q, k, v, out, lse, d_o, dq, dk, dv, input_grads=()):
        dq.fill_(1.0)
        dk.fill_(2.0)
        dv.fill_(3.0)
        d_sinks = dict(input_grads).get("sinks")
        if d_sinks is not None:
            assert d_sinks.shape == (2,) and d_sinks.is_contiguous()
            d_sinks.fill_(4.0)
        self.asked_d_sinks.append(d_sinks is not None)
        d_gate = dict(input_grads).get("gate")
        if d_gate is not None:
            assert d_gate.shape == (1, 2, 3, 4) and d_gate.is_contiguous()
            d_gate.fill_(5.0)
        self.asked_d_gate.append(d_gate is not None)


def run(sinks, qkv_grad=True, gate=None):
    q, k, v = (torch.randn(1, 2, 3, 4, requires_grad=qkv_grad) for _ in range(3))
    call = FakeCall()
    out, lse = autograd.attention_function().apply(
        call, lambda: (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3)), q, k, v, sinks, gate, None, None)
    return call, (q, k, v), out, lse


def test_a_gate_that_requires_grad_gets_its_own():
    gate = torch.zeros(1, 2, 3, 4, requires_grad=True)
    call, _, out, _ = run(None, gate=gate)
    out.sum().backward()
    assert call.asked_d_gate == [True] and call.asked_d_sinks == [False]
    assert torch.equal(gate.grad, torch.full((1, 2, 3, 4), 5.0))


def test_a_frozen_gate_asks_for_no_gradient():
    call, _, out, _ = run(torch.zeros(2, requires_grad=True), gate=torch.zeros(1, 2, 3, 4))
    out.sum().backward()
    assert call.asked_d_gate == [False] and call.asked_d_sinks == [True]


def test_sinks_that_require_grad_get_theirs():
    sinks = torch.zeros(2, requires_grad=True)
    call, (q, k, v), out, lse = run(sinks)
    assert out.requires_grad and not lse.requires_grad
    out.sum().backward()
    assert call.asked_d_sinks == [True]
    assert torch.equal(sinks.grad, torch.full((2,), 4.0))
    assert torch.equal(q.grad, torch.ones_like(q)) and torch.equal(v.grad, torch.full_like(v, 3.0))


def test_bf16_sinks_get_a_bf16_gradient_and_frozen_q_k_v_none():
    sinks = torch.zeros(2, dtype=torch.bfloat16, requires_grad=True)
    call, (q, k, v), out, _ = run(sinks, qkv_grad=False)
    out.sum().backward()
    assert sinks.grad.dtype == torch.bfloat16 and q.grad is None


def test_frozen_or_absent_sinks_ask_for_no_gradient():
    for sinks in (torch.zeros(2), None):
        call, (q, _, _), out, _ = run(sinks)
        out.sum().backward()
        assert call.asked_d_sinks == [False] and q.grad is not None


def test_sinks_changed_in_place_before_backward_are_refused():
    sinks = torch.zeros(2, requires_grad=True)
    _, _, out, _ = run(sinks)
    with torch.no_grad():
        sinks.add_(1.0)  # an optimizer step between forward and backward
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
