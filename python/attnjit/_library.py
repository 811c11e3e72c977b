"""Finding and loading libattnjit_c.so (the C API, capi/include/attnjit/attnjit_c.h).

Looked for, first match wins:
  1. $ATTNJIT_LIBRARY (a path to the .so; an error if it is set but missing)
  2. lib/libattnjit_c.so inside this package (a wheel or a copied install)
  3. <repo>/build*/capi/libattnjit_c.so next to the package in a source checkout (the
     most recently built one)
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading

from .errors import LibraryNotFoundError, RuntimeEnvironmentError

LIBRARY_NAME = "libattnjit_c.so"
API_VERSION = 1  # ATTNJIT_C_API_VERSION this package speaks

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_DIR = os.path.dirname(os.path.dirname(_PACKAGE_DIR))

_lock = threading.Lock()
_lib = None


def candidates() -> list[tuple[str, str]]:
    """(how it was found, path) for every place looked at, in order."""
    out = []
    env = os.environ.get("ATTNJIT_LIBRARY")
    if env:
        out.append(("$ATTNJIT_LIBRARY", env))
    out.append(("package lib/", os.path.join(_PACKAGE_DIR, "lib", LIBRARY_NAME)))
    builds = glob.glob(os.path.join(_REPO_DIR, "build*", "capi", LIBRARY_NAME))
    builds.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    out.extend(("source checkout", p) for p in builds)
    if not builds:
        out.append(("source checkout", os.path.join(_REPO_DIR, "build*", "capi", LIBRARY_NAME)))
    return out


def find() -> str:
    looked = candidates()
    env = os.environ.get("ATTNJIT_LIBRARY")
    if env and not os.path.isfile(env):
        raise LibraryNotFoundError(f"ATTNJIT_LIBRARY is set to '{env}', which is not a file; point it "
                                   f"at {LIBRARY_NAME} (built by `cmake --build <build> --target attnjit_c`)")
    for _, path in looked:
        if os.path.isfile(path):
            return path
    where = "\n".join(f"  {how}: {path}" for how, path in looked)
    raise LibraryNotFoundError(
        f"{LIBRARY_NAME} was not found. Looked at:\n{where}\nBuild it with `cmake -S . -B build && "
        f"cmake --build build --target attnjit_c`, or set ATTNJIT_LIBRARY to its path")


def load() -> ctypes.CDLL:
    """The loaded library with its function signatures set (loaded once per process)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = find()
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                raise RuntimeEnvironmentError(f"could not load {path}: {err}") from None
            from ._capi_types import declare
            declare(lib)
            version = lib.attnjit_api_version()
            if version != API_VERSION:
                raise RuntimeEnvironmentError(
                    f"{path} speaks C API version {version} but this attnjit package speaks version "
                    f"{API_VERSION}; use the library and package of the same build")
            lib.attnjit_path = path
            _lib = lib
    return _lib
