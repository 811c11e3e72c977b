"""Compiled handles loaded at most once per process: the forward kernels (compiled.py) and
the backwards (autograd.py) share this cache logic."""
from __future__ import annotations

import threading

from .errors import RuntimeEnvironmentError


class LoadOnce:
    """table[key] = make(), made once even when threads race; make() returns a handle with
    `can_launch`, and one that cannot launch is an error (never cached)."""

    def __init__(self):
        self._table: dict = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._table)

    def get(self, key, make, what: str):
        value = self._table.get(key)
        if value is not None:
            return value
        with self._lock:
            value = self._table.get(key)
            if value is None:
                value = make()
                if not value.can_launch:
                    raise RuntimeEnvironmentError(f"{what} compiled but could not be loaded")
                self._table[key] = value
        return value
