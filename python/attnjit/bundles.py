"""Kernel bundles: kernels compiled ahead of time by attnjit-aot (docs/aot.md), which a
process uses before its disk cache and NVRTC; a process whose kernels are all bundled never
loads NVRTC (a server that must start fast, a machine without the CUDA toolkit)."""
from __future__ import annotations

import ctypes
import os

from .capi import check, lib


def load_bundle(path) -> int:
    """Adds the bundle directory attnjit-aot wrote (its --out) to this process's kernel
    bundles and returns how many kernels it holds. A directory that is not a bundle, or one
    made by another attnjit version, raises ArgumentError saying so (rebuild it with this
    version's attnjit-aot)."""
    count = ctypes.c_int64()
    check(lib().attnjit_load_bundle(os.fsencode(os.fspath(path)), ctypes.byref(count)), arguments=True)
    return count.value


def num_bundles() -> int:
    """How many bundles this process has: loaded with load_bundle, or linked into the program."""
    return lib().attnjit_num_bundles()
