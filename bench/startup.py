#!/usr/bin/env python3
"""Start-up to the first kernel (issue 12): times processes of bench_startup from the moment
before they start (exec and dynamic loading included) to the end of their first kernel (the
process's monotonic clock, which is this one's) and to their exit, in three ways:

  bundle      bench_startup_bundled, the spec's bundle linked in, no disk cache, NVRTC unloadable
  cold disk   bench_startup with an empty disk cache: NVRTC compiles the kernel
  warm disk   bench_startup with the disk cache a run before it filled

On a GPU the process launches the kernel once and waits for it; with --arch (no GPU needed) it
only gets the compiled kernel. Prints a Markdown table (median and min of --reps runs) and, with
--jsonl FILE, one JSON line per way.

  python3 bench/startup.py --build build [--arch sm_90a] [--reps 5] [--jsonl out.jsonl]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs", "startup_causal_bf16_d128.json")


PARTS = ("init", "context", "kernel", "launch")
SINCE_START = ("to_main", "to_kernel")


def parts_of(line, start_ns=None):
    """{init, context, kernel, launch: ms} from bench_startup's "in main: ..." line (empty if
    absent) and, given the monotonic time before the process started, {to_main, to_kernel: ms}."""
    m = re.search(r"in main: cuInit ([\d.]+) ms, CUDA context ([\d.]+) ms, kernel ready ([\d.]+) ms, "
                  r"buffers and launch ([\d.]+) ms; monotonic ns: main (\d+), done (\d+)", line)
    if not m:
        return {}
    parts = dict(zip(PARTS, map(float, m.groups()[:4])))
    if start_ns is not None:
        parts["to_main"] = (int(m.group(5)) - start_ns) / 1e6
        parts["to_kernel"] = (int(m.group(6)) - start_ns) / 1e6
    return parts


def run_once(binary, arch, env):
    """(seconds to exit, the process's line, its parts_of)."""
    cmd = [binary, SPEC] + (["--arch", arch] if arch else [])
    start_ns = time.monotonic_ns()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    seconds = (time.monotonic_ns() - start_ns) / 1e9
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    line = done.stdout.strip()
    return seconds, line, parts_of(line, start_ns)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="the build directory (bench/bench_startup*)")
    p.add_argument("--arch", help="compile only, for this arch (no GPU needed)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--jsonl", help="also write one JSON line per way here")
    args = p.parse_args()
    plain = os.path.join(args.build, "bench", "bench_startup")
    bundled = os.path.join(args.build, "bench", "bench_startup_bundled")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = {k: v for k, v in os.environ.items() if not k.startswith("ATTNJIT_")}
        ways = []
        ways.append(("bundle", bundled, lambda r: dict(base, ATTNJIT_DISABLE_DISK_CACHE="1",
                                                       ATTNJIT_LIBNVRTC="/nonexistent/libnvrtc.so")))
        ways.append(("cold disk", plain, lambda r: dict(base, ATTNJIT_CACHE_DIR=os.path.join(tmp, f"cold{r}"))))
        warm = os.path.join(tmp, "warm")
        run_once(plain, args.arch, dict(base, ATTNJIT_CACHE_DIR=warm))  # fills it
        ways.append(("warm disk", plain, lambda r: dict(base, ATTNJIT_CACHE_DIR=warm)))
        for name, binary, env_of in ways:
            times, parts, last = [], {k: [] for k in PARTS + SINCE_START}, ""
            for r in range(args.reps):
                seconds, last, got = run_once(binary, args.arch, env_of(r))
                times.append(seconds)
                for k, v in got.items():
                    parts[k].append(v)
            rows.append({"way": name, "median_s": statistics.median(times), "min_s": min(times),
                         "reps": args.reps, "arch": args.arch or "device", "last": last,
                         **{f"{k}_ms": statistics.median(v) for k, v in parts.items() if v}})
    what = f"compile only for {args.arch}" if args.arch else "the first kernel launched on the GPU"
    print(f"Process start to {what} (and to its exit); spec {os.path.basename(SPEC)}; medians of {args.reps} "
          "runs each.\n")
    print("From process start: to main (exec, dynamic loading), to the first kernel done. Inside main: the "
          "driver's cuInit and CUDA context (asked for before attnjit), the kernel made ready (attnjit: bundle, "
          "disk or NVRTC, and the module load), the buffers and the launch, waited for.\n")
    print("| way | to main | to first kernel | to exit (min) | cuInit | CUDA context | kernel ready | "
          "buffers + launch | the process said |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms = lambda k: f"{r[k + '_ms']:.1f} ms" if k + "_ms" in r else "-"
        print(f"| {r['way']} | {ms('to_main')} | {ms('to_kernel')} | {1e3 * r['median_s']:.1f} ms "
              f"({1e3 * r['min_s']:.1f}) | {' | '.join(ms(k) for k in PARTS)} | "
              f"{re.sub(r'^in main: [^;]*; monotonic ns: [^;]*; ', '', r['last'])} |")
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    sys.exit(main())
