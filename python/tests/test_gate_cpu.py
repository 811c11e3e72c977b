"""The output gate's argument checks and spec, on the CPU (torch for the checks, no GPU;
no torch for the spec): the checks run before anything needs CUDA, so a good gate gets as
far as the CUDA-device check and a bad one is refused with its own message."""
import json

import pytest

import attnjit
from attnjit import TensorPlaceholder as P


def test_spec_json_names_the_gate_and_keeps_names_unique():
    doc = json.loads(attnjit.spec_json(dtype="f16", head_dim=64, gate=True))
    assert doc["gate"] == "gate" and doc["tensors"] == {"gate": {"dtype": "f16", "rank": 4}}
    gate, gate_1 = P("f32", 1), P("f32", 1)  # captured tensors already named gate and gate_1

    def mod(score, b, h, q_idx, kv_idx):
        return score + gate[h] + gate_1[h]
    doc = json.loads(attnjit.spec_json(mod, dtype="bf16", head_dim=32, gate=True, sinks_dtype="f32"))
    assert doc["gate"] == "gate_2" and doc["tensors"]["gate_2"] == {"dtype": "bf16", "rank": 4}
    assert doc["sinks"] == "sinks" and list(doc["tensors"]) == sorted(doc["tensors"])
    assert "gate" not in json.loads(attnjit.spec_json(dtype="bf16", head_dim=32))


def test_compiled_callable_spec_json_with_a_gate():
    fn = attnjit.compile(causal=True)
    doc = json.loads(fn.spec_json("f32", 128, 64, gate=True))
    assert doc["gate"] == "gate" and doc["tensors"]["gate"] == {"dtype": "f32", "rank": 4}
    assert doc["head_dim_v"] == 64


def test_gate_arguments_are_checked_before_cuda():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    q, k, v = (torch.zeros(2, 4, 16, 32, dtype=torch.bfloat16) for _ in range(3))
    cases = [
        (1.5, "gate must be a torch.Tensor, got float"),
        (torch.zeros(2, 4, 16, 32), "gate has dtype torch.float32; it must have q's dtype, torch.bfloat16"),
        (torch.zeros(2, 4, 15, 32, dtype=torch.bfloat16), "or broadcast to it"),
        (torch.zeros(2, 4, 16, 32, 1, dtype=torch.bfloat16), "[B, Hq, Nq, Dv] = [2, 4, 16, 32]"),
    ]
    for gate, fragment in cases:
        for call in (lambda g: attnjit.attention(q, k, v, gate=g), lambda g: attnjit.compile()(q, k, v, gate=g)):
            with pytest.raises(attnjit.ArgumentError) as info:
                call(gate)
            assert fragment in str(info.value), str(info.value)
    # good gates (full, broadcast [1, Hq, 1, Dv], one that requires grad) pass the gate's checks
    for gate in (torch.zeros(2, 4, 16, 32, dtype=torch.bfloat16), torch.zeros(1, 4, 1, 32, dtype=torch.bfloat16),
                 torch.zeros(4, 1, 32, dtype=torch.bfloat16, requires_grad=True)):
        with pytest.raises(attnjit.ArgumentError, match="must be CUDA tensors"):
            attnjit.attention(q, k, v, gate=gate)
