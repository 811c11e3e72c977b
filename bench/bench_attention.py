#!/usr/bin/env python3
"""attnjit beside PyTorch SDPA (flash, cuDNN), FlexAttention and naive PyTorch, in one
process, on the same random inputs, each checked against an fp64 reference and timed.

    python3 bench/bench_attention.py [--dtype bf16] [--variant plain,causal] [--impl attnjit,flex]
                                     [--n 1024,4096] [--piece 1/3] [--quick] [--list]
                                     [--out FILE] [--commit SHA] [--gpu-name h100]

Writes JSON lines, one object per (impl, case) and per overhead measurement, appended to
bench/results/<date>-<gpu>.jsonl (or --out); a progress line per case on stderr.
`--list` prints the cases and their estimated times without importing torch.
See bench/README.md for the conventions (FLOPs, memory, timing).
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases as C  # noqa: E402


def csv(kind):
    def parse(text):
        return [kind(x) for x in text.split(",") if x]
    return parse


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", type=csv(str), help=f"comma list of {','.join(C.DTYPES)}")
    p.add_argument("--variant", type=csv(str), help=f"comma list of {','.join(C.VARIANTS)}")
    p.add_argument("--impl", type=csv(str), help=f"comma list of {','.join(C.IMPLS + C.OPT_IN_IMPLS)}")
    p.add_argument("--autotune", action="store_true",
                   help="also run attnjit_tuned: attnjit.compile(autotune=True), the forward's tile (and in "
                        "fwdbwd the backward's key-tile kernel's) tuned per shape bucket on its first call "
                        "(docs/autotune.md), beside the default")
    p.add_argument("--n", type=csv(int), help="comma list of sequence lengths")
    p.add_argument("--case", action="append", metavar="REGEX",
                   help="only cases whose whole name (as --list prints it) matches REGEX; repeatable, "
                        "e.g. --case 'causal/bf16/fwd/D128/.*N16384'")
    p.add_argument("--mode", type=csv(str), default=["fwd"], help="fwd (default) and/or fwdbwd")
    p.add_argument("--quick", action="store_true", help="a handful of bf16 cases (smoke test)")
    p.add_argument("--piece", help="I/N: run the I-th of N pieces of about equal estimated time")
    p.add_argument("--list", action="store_true", help="print the cases and estimates, run nothing")
    p.add_argument("--out", help="JSON lines file to append to (default bench/results/<date>-<gpu>.jsonl, "
                                 "<date>-<gpu>-piece<I>of<N>.jsonl with --piece)")
    p.add_argument("--results-dir", default=os.path.join(HERE, "results"),
                   help="folder of the default output file (default bench/results)")
    p.add_argument("--commit", help="commit to record (default $ATTNJIT_COMMIT, else git rev-parse)")
    p.add_argument("--gpu-name", help="short GPU name for rows and file names (default from the device)")
    p.add_argument("--warmup", type=float, default=25.0, help="do_bench warm-up, ms (default 25)")
    p.add_argument("--rep", type=float, default=100.0, help="do_bench repetition time, ms (default 100)")
    p.add_argument("--no-overhead", action="store_true", help="skip the per-call overhead rows")
    p.add_argument("--overhead-only", action="store_true", help="only the per-call overhead rows")
    p.add_argument("--inline-mods", action="store_true",
                   help="give attnjit the harness's inline mods even where attnjit.mods has helpers")
    p.add_argument("--naive-max-gib", type=float, default=C.NAIVE_MAX_GIB,
                   help=f"skip naive when its estimated peak exceeds this (default {C.NAIVE_MAX_GIB:g})")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    a = p.parse_args(argv)
    for name, allowed in (("dtype", C.DTYPES), ("variant", C.VARIANTS), ("impl", C.IMPLS + C.OPT_IN_IMPLS),
                          ("mode", C.MODES)):
        bad = [x for x in (getattr(a, name) or []) if x not in allowed]
        if bad:
            p.error(f"--{name}: unknown {bad}; choose from {', '.join(allowed)}")
    for pattern in a.case or []:
        try:
            re.compile(pattern)
        except re.error as e:
            p.error(f"--case {pattern!r} is not a regular expression: {e}")
    return a


def plan(a):
    """(cases of this run, the piece label or None) from the filters."""
    C.NAIVE_MAX_GIB = a.naive_max_gib
    dtypes = a.dtype or (["bf16"] if a.quick else list(C.DTYPES))
    sel = C.select(C.all_cases(dtypes, a.mode), variants=a.variant, ns=a.n, quick=a.quick, names=a.case)
    if a.overhead_only:
        sel = []
    piece = None
    if a.piece:
        i, n = C.parse_piece(a.piece)
        sel = C.split_pieces(sel, n, impls(a))[i - 1]
        piece = (i, n)
    return sel, piece


def impls(a):
    chosen = list(a.impl or C.IMPLS)
    if a.autotune and "attnjit_tuned" not in chosen:
        chosen.insert(chosen.index("attnjit") + 1 if "attnjit" in chosen else 0, "attnjit_tuned")
    return chosen


def run_overhead(a, piece):
    return not a.no_overhead and (piece is None or piece[0] == 1)


def print_plan(a, sel, piece, file=sys.stderr):
    est = C.estimate_all(sel, impls(a))
    total = sum(est) + C.STARTUP_S + (C.OVERHEAD_S if run_overhead(a, piece) else 0)
    label = f" (piece {piece[0]}/{piece[1]})" if piece else ""
    print(f"# {len(sel)} cases{label}, impls {','.join(impls(a))}; estimated {total / 60:.1f} min "
          f"on an H100 (startup {C.STARTUP_S:.0f} s"
          f"{f', overhead rows {C.OVERHEAD_S:.0f} s' if run_overhead(a, piece) else ''})", file=file)
    if a.list:
        for c, t in zip(sel, est):
            skips = [f"{i}: {C.runs(c, i)}" for i in impls(a) if C.runs(c, i)]
            note = f"  [skip {'; '.join(skips)}]" if skips else ""
            print(f"  {t:6.1f} s  {c.name}  flop_fraction={c.flop_fraction():.4f}{note}", file=file)
    return est


def gpu_short(name: str) -> str:
    m = re.search(r"(gb200|b200|b100|h200|h100|h800|h20|a100|a800|a10g|a10|l40s|l40|l4|v100|t4|rtx\s?\w+)",
                  name.lower())
    return re.sub(r"\s+", "", m.group(1)) if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def git_commit():
    if os.environ.get("ATTNJIT_COMMIT"):
        return os.environ["ATTNJIT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def clean(x):
    """JSON-safe values: NaN/inf -> None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


