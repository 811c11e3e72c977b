"""How one (implementation, case) is measured, and the per-call overhead rows.

For each implementation of a case, in this order:
  1. build (attnjit.compile / create_block_mask / nothing) and a first call, synchronised:
     compile_s = build + first call (JIT, torch.compile, cuDNN plans all land here);
  2. the first call's output against the fp64 reference (reference.check); in fwdbwd mode
     also its q/k/v gradients and those of the captured tensors that require grad (a pair
     bias, an MSA gate, ...; not ALiBi's fixed slopes) against the fp64 reference gradients (reference.check_grads), and
     ok = both pass;
  3. a second call between reset_peak_memory_stats() and max_memory_allocated():
     peak_mib = the most memory the call had allocated above what was allocated before it
     (its output included, and in fwdbwd its gradients), plus workspace_mib, the most it took
     from the CUDA driver's memory pool (attnjit's workspace: driver_pool.py; the two
     peaks are added, an upper bound); deterministic = the second output
     (and in fwdbwd the second call's gradients) equals the first bit for bit;
  4. triton.testing.do_bench(step, warmup, rep, return_mode="median") -> ms.
An implementation that fails the check is still timed (ok = false flags it).
"""
from __future__ import annotations

import statistics
import time
import traceback
import warnings


_POOL = None


def _driver_pool():
    global _POOL
    if _POOL is None:
        from driver_pool import DriverPool
        _POOL = DriverPool()
    return _POOL


def _sync():
    import torch
    torch.cuda.synchronize()


def _short(e: BaseException, limit: int = 400) -> str:
    msg = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return msg[:limit]


def take_grads(leaves) -> list:
    """The .grad of each leaf, cleared: backward accumulates into .grad, so every call's
    gradients must be read (and cleared) before the next call."""
    grads = [t.grad for t in leaves]
    for t in leaves:
        t.grad = None
    return grads


def measure(case, impl, inp, ref, opts, ref_grads=None, keep=None) -> dict:
    """The measured keys of one row (or 'skipped' and 'error' when the implementation
    refused the case or failed). ref_grads: reference.reference_grads_of (fwdbwd only).
    keep: a dict that gets keep[impl] = (the timed call, its grad_to_none) when it was timed."""
    import torch
    from impls import Skip, build
    from reference import check, check_grads
    from triton.testing import do_bench
    row: dict = {}
    fwdbwd = case.mode == "fwdbwd"
    leaves = [inp.q, inp.k, inp.v] + [inp.caps[n] for n in inp.grad_caps] if fwdbwd else []
    grad = torch.enable_grad() if fwdbwd else torch.no_grad()
    take_grads(leaves)  # the last implementation's do_bench (or failure) left its .grad
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _sync()
            t0 = time.perf_counter()
            built = build(impl, case, inp, opts)
            row.update(built.extra)
            with built.ctx(), grad:
                out = built.step()
                _sync()
                row["compile_s"] = round(time.perf_counter() - t0, 4)
        grads1 = take_grads(leaves)  # held (as .grad was before) through the second call
        with built.ctx(), grad:
            row.update(check(out, ref, case.dtype))
            if fwdbwd:
                row.update(check_grads(grads1, ref_grads, case.dtype, inp.grad_caps))
                row["ok"] = row["ok"] and row["grad_ok"]
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            pool = _driver_pool()
            pool.reset()
            out2 = built.step()
            _sync()
            workspace = pool.peak_bytes()
            row["workspace_mib"] = round(workspace / 2**20, 1)
            row["peak_mib"] = round((torch.cuda.max_memory_allocated() - before + workspace) / 2**20, 1)
            grads2 = take_grads(leaves)
            a = out[0] if isinstance(out, (tuple, list)) else out
            b = out2[0] if isinstance(out2, (tuple, list)) else out2
            row["deterministic"] = bool(torch.equal(a, b)) and all(
                g1 is not None and g2 is not None and torch.equal(g1, g2) for g1, g2 in zip(grads1, grads2))
            del out, out2, a, b, grads1, grads2
            ms = do_bench(built.step, warmup=opts.warmup, rep=opts.rep, grad_to_none=leaves or None,
                          return_mode="median")
        row["ms"] = round(float(ms), 5)
        row["tflops"] = round(case.flops() / (ms * 1e-3) / 1e12, 2)
        if keep is not None:
            keep[impl] = (built.step, leaves or None)
    except Skip as e:
        row = {"skipped": str(e)}
    except Exception as e:  # a runtime refusal or a failure: recorded, never hidden
        why = [str(w.message).replace("\n", " ")[:200] for w in caught]
        if impl.startswith("sdpa") and "no available kernel" in str(e).lower():
            # the backend refused the case at run time (its warnings say why): a skip, not a bug
            row = {"skipped": "backend refused: " + ("; ".join(why[:3]) or _short(e))}
        else:
            row = {"skipped": "error: " + _short(e), "error": _short(e, 2000)}
            if why:
                row["warnings"] = why[:4]
        if getattr(opts, "verbose", False):
            traceback.print_exc()
        try:
            _sync()
        except Exception as e2:  # the CUDA context is broken: later rows will say so too
            row["cuda_error"] = _short(e2)
    return row


def overhead(impl, case, inp, opts, calls: int = 200, batches: int = 10) -> dict:
    """Host time per call of an already built step, without synchronising inside the loop
    (no CUDA graphs): `batches` loops of `calls` calls, each loop timed with perf_counter
    between two synchronisations; host_us is the median loop's time per call (host_us_min
    the fastest). Loops of 200 stay well inside the launch queue, so a slow GPU cannot
    block the host. ms is do_bench's median device time per call for comparison."""
    import torch
    from impls import Skip, build
    from reference import check, reference_of
    from triton.testing import do_bench
    row: dict = {}
    try:
        with torch.no_grad():
            built = build(impl, case, inp, opts)
            row.update(built.extra)
            with built.ctx():
                t0 = time.perf_counter()
                out = built.step()
                _sync()
                row["compile_s"] = round(time.perf_counter() - t0, 4)
                ref = reference_of(case, inp)
                row.update(check(out, ref, case.dtype))
                del out, ref
                for _ in range(20):
                    built.step()
                per_call = []
                for _ in range(batches):
                    _sync()
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        built.step()
                    t1 = time.perf_counter()
                    _sync()
                    per_call.append((t1 - t0) / calls * 1e6)
                ms = do_bench(built.step, warmup=opts.warmup, rep=opts.rep, return_mode="median")
        row.update(host_us=round(statistics.median(per_call), 2), host_us_min=round(min(per_call), 2),
                   calls=calls * batches, ms=round(float(ms), 5))
    except Skip as e:
        row = {"skipped": str(e)}
    except Exception as e:
        row = {"skipped": "error: " + _short(e), "error": _short(e, 2000)}
    return row


def alternate(steps: dict, names, opts, rounds: int = 3) -> dict:
    """{name: [ms, ...]}: each of `names` timed again by do_bench, one after the other, `rounds`
    times (A B A B ...): a drift of the GPU's clocks between the first timings of A and B (B
    always ran right after A) hits both alike here. steps: measure's `keep`."""
    from triton.testing import do_bench
    times = {n: [] for n in names}
    for _ in range(rounds):
        for n in names:
            step, leaves = steps[n]
            times[n].append(round(float(do_bench(step, warmup=opts.warmup, rep=opts.rep, grad_to_none=leaves,
                                                  return_mode="median")), 5))
    return times
