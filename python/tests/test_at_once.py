"""at_once (python/attnjit/_at_once.py), without a GPU: both calls overlap, both results come
back in order, and first's error wins over second's, after both ended."""
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from attnjit._at_once import at_once  # noqa: E402


def test_both_results_and_the_calls_overlap():
    both_started = threading.Barrier(2, timeout=10)  # one after another: BrokenBarrierError

    def call(value):
        def run():
            both_started.wait()
            return value
        return run
    assert at_once(call("forward"), call("backward")) == ("forward", "backward")
    caller = threading.get_ident()
    first_thread, second_thread = at_once(threading.get_ident, threading.get_ident)
    assert first_thread == caller and second_thread != caller


def test_the_first_error_wins_after_both_ended():
    ended = threading.Event()

    def slow_failure():
        ended.wait(0.1)
        ended.set()
        raise KeyError("second")

    def first_failure():
        raise ValueError("first")
    with pytest.raises(ValueError, match="first"):
        at_once(first_failure, slow_failure)
    assert ended.is_set()
    with pytest.raises(KeyError, match="second"):
        at_once(lambda: 1, slow_failure)
