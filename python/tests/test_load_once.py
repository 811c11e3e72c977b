"""LoadOnce (python/attnjit/_load_once.py), without a GPU: made once, racing threads share
one handle, a handle that cannot launch is an error and is not cached."""
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from attnjit._load_once import LoadOnce  # noqa: E402
from attnjit.errors import RuntimeEnvironmentError  # noqa: E402


class Handle:
    def __init__(self, can_launch=True):
        self.can_launch = can_launch


def test_made_once_and_shared_by_threads():
    cache, made = LoadOnce(), []

    def make():
        made.append(1)
        return Handle()
    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("k", make, "k"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len(cache) == 1 and all(g is got[0] for g in got)


def test_a_handle_that_cannot_launch_is_an_error_and_not_cached():
    cache = LoadOnce()
    with pytest.raises(RuntimeEnvironmentError, match="the kernel of X compiled but could not be loaded"):
        cache.get("k", lambda: Handle(False), "the kernel of X")
    assert len(cache) == 0
    assert cache.get("k", Handle, "the kernel of X").can_launch
