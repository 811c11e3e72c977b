"""The most recently used callables of a call-style entry point (attention(),
latent_attention()), by their hashable construction arguments: a call reuses its compiled
specs instead of tracing again. Thread-safe; the oldest is dropped past `limit`."""
from __future__ import annotations

import collections
import threading


class RecentCallables:
    def __init__(self, make, limit: int = 64):
        self._make = make  # make(*key) -> a new callable
        self._limit = limit
        self._items: "collections.OrderedDict" = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, *key):
        """The callable for key, made with make(*key) when new; an unhashable key (e.g. a
        lambda's captured list) is never cached."""
        try:
            hash(key)
        except TypeError:
            return self._make(*key)
        with self._lock:
            fn = self._items.get(key)
            if fn is not None:
                self._items.move_to_end(key)
                return fn
        fn = self._make(*key)
        with self._lock:
            self._items[key] = fn
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
        return fn
