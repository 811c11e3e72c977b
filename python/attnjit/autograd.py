"""Training through attnjit: attnjit.compile / attnjit.attention outputs carry autograd when
q, k or v requires grad. The forward runs the spec with LSE; loss.backward() runs attnjit's
backward kernels (C API attnjit_launch_backward), deterministic unless compile(...,
deterministic=False) allows the fast backward (dQ summed with fp32 atomics), with the
derivative of score_mod derived from the traced expression. Attention sinks (sinks= [Hq])
that require grad get theirs (deterministic). Captured tensors that require grad are
refused for now: their gradients are not computed yet. The captured tensors are kept alive
until the backward, which reads them again: changing one in place in between changes the
gradients (PyTorch's version check does not cover them yet)."""
from __future__ import annotations

import ctypes

from . import capi, dtypes
from ._capi_types import CGradArgs, CLaunchArgs, CTensor
from ._load_once import LoadOnce

_backwards = LoadOnce()  # (spec json, device, tile, deterministic) -> capi.Backward


def backward_for(json_text: str, device: int, tile: dict | None, deterministic: bool = True) -> capi.Backward:
    """The compiled backward of a spec (which returns LSE) on a CUDA device, compiled once."""
    import torch

    def make():
        with torch.cuda.device(device):  # load into this device's primary context
            return capi.Backward(capi.Spec.from_json(json_text), None, tile, fast_backward=not deterministic)
    return _backwards.get((json_text, device, tuple(sorted((tile or {}).items())), bool(deterministic)), make,
                          f"the backward of {json_text} for CUDA device {device}")


def _c_tensor(ptr: int, code: int, shape, strides) -> CTensor:
    t = CTensor()
    t.data = ptr
    t.dtype = code
    t.rank = len(shape)
    for d, (n, s) in enumerate(zip(shape, strides)):
        t.shape[d] = n
        t.strides[d] = s
    return t


def _of(t, code: int) -> CTensor:
    return _c_tensor(t.data_ptr(), code, t.shape, t.stride())


class Call:
    """What one training call's backward needs besides the saved q, k, v, out, lse: the
    backward handle, the dtype code, the captured tensors (kept alive: the backward reads
    them again) and the scalar values, in the spec's order."""

    __slots__ = ("backward", "code", "device", "tensors", "scalars")

    def __init__(self, backward, code: int, device: int, tensors, scalars):
        self.backward, self.code, self.device = backward, code, device
        self.tensors, self.scalars = tensors, scalars

    def launch(self, q, k, v, out, lse, d_o, dq, dk, dv, d_sinks=None) -> None:
        import torch

        code = self.code
        args = CLaunchArgs()
        args.struct_size = ctypes.sizeof(CLaunchArgs)
        args.q, args.k, args.v, args.o = _of(q, code), _of(k, code), _of(v, code), _of(out, code)
        lse_c = _of(lse, dtypes.CODES["f32"])
        args.lse = ctypes.pointer(lse_c)
        n = len(self.tensors)
        tensors = (CTensor * max(n, 1))(*[_c_tensor(*t[1:]) for t in self.tensors])
        args.num_tensors = n
        args.tensors = ctypes.cast(tensors, ctypes.POINTER(CTensor)) if n else None
        scalars = (ctypes.c_double * max(len(self.scalars), 1))(*self.scalars)
        args.num_scalars = len(self.scalars)
        args.scalars = ctypes.cast(scalars, ctypes.POINTER(ctypes.c_double)) if self.scalars else None
        grads = CGradArgs(ctypes.sizeof(CGradArgs), _of(d_o, code), _of(dq, code), _of(dk, code), _of(dv, code))
        if d_sinks is not None:
            grads.d_sinks = _of(d_sinks, dtypes.CODES[dtypes.name_of(d_sinks.dtype)])
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device).cuda_stream
            self.backward.launch(ctypes.addressof(args), ctypes.addressof(grads), stream)


def attention_function():
    """torch.autograd.Function over a forward launcher that returns (out, lse); defined on
    first use so that importing attnjit does not import torch."""
    global _Function
    if _Function is None:
        import torch

        class AttentionFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, call, launch, q, k, v, sinks=None):
                out, lse = launch()
                # sinks too: the backward reads them again, and autograd's version check
                # then refuses a sinks tensor changed in place before loss.backward()
                ctx.save_for_backward(q, k, v, out, lse, sinks)
                ctx.call = call
                ctx.mark_non_differentiable(lse)
                return out, lse

            @staticmethod
            @torch.autograd.function.once_differentiable  # no double backward: say so, never give zeros
            def backward(ctx, d_out, _d_lse):  # LSE is not differentiable
                q, k, v, out, lse, sinks = ctx.saved_tensors
                d_o = d_out.contiguous() if d_out is not None else torch.zeros_like(out)
                if d_o.data_ptr() % 16:  # a contiguous view at an odd offset: the kernels load 16 bytes
                    d_o = d_o.clone()
                dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
                dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
                dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
                needs = ctx.needs_input_grad
                d_sinks = None
                if sinks is not None and needs[5]:
                    d_sinks = torch.empty(sinks.shape, dtype=sinks.dtype, device=sinks.device)
                ctx.call.launch(q, k, v, out, lse, d_o, dq, dk, dv, d_sinks)
                return (None, None, dq if needs[2] else None, dk if needs[3] else None, dv if needs[4] else None,
                        d_sinks)

        _Function = AttentionFunction
    return _Function


_Function = None
