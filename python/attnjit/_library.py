"""Finding and loading libattnjit_c.so (the C API, capi/include/attnjit/attnjit_c.h).

Looked for, first match wins:
  1. $ATTNJIT_LIBRARY (a path to the .so; an error if it is set but missing)
  2. inside this package: lib/libattnjit_c.so (what a wheel or `pip install ./python`
     bundles), then libattnjit_c.so next to the modules
  3. <repo>/build*/capi/libattnjit_c.so next to the package in a source checkout (the
     most recently built one)
  4. under an install prefix, as `cmake --install build --prefix <prefix>` lays it out:
     <prefix>/lib, lib64 and lib/<multiarch>, for the prefix this package is installed in
     (<prefix>/lib/pythonX.Y/site-packages/attnjit), sys.prefix, sys.base_prefix and
     CMake's default /usr/local; libattnjit_c.so, then the SONAME libattnjit_c.so.1
  5. the dynamic loader: the SONAME (LD_LIBRARY_PATH, ldconfig's cache, /etc/ld.so.conf),
     then whatever ctypes.util.find_library("attnjit_c") names
The error, when nothing loads, lists every place tried.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import sysconfig
import threading

from .errors import LibraryNotFoundError, RuntimeEnvironmentError

LIBRARY_NAME = "libattnjit_c.so"
API_VERSION = 1  # ATTNJIT_C_API_VERSION this package speaks
SONAME = f"{LIBRARY_NAME}.{API_VERSION}"
LOADER = "dynamic loader"  # candidates of this kind are names for dlopen, not paths

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_DIR = os.path.dirname(os.path.dirname(_PACKAGE_DIR))

_lock = threading.Lock()
_lib = None


def _install_prefixes() -> list[str]:
    """Install prefixes to look under, in order, without duplicates."""
    prefixes = []
    # <prefix>/lib/pythonX.Y/site-packages/attnjit (or lib64, or Debian's dist-packages).
    site = os.path.dirname(_PACKAGE_DIR)
    if os.path.basename(site) in ("site-packages", "dist-packages"):
        up = os.path.dirname(site)
        if os.path.basename(up).startswith("python"):
            up = os.path.dirname(up)
        if os.path.basename(up) in ("lib", "lib64", "lib32"):
            prefixes.append(os.path.dirname(up))
    prefixes += [sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix), "/usr/local"]
    out = []
    for p in prefixes:
        p = os.path.abspath(p)
        if p not in out:
            out.append(p)
    return out


def _lib_dirs(prefix: str) -> list[str]:
    dirs = ["lib", "lib64"]
    multiarch = sysconfig.get_config_var("MULTIARCH")  # e.g. x86_64-linux-gnu (GNUInstallDirs on Debian)
    if multiarch:
        dirs.append(os.path.join("lib", multiarch))
    return [os.path.join(prefix, d) for d in dirs]


def candidates() -> list[tuple[str, str]]:
    """(how it was found, path or loader name) for every place looked at, in order."""
    out = []
    env = os.environ.get("ATTNJIT_LIBRARY")
    if env:
        out.append(("$ATTNJIT_LIBRARY", env))
    out.append(("package lib/", os.path.join(_PACKAGE_DIR, "lib", LIBRARY_NAME)))
    out.append(("package", os.path.join(_PACKAGE_DIR, LIBRARY_NAME)))
    builds = glob.glob(os.path.join(_REPO_DIR, "build*", "capi", LIBRARY_NAME))
    builds.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    out.extend(("source checkout", p) for p in builds)
    if not builds:
        out.append(("source checkout", os.path.join(_REPO_DIR, "build*", "capi", LIBRARY_NAME)))
    for prefix in _install_prefixes():
        for d in _lib_dirs(prefix):
            for name in (LIBRARY_NAME, SONAME):
                out.append((f"install prefix {prefix}", os.path.join(d, name)))
    out.append((LOADER, SONAME))
    found = ctypes.util.find_library("attnjit_c")
    if found and found != SONAME:
        out.append((LOADER, found))
    return out


def _loaded_path(lib: ctypes.CDLL, fallback: str) -> str:
    """The file the loader opened for lib (dladdr on one of its functions)."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        if dladdr(ctypes.cast(lib.attnjit_api_version, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.abspath(os.fsdecode(info.dli_fname))
    except (AttributeError, OSError):
        pass
    return fallback


def _not_found(looked: list[tuple[str, str]], errors: dict[str, str]) -> LibraryNotFoundError:
    lines = []
    for how, path in looked:
        why = errors.get(path)
        lines.append(f"  {how}: {path}" + (f" ({why})" if why else ""))
    where = "\n".join(lines)
    return LibraryNotFoundError(
        f"{LIBRARY_NAME} was not found. Looked at:\n{where}\nInstall the package with the library "
        f"inside (`pip install ./python`, python/README.md), build it with `cmake -S . -B build && "
        f"cmake --build build --target attnjit_c`, or set ATTNJIT_LIBRARY to its path")


def _open() -> tuple[ctypes.CDLL, str]:
    """The first candidate that loads, and its path."""
    looked = candidates()
    env = os.environ.get("ATTNJIT_LIBRARY")
    if env and not os.path.isfile(env):
        raise LibraryNotFoundError(f"ATTNJIT_LIBRARY is set to '{env}', which is not a file; point it "
                                   f"at {LIBRARY_NAME} (built by `cmake --build <build> --target attnjit_c`)")
    errors = {}
    for how, path in looked:
        if how == LOADER:
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                errors[path] = str(err)
                continue
            return lib, _loaded_path(lib, path)
        if os.path.isfile(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as err:
                raise RuntimeEnvironmentError(f"could not load {path}: {err}") from None
    raise _not_found(looked, errors)


def find() -> str:
    """The path of the library that load() would open (a loader name is resolved by
    loading it)."""
    looked = candidates()
    env = os.environ.get("ATTNJIT_LIBRARY")
    if env and not os.path.isfile(env):
        raise LibraryNotFoundError(f"ATTNJIT_LIBRARY is set to '{env}', which is not a file; point it "
                                   f"at {LIBRARY_NAME} (built by `cmake --build <build> --target attnjit_c`)")
    for how, path in looked:
        if how != LOADER and os.path.isfile(path):
            return path
    return _open()[1]


def load() -> ctypes.CDLL:
    """The loaded library with its function signatures set (loaded once per process)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            lib, path = _open()
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
