"""Sorts compute-sanitizer racecheck reports (a log of `--tool racecheck` runs) by main loop.

  python3 bench/tools/racecheck_report.py sanitize-racecheck.log [--strict]

Prints each distinct (write, read) pair of source lines with its count, and exits 1 when a
report names no sm90 function (the log must come from kernels compiled with
ATTNJIT_LINEINFO=1, which names them; bench/run_device.sh sanitize sets it). racecheck reports the sm90 kernels' hand-offs
through mbarriers and the dQ writer's named-barrier ring on correct code too
(bench/tools/racecheck_probe.cu, bench/results/2026-11-29-h200-290088d-gpu-tests-and-sanitizer.md),
so those are listed, not failed; anywhere else a report is a finding. A pair not seen before
in that list is worth reading all the same. --strict (when the probe shows racecheck now
models mbarriers) fails on every report.
"""
import collections
import re
import sys

REPORT = re.compile(r"Race reported between (\w+) access at (.*?)\n=+\s+and (\w+) access at (.*?)\[(\d+) hazards?\]", re.S)


def where(text):
    """(main loop, first source line) of one access: 'sm90' when an attnjit::sm90 frame is in it."""
    loop = "sm90" if "attnjit::sm90::" in text else "other"
    lines = re.findall(r"in ([\w./-]+:\d+)", text)
    return loop, lines[0] if lines else "?"


def main(path, strict=False):
    text = open(path, encoding="utf-8", errors="replace").read()
    pairs = collections.Counter()
    for m in REPORT.finditer(text):
        (loop1, line1), (loop2, line2) = where(m.group(2)), where(m.group(4))
        # A side in common code (BackwardScores) is in the kernel of the other side's loop.
        loop = "sm90" if "sm90" in (loop1, loop2) else "other"
        pairs[(loop, f"{m.group(1).lower()} {line1}", f"{m.group(3).lower()} {line2}")] += 1
    for (loop, a, b), n in sorted(pairs.items()):
        print(f"{loop}: {a} / {b}: {n} report(s)")
    others = sum(n for (loop, _, _), n in pairs.items() if loop != "sm90")
    print(f"racecheck: {sum(pairs.values()) - others} report(s) in sm90 kernels (hand-offs racecheck does "
          f"not model), {others} elsewhere")
    return 1 if others or (strict and pairs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], strict="--strict" in sys.argv[2:]))
