#!/usr/bin/env python3
"""A/B comparison of attnjit harness runs tagged by --commit TAG-RUN (e.g. base-a, new-a,
base-b, new-b: the two sides interleaved on one machine).

    python3 bench/compare_runs.py RUNS.jsonl [more.jsonl ...] [--base TAG]

Per case (variant, dtype, D, B, N, H, Hkv) and side, the best ms of that side's runs;
speed = base ms / other ms. Prints one line per case, then per side the geomean and the
minimum. Fails on a row that did not pass its fp64 check. Standard library only.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--base", default="base", help="tag of the reference side (default: base)")
    args = ap.parse_args()

    best: dict[tuple, dict[str, float]] = collections.defaultdict(dict)
    for path in args.files:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("impl") != "attnjit" or "ms" not in r:
                    continue
                key = (r["variant"], r["dtype"], r["D"], r["B"], r["Nq"], r["H"], r["Hkv"])
                if not r.get("ok"):
                    print(f"{path}: {key} {r['commit']} failed its fp64 check", file=sys.stderr)
                    return 1
                tag = r["commit"].rsplit("-", 1)[0]
                best[key][tag] = min(best[key].get(tag, math.inf), r["ms"])

    speeds: dict[str, list[float]] = collections.defaultdict(list)
    for key in sorted(best):
        sides = best[key]
        if args.base not in sides:
            continue
        line = f"{key[0]:16s} {key[1]} D{key[2]} B{key[3]} N{key[4]:<6d} {args.base} {sides[args.base]:.3f} ms"
        for tag in sorted(t for t in sides if t != args.base):
            speed = sides[args.base] / sides[tag]
            speeds[tag].append(speed)
            line += f"  {tag} {sides[tag]:.3f} ms ({speed:.3f})"
        print(line)
    for tag, v in speeds.items():
        geo = math.exp(sum(map(math.log, v)) / len(v))
        print(f"{tag}: {len(v)} cases, geomean speed {geo:.3f}, min {min(v):.3f}, max {max(v):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