class Writer:
    def __init__(self, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.f = open(path, "a")
        self.path = path

    def emit(self, row):
        self.f.write(json.dumps(clean(row), default=str) + "\n")
        self.f.flush()


def fmt_row(impl, r):
    if "skipped" in r:
        return f"{impl} " + ("ERR" if r.get("error") else "skip")
    flag = "" if r.get("ok") else " FAIL"
    return f"{impl} {r['ms']:.3f}ms {r['tflops']:.0f}T{flag}"


def main(argv=None):
    a = parse_args(argv)
    sel, piece = plan(a)
    est = print_plan(a, sel, piece)
    if a.list:
        return 0

    import torch
    import torch._dynamo
    start = time.perf_counter()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    gpu_name = props.name
    gpu = a.gpu_name or gpu_short(gpu_name)
    commit = a.commit or git_commit()
    date = datetime.date.today().isoformat()
    suffix = f"-piece{piece[0]}of{piece[1]}" if piece else ""
    out = a.out or os.path.join(a.results_dir, f"{date}-{gpu}{suffix}.jsonl")
    w = Writer(out)
    print(f"# writing {out}", file=sys.stderr)
    common = dict(gpu=gpu, gpu_name=gpu_name, commit=commit, date=date)
    import triton
    env = dict(kind="env", torch=torch.__version__, cuda=torch.version.cuda, triton=triton.__version__,
               cudnn=torch.backends.cudnn.version(), sms=props.multi_processor_count,
               python=sys.version.split()[0], argv=sys.argv[1:], piece=a.piece, **common)
    try:
        env["attnjit"] = getattr(__import__("attnjit"), "__version__", "?")
    except Exception as e:
        env["attnjit_import_error"] = str(e)[:300]
    w.emit(env)

    from impls import make_inputs
    from measure import alternate, measure, overhead
    from reference import reference_grads_of, reference_of

    if run_overhead(a, piece):
        for which in ("plain", "alibi_causal"):
            case = C.Case(which, "bf16", 1, 1, 1, 128, 64)
            torch._dynamo.reset()
            inp = make_inputs(case)
            for impl in impls(a):
                if impl == "naive":
                    continue
                base = dict(impl=impl, **case.row(), **common)
                base.update(variant="overhead", overhead_of=which)
                why = C.runs(case, impl)
                r = {"skipped": why} if why else overhead(impl, case, inp, a)
                w.emit({**base, **r})
                print(f"# overhead {which}: {impl} " +
                      (f"host {r['host_us']:.1f} us/call, device {r['ms'] * 1e3:.1f} us" if "host_us" in r
                       else r["skipped"]), file=sys.stderr)
            del inp

    done_est = 0.0
    total_est = sum(est)
    case_start = time.perf_counter()
    for n, (case, t_est) in enumerate(zip(sel, est), 1):
        t0 = time.perf_counter()
        torch._dynamo.reset()  # new shapes recompile anyway; drop old graphs and their guards
        gc.collect()
        torch.cuda.empty_cache()
        base = dict(**case.row(), **common)
        summary = []
        skip_all = case.case_skip()
        if skip_all:
            for impl in impls(a):
                w.emit(dict(impl=impl, **base, skipped=skip_all))
            summary.append(f"all skipped ({skip_all})")
        else:
            inp = make_inputs(case)
            ref = reference_of(case, inp)  # one fp64 reference per case, for every implementation
            ref_grads = reference_grads_of(case, inp) if case.mode == "fwdbwd" else None
            rows, steps = {}, {}
            # attnjit_tuned is timed right after attnjit: both again, in turns, tuned first.
            pair = ["attnjit_tuned", "attnjit"]
            for impl in impls(a):
                why = C.runs(case, impl)
                keep = steps if impl in pair and "attnjit_tuned" in impls(a) else None
                rows[impl] = {"skipped": why} if why else measure(case, impl, inp, ref, a, ref_grads, keep=keep)
                summary.append(fmt_row(impl, rows[impl]))
            if all(i in steps for i in pair):
                try:
                    for impl, ms in alternate(steps, pair, a).items():
                        rows[impl]["ms_alternating"] = ms
                except Exception as e:  # recorded on both rows; the first timings stand
                    for impl in pair:
                        rows[impl]["alternating_error"] = str(e)[:300]
            for impl, r in rows.items():
                w.emit(dict(impl=impl, **base, **r))
            del inp, ref, ref_grads, rows, steps
        took = time.perf_counter() - t0
        done_est += t_est
        elapsed = time.perf_counter() - start
        rate = (time.perf_counter() - case_start) / done_est if done_est > 0 else 1.0
        remaining = (total_est - done_est) * rate
        print(f"[{n}/{len(sel)}] {case.name} | {' | '.join(summary)} | took {took:.1f}s (est {t_est:.1f}s) "
              f"elapsed {elapsed:.0f}s remaining ~{remaining:.0f}s", file=sys.stderr, flush=True)
    print(f"# done: {len(sel)} cases in {time.perf_counter() - start:.0f} s -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
