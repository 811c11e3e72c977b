"""load_library_or_skip() for the GPU test modules (pytest puts this folder on sys.path)."""
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
