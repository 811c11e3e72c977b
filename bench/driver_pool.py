"""The CUDA driver's memory pool of the current device, as the benchmark sees it: attnjit
takes its workspace (the backward's statistics, dQ sums, gradient planes) with
cuMemAllocAsync from that pool, which PyTorch's memory counters do not see. Its
used-memory high-water mark, reset before a call, is what the call took from it."""
from __future__ import annotations

import ctypes

_USED_MEM_CURRENT = 7  # CUmemPool_attribute (cuda.h)
_USED_MEM_HIGH = 8


class DriverPool:
    """Needs a current CUDA context (PyTorch's, once it has touched the device)."""

    def __init__(self):
        self._cu = ctypes.CDLL("libcuda.so.1")
        dev = ctypes.c_int()
        self._check(self._cu.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        self._pool = ctypes.c_void_p()
        self._check(self._cu.cuDeviceGetMemPool(ctypes.byref(self._pool), dev), "cuDeviceGetMemPool")
        self._before = 0

    @staticmethod
    def _check(rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUresult {rc}")

    def _get(self, attr: int) -> int:
        v = ctypes.c_uint64()
        self._check(self._cu.cuMemPoolGetAttribute(self._pool, attr, ctypes.byref(v)), "cuMemPoolGetAttribute")
        return v.value

    def reset(self):
        """Start counting: the high-water mark drops to what is in use now."""
        zero = ctypes.c_uint64(0)
        self._check(self._cu.cuMemPoolSetAttribute(self._pool, _USED_MEM_HIGH, ctypes.byref(zero)),
                    "cuMemPoolSetAttribute")
        self._before = self._get(_USED_MEM_CURRENT)

    def peak_bytes(self) -> int:
        """The most the pool had in use since reset(), above what it had in use then."""
        return max(0, self._get(_USED_MEM_HIGH) - self._before)
