"""Training through attnjit: attnjit.compile / attnjit.attention outputs carry autograd when
q, k or v requires grad. The forward runs the spec with LSE; loss.backward() runs attnjit's
backward kernels (C API attnjit_launch_backward), deterministic unless compile(...,
deterministic=False) allows the fast backward (dQ summed with fp32 atomics), with the
derivative of score_mod derived from the traced expression. Captured torch tensors that require
grad (a bias, ALiBi slopes, a 0-dim temperature), attention sinks (sinks= [Hq]), an output
gate and the reciprocal band's alpha (reciprocal_band=(W, alpha), alpha [Hq] float32, also a
stride-0 view of one weight) that require grad receive .grad too, from the same backward
(deterministic; see docs/semantics.md for the reads supported); Python floats stay
non-differentiable runtime scalars. The captured tensors are kept alive until the backward,
which reads them again: changing one in place in between changes the gradients (PyTorch's
version check does not cover them yet)."""
from __future__ import annotations

import ctypes

from . import capi, dtypes
from ._capi_types import CGradArgs, CLaunchArgs, CTensor
from ._load_once import LoadOnce

_backwards = LoadOnce()  # (spec json, device, tile, deterministic, grads, mainloop, autotune) -> capi.Backward


def backward_for(json_text: str, device: int, tile: dict | None, deterministic: bool = True,
                 grads: tuple = (), mainloop: str | None = None, autotune: bool | None = None) -> capi.Backward:
    """The compiled backward of a spec (which returns LSE) on a CUDA device, compiled once;
    grads: the captured tensors whose gradients it computes (sorted names); mainloop: its
    key-tile kernel's loop (None: attnjit's choice); autotune: tune that kernel's tile per shape
    bucket (None: as ATTNJIT_AUTOTUNE says; docs/autotune.md)."""
    import torch

    def make():
        with torch.cuda.device(device):  # load into this device's primary context
            return capi.Backward(capi.Spec.from_json(json_text), None, tile, fast_backward=not deterministic,
                                 grads=tuple(grads), mainloop=mainloop, autotune=autotune)
    key = (json_text, device, tuple(sorted((tile or {}).items())), bool(deterministic), tuple(grads), mainloop,
           autotune)
    return _backwards.get(key, make, f"the backward of {json_text} for CUDA device {device}")


def grad_output(value):
    """The gradient buffer of a captured tensor that requires grad, and what autograd gets:
    one element per logical element of the tensor (also where it broadcasts, e.g. a
    [1, H, N, N] bias expanded over the batch: autograd's ExpandBackward then sums over the
    batch; the buffer is full-size), contiguous; a 0-dim tensor (passed to the kernels as
    [1]) gets a [1] buffer returned as 0-dim."""
    import torch

    if value.dim() == 0:
        buf = torch.empty((1,), dtype=value.dtype, device=value.device)
        return buf, buf.reshape(())
    buf = torch.empty(value.shape, dtype=value.dtype, device=value.device)
    return buf, buf


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

    __slots__ = ("backward", "code", "device", "tensors", "scalars", "grad_names", "grad_values", "extra_names")

    def __init__(self, backward, code: int, device: int, tensors, scalars, grad_names=(), grad_values=(),
                 extra_names=(None, None, None, None)):
        self.backward, self.code, self.device = backward, code, device
        # the spec's names of the sinks, gate, score_conv and reciprocal band alpha tensors
        self.extra_names = extra_names
        self.tensors, self.scalars = tensors, scalars
        # Captured tensors that require grad: their spec names and the tensors (inputs of
        # the autograd Function, in this order).
        self.grad_names, self.grad_values = tuple(grad_names), tuple(grad_values)

    def launch(self, q, k, v, out, lse, d_o, dq, dk, dv, input_grads=()) -> None:
        """input_grads: one (name, buffer) per captured tensor asked for (grad_output's buffer)."""
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
        if input_grads:
            names = (ctypes.c_char_p * len(input_grads))(*[n.encode() for n, _ in input_grads])
            outs = (CTensor * len(input_grads))(*[_of(b, dtypes.CODES[dtypes.name_of(b.dtype)])
                                                  for _, b in input_grads])  # grad_output's: never 0-dim
            grads.input_grad_names = ctypes.cast(names, ctypes.POINTER(ctypes.c_char_p))
            grads.input_grads = ctypes.cast(outs, ctypes.POINTER(CTensor))
            grads.num_input_grads = len(input_grads)
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
            def forward(ctx, call, launch, q, k, v, sinks, gate, conv, band, *captured):  # captured: those needing grad
                out, lse = launch()
                # the structural tensors too: the backward reads them again, and autograd's
                # version check then refuses one changed in place before loss.backward()
                ctx.save_for_backward(q, k, v, out, lse, sinks, gate, conv, band)
                ctx.call = call
                ctx.mark_non_differentiable(lse)
                return out, lse

            @staticmethod
            @torch.autograd.function.once_differentiable  # no double backward: say so, never give zeros
            def backward(ctx, d_out, _d_lse):  # LSE is not differentiable
                q, k, v, out, lse, *extras = ctx.saved_tensors
                d_o = d_out.contiguous() if d_out is not None else torch.zeros_like(out)
                if d_o.data_ptr() % 16:  # a contiguous view at an odd offset: the kernels load 16 bytes
                    d_o = d_o.clone()
                dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
                dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
                dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
                call = ctx.call
                needs = ctx.needs_input_grad
                bufs = [grad_output(value) for value in call.grad_values]
                input_grads = [(name, buf) for name, (buf, _) in zip(call.grad_names, bufs)]
                d_extras = [None, None, None, None]  # by the spec's name, like a captured tensor's
                for i, x in enumerate(extras):
                    if x is not None and needs[5 + i]:
                        # contiguous, of the tensor's shape: for the band's alpha expanded from
                        # one weight (stride 0) a dense [Hq] buffer, which ExpandBackward sums.
                        # Asked for only when alpha requires grad: the backward was then
                        # compiled with alpha's name among its gradients (compiled._backward).
                        d_extras[i] = torch.empty(x.shape, dtype=x.dtype, device=x.device)
                        input_grads.append((call.extra_names[i], d_extras[i]))
                call.launch(q, k, v, out, lse, d_o, dq, dk, dv, input_grads)
                captured = [g if needs[9 + i] else None for i, (_, g) in enumerate(bufs)]
                return (None, None, dq if needs[2] else None, dk if needs[3] else None, dv if needs[4] else None,
                        *d_extras, *captured)

        _Function = AttentionFunction
    return _Function


_Function = None
