"""load_library_or_skip() for the GPU test modules, and current_arch() for tests that compile
for an arch without a GPU (pytest puts this folder on sys.path)."""
import os

import pytest


def load_library_or_skip():
    """Loads libattnjit_c; skips the calling module when it is not built, unless
    ATTNJIT_LIBRARY names it (then it must load)."""
    import attnjit
    from attnjit import _library
    try:
        _library.load()
    except attnjit.LibraryNotFoundError as err:
        if os.environ.get("ATTNJIT_LIBRARY"):
            raise
        pytest.skip(f"libattnjit_c.so not built: {err}", allow_module_level=True)


def current_arch():
    """The current GPU's arch as attnjit compiles for it ("sm_90a", ...), or None without a usable
    GPU: a handle compiled for another arch can be built here but not launched."""
    import attnjit
    from attnjit import capi
    try:
        return capi.Kernel(capi.Spec.from_json(attnjit.spec_json(dtype="bf16", head_dim=64))).arch
    except attnjit.RuntimeEnvironmentError:
        return None
