"""The per-call path: one Launcher per compiled kernel keeps a preallocated
attnjit_launch_args and rewrites only the pointers, shapes, strides and scalar values of
each call with struct.pack_into (one call for q, k, v and o), then calls attnjit_launch."""
from __future__ import annotations

import ctypes
import struct

from . import capi, dtypes
from ._capi_types import CLaunchArgs, CTensor, MAX_RANK
from .errors import InternalError

_TENSOR_BYTES = ctypes.sizeof(CTensor)


def _tensor_format(rank: int) -> str:
    """pack_into format of one attnjit_tensor of this rank: data, dtype, rank, the used
    shape and stride entries; the unused ones are written as zeros."""
    pad = f"{8 * (MAX_RANK - rank)}x" if rank < MAX_RANK else ""
    return f"Qii{rank}q{pad}{rank}q{pad}"


def _stream_getter(torch):
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


class Launcher:
    """Launches one kernel; tensor_ranks lists the captured tensors in the spec's order."""

    def __init__(self, kernel, *, dtype: str, head_dim_v: int, return_lse: bool, tensor_ranks, num_scalars: int):
        import torch

        self.kernel = kernel
        self._kernel_handle = kernel.handle
        self._dv = head_dim_v
        self._code = dtypes.CODES[dtype]
        self._launch = capi.lib().attnjit_launch
        self._stream = _stream_getter(torch)
        self._float32 = torch.float32
        # the kernel lives in its device's context: switch when another device is current
        self._other_device = None
        if torch.cuda.device_count() > 1:
            self._other_device = (torch.cuda.current_device, torch.cuda.device)

        args = self._args = CLaunchArgs()
        args.struct_size = ctypes.sizeof(CLaunchArgs)
        self._address = ctypes.addressof(args)
        q_off = CLaunchArgs.q.offset
        if (CLaunchArgs.k.offset, CLaunchArgs.v.offset, CLaunchArgs.o.offset) != tuple(
                q_off + i * _TENSOR_BYTES for i in (1, 2, 3)):
            raise InternalError("attnjit_launch_args: q, k, v, o are not adjacent in the ctypes layout")
        self._q_offset = q_off
        self._qkvo = struct.Struct("<" + _tensor_format(4) * 4)

        self._lse = None
        if return_lse:
            self._lse = CTensor()
            args.lse = ctypes.pointer(self._lse)
            self._lse_format = struct.Struct("<" + _tensor_format(3))

        n = len(tensor_ranks)
        self._tensors = (CTensor * max(n, 1))()
        args.num_tensors = n
        args.tensors = ctypes.cast(self._tensors, ctypes.POINTER(CTensor)) if n else None
        self._tensor_formats = [(struct.Struct("<" + _tensor_format(r)), i * _TENSOR_BYTES)
                                for i, r in enumerate(tensor_ranks)]
        self._scalars = (ctypes.c_double * max(num_scalars, 1))()
        args.num_scalars = num_scalars
        args.scalars = ctypes.cast(self._scalars, ctypes.POINTER(ctypes.c_double)) if num_scalars else None
        self._scalar_format = struct.Struct(f"<{num_scalars}d")

    def __call__(self, q, k, v, qs, ks, vs, qst, kst, vst, device: int, tensors, scalars):
        """qs/qst: q's shape and strides (likewise k, v); tensors: [(data_ptr, dtype_code,
        shape, strides)] in spec order; scalars: floats in spec order."""
        B, Hq, Nq, _ = qs
        Dv = self._dv
        out = q.new_empty((B, Hq, Nq, Dv))
        code = self._code
        self._qkvo.pack_into(self._args, self._q_offset,
                             q.data_ptr(), code, 4, *qs, *qst,
                             k.data_ptr(), code, 4, *ks, *kst,
                             v.data_ptr(), code, 4, *vs, *vst,
                             out.data_ptr(), code, 4, B, Hq, Nq, Dv, Hq * Nq * Dv, Nq * Dv, Dv, 1)
        lse = None
        if self._lse is not None:
            lse = q.new_empty((B, Hq, Nq), dtype=self._float32)
            self._lse_format.pack_into(self._lse, 0, lse.data_ptr(), 2, 3, B, Hq, Nq, Hq * Nq, Nq, 1)
        for (fmt, offset), (ptr, tcode, shape, strides) in zip(self._tensor_formats, tensors):
            fmt.pack_into(self._tensors, offset, ptr, tcode, len(shape), *shape, *strides)
        if scalars:
            self._scalar_format.pack_into(self._scalars, 0, *scalars)
        if self._other_device is not None and self._other_device[0]() != device:
            with self._other_device[1](device):
                status = self._launch(self._kernel_handle, self._address, self._stream(device))
        else:
            status = self._launch(self._kernel_handle, self._address, self._stream(device))
        if status:
            capi.check(status, launching=True)
        return out if lse is None else (out, lse)
