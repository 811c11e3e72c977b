"""Thin Python objects over the C API handles: Spec (a validated spec) and Kernel (a
compiled, and with a GPU loaded, kernel). Failed calls raise the exception of their
status (errors.error_for_status) carrying attnjit_last_error()'s message."""
from __future__ import annotations

import ctypes

from . import _library
from ._capi_types import CCompileOptions
from .errors import error_for_status

_NAMES_OF_CODES = {0: "f16", 1: "bf16", 2: "f32", 3: "i32", 4: "i64", 5: "u8"}


def lib():
    return _library.load()


def check(status: int, *, launching: bool = False, arguments: bool = False) -> None:
    """Raises the exception of a failed call. An invalid argument is about the spec
    (SpecError) unless the call is a launch or takes no spec (`arguments`): ArgumentError."""
    if status:
        message = lib().attnjit_last_error().decode("utf-8", "replace")
        raise error_for_status(status, message, launching=launching or arguments)


def version() -> str:
    return lib().attnjit_version_string().decode()


class Spec:
    """An attnjit_spec*: parsed and validated from JSON text."""

    def __init__(self, handle, owner=None):
        self._handle = handle
        self._owner = owner  # a Kernel that owns the handle, or None (we destroy it)

    @classmethod
    def from_json(cls, text: str) -> "Spec":
        data = text.encode("utf-8")
        out = ctypes.c_void_p()
        check(lib().attnjit_spec_from_json(data, len(data), ctypes.byref(out)))
        return cls(out.value)

    @property
    def handle(self) -> int:
        return self._handle

    def to_json(self) -> str:
        out = ctypes.c_void_p()
        check(lib().attnjit_spec_to_json(self._handle, ctypes.byref(out)))
        try:
            return ctypes.string_at(out.value).decode("utf-8")
        finally:
            lib().attnjit_free_string(out.value)

    def hash(self) -> int:
        out = ctypes.c_uint64()
        check(lib().attnjit_spec_hash(self._handle, ctypes.byref(out)))
        return out.value

    @property
    def returns_lse(self) -> bool:
        return lib().attnjit_spec_returns_lse(self._handle) == 1

    def tensors(self) -> list[tuple[str, str, int]]:
        """(name, dtype, rank) of each captured tensor, in the positional launch order."""
        out = []
        for i in range(lib().attnjit_spec_num_tensors(self._handle)):
            name, dtype, rank = ctypes.c_char_p(), ctypes.c_int32(), ctypes.c_int32()
            check(lib().attnjit_spec_tensor(self._handle, i, ctypes.byref(name), ctypes.byref(dtype),
                                            ctypes.byref(rank)))
            out.append((name.value.decode(), _NAMES_OF_CODES.get(dtype.value, str(dtype.value)), rank.value))
        return out

    def scalars(self) -> list[tuple[str, bool]]:
        """(name, is_int) of each runtime scalar, in the positional launch order."""
        out = []
        for i in range(lib().attnjit_spec_num_scalars(self._handle)):
            name, is_int = ctypes.c_char_p(), ctypes.c_int32()
            check(lib().attnjit_spec_scalar(self._handle, i, ctypes.byref(name), ctypes.byref(is_int)))
            out.append((name.value.decode(), bool(is_int.value)))
        return out

    def __del__(self):
        if self._owner is None and self._handle:
            try:
                lib().attnjit_spec_destroy(self._handle)
            except Exception:  # interpreter shutdown
                pass
            self._handle = None


MAINLOOPS = {None: 0, "sm80": 1, "sm90": 2}  # ATTNJIT_MAINLOOP_*
AUTOTUNE = {None: 0, True: 1, False: 2}  # ATTNJIT_AUTOTUNE_*: None follows ATTNJIT_AUTOTUNE


def _compile_options(arch: str | None, tile: dict | None, fast_backward: bool = False,
                     grads: tuple = (), mainloop: str | None = None, autotune: bool | None = None) -> CCompileOptions:
    if mainloop not in MAINLOOPS:
        raise ValueError(f"mainloop {mainloop!r}: use None (attnjit's choice), 'sm80' or 'sm90'")
    if autotune not in AUTOTUNE:
        raise ValueError(f"autotune {autotune!r}: use None (as ATTNJIT_AUTOTUNE says), True or False")
    options = CCompileOptions(ctypes.sizeof(CCompileOptions), arch.encode() if arch else None, 0, 0, 0, 0,
                              1 if fast_backward else 0)
    options.mainloop = MAINLOOPS[mainloop]
    options.autotune = AUTOTUNE[autotune]
    if grads:  # the names' array lives in the options object (ctypes keeps it referenced)
        names = (ctypes.c_char_p * len(grads))(*[g.encode() for g in grads])
        options.grad_names = ctypes.cast(names, ctypes.POINTER(ctypes.c_char_p))
        options.num_grads = len(grads)
        options._names = names
    for key, value in (tile or {}).items():
        if key not in ("block_m", "block_n", "warps", "stages"):
            raise ValueError(f"tile option {key!r}: use block_m, block_n, warps or stages")
        setattr(options, key, int(value))
    return options


class _Compiled:
    """A compiled C handle: attnjit_<compile>(spec, options, &out), destroyed by
    attnjit_<destroy>; compiling goes through attnjit's memory and disk caches."""

    _compile = _destroy = _can_launch = ""  # the C functions' names

    def __init__(self, spec: Spec, arch: str | None = None, tile: dict | None = None, fast_backward: bool = False,
                 grads: tuple = (), mainloop: str | None = None, autotune: bool | None = None):
        self._handle = None
        self._spec = spec  # kept alive as long as the handle
        options = _compile_options(arch, tile, fast_backward, grads, mainloop, autotune)
        out = ctypes.c_void_p()
        check(getattr(lib(), self._compile)(spec.handle, ctypes.byref(options), ctypes.byref(out)))
        self._handle = out.value

    @property
    def handle(self) -> int:
        return self._handle

    @property
    def can_launch(self) -> bool:
        return getattr(lib(), self._can_launch)(self._handle) == 1

    def __del__(self):
        if self._handle:
            try:
                getattr(lib(), self._destroy)(self._handle)
            except Exception:  # interpreter shutdown
                pass
            self._handle = None


class Kernel(_Compiled):
    """An attnjit_kernel*: the forward kernel of a spec."""

    _compile, _destroy, _can_launch = "attnjit_compile", "attnjit_kernel_destroy", "attnjit_kernel_can_launch"

    @property
    def source(self) -> str:
        return lib().attnjit_kernel_source(self._handle).decode()

    @property
    def arch(self) -> str:
        return lib().attnjit_kernel_arch(self._handle).decode()

    @property
    def compile_seconds(self) -> float:
        return lib().attnjit_kernel_compile_seconds(self._handle)

    @property
    def spec(self) -> Spec:
        return Spec(lib().attnjit_kernel_spec(self._handle), owner=self)


class Backward(_Compiled):
    """An attnjit_backward*: the backward kernels of a spec that returns LSE (fast_backward:
    dQ summed with fp32 atomics where that exists; deterministic otherwise; grads: names of
    captured tensors whose gradients it computes, which force the deterministic one)."""

    _compile = "attnjit_compile_backward"
    _destroy, _can_launch = "attnjit_backward_destroy", "attnjit_backward_can_launch"

    def launch(self, args_address: int, grads_address: int, stream: int) -> None:
        """args / grads: addresses of a CLaunchArgs (the forward's) and a CGradArgs."""
        check(lib().attnjit_launch_backward(self._handle, args_address, grads_address, stream), launching=True)
