"""at_once(first, second): both calls at the same time, `first` on the calling thread (the
launchers are per thread) and `second` on a thread of its own, for
the first training call of a spec, whose forward kernel and backward kernels compile together
(NVRTC runs in the C library with the GIL released). The result is (first(), second()); if
either raised, first's error wins, after both have ended, so which error a caller sees does
not depend on timing."""
from __future__ import annotations

import threading


def at_once(first, second):
    result, error = [None], [None]

    def run_second():
        try:
            result[0] = second()
        except BaseException as e:  # noqa: BLE001 (handed to the caller below)
            error[0] = e
    thread = threading.Thread(target=run_second, name="attnjit-compile", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: one after the other, on this thread
        return first(), second()
    try:
        a = first()
    finally:
        thread.join()
    if error[0] is not None:
        raise error[0]
    return a, result[0]
