#!/usr/bin/env python3
"""Markdown summary, plots and the README's performance section from benchmark JSON lines.

    python3 bench/report.py bench/results/<date>-<gpu>.jsonl [more.jsonl ...]
            [--md OUT.md] [--readme README.md | --no-readme] [--no-png]

Writes <stem>.md next to the first input (or --md), one PNG per variant and dtype
(<stem>-<variant>-<dtype>.png, TFLOP/s against N), and replaces the text between
`<!-- perf:begin -->` and `<!-- perf:end -->` in the README (printed instead when the
markers are absent). Later rows of the same (impl, case) replace earlier ones, so pieces of
one run and re-runs of a piece can be passed together. Needs only the standard library
(matplotlib for the plots; they are skipped with a note when it is missing).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cases import ANCHORS, IMPLS, VARIANTS  # noqa: E402

BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
NAMES = {"attnjit": "attnjit", "attnjit_fast": "attnjit (fast bwd)", "attnjit_tuned": "attnjit (tuned)", "sdpa_flash": "SDPA flash", "sdpa_cudnn": "SDPA cuDNN",
         "flex": "FlexAttention", "flex_flash": "FlexAttention (FLASH)", "naive": "naive"}
SHORT = {"attnjit_fast": "attnjit fast", "attnjit_tuned": "attnjit tuned", "sdpa_flash": "flash", "sdpa_cudnn": "cuDNN", "flex": "flex", "flex_flash": "flex FLASH", "naive": "naive", "attnjit": "attnjit"}
FAIL = "✗"
COLORS = {"attnjit": "tab:blue", "attnjit_fast": "tab:cyan", "attnjit_tuned": "tab:olive", "sdpa_flash": "tab:orange", "sdpa_cudnn": "tab:green", "flex": "tab:red",
          "flex_flash": "tab:purple", "naive": "tab:gray"}


# ------------------------------------------------------------------ loading
def load(paths):
    """(result rows, env rows). Result rows are deduplicated by (impl, case): last wins."""
    results, envs = collections.OrderedDict(), []
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    print(f"{path}:{n}: not JSON, ignored", file=sys.stderr)
                    continue
                if r.get("kind") == "env":
                    envs.append(r)
                elif "impl" in r and "variant" in r:
                    results.pop(row_key(r), None)
                    results[row_key(r)] = r
    return list(results.values()), envs


def row_key(r):
    return (r["impl"], r["variant"], r.get("overhead_of"), r.get("dtype"), r.get("mode", "fwd"),
            r.get("B"), r.get("H"), r.get("Hkv"), r.get("Nq"), r.get("Nk"), r.get("D"), r.get("L"))


def dims(r):
    """A row's head-dim column: D, with the latent dim of a latent case (its L 256 and L 512
    rows would share a cell otherwise)."""
    return f"{r['D']} L{r['L']}" if r.get("L") else r["D"]


def measured(r):
    return r is not None and "skipped" not in r and r.get("tflops") is not None


def good(r):
    return measured(r) and r.get("ok") is True


def order_variants(vs):
    known = [v for v in VARIANTS if v in vs]
    return known + sorted(v for v in vs if v not in VARIANTS)


def order_impls(ims):
    return [i for i in IMPLS if i in ims] + sorted(i for i in ims if i not in IMPLS)


def fmt(x, spec=".0f", none="-"):
    return none if x is None else format(x, spec)


def fmt_err(x):
    return "-" if x is None else f"{x:.1e}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


# ------------------------------------------------------------------ analysis
def groups(rows):
    """{(variant, dtype, mode): {(D, H, Hkv, B, N): {impl: row}}} of the non-overhead rows."""
    g = collections.defaultdict(lambda: collections.defaultdict(dict))
    for r in rows:
        if r["variant"] == "overhead":
            continue
        g[(r["variant"], r["dtype"], r.get("mode", "fwd"))][(dims(r), r["H"], r["Hkv"], r["B"], r["Nq"])][r["impl"]] = r
    return g


def best_other(cell, among=None):
    """(impl, tflops) of the fastest correct implementation that is not attnjit (nor its fast
    backward, attnjit_fast), or (None, None)."""
    cands = [(r["tflops"], i) for i, r in cell.items()
             if not i.startswith("attnjit") and (among is None or i in among) and good(r)]
    if not cands:
        return None, None
    t, i = max(cands)
    return i, t


def ratio(cell, other):
    a, o = cell.get("attnjit"), cell.get(other) if other else None
    if not measured(a) or not good(o):
        return None
    return a["tflops"] / o["tflops"]


def tflops_cell(r):
    if r is None:
        return ""
    if "skipped" in r:
        return "err" if r.get("error") else "-"
    s = fmt(r.get("tflops"))
    return s if r.get("ok") else f"{s} {FAIL}"


# ------------------------------------------------------------------ markdown sections
def header_lines(rows, envs):
    gpus = sorted({r.get("gpu_name") or r.get("gpu") for r in rows if r.get("gpu") or r.get("gpu_name")})
    commits = sorted({str(r.get("commit")) for r in rows if r.get("commit")})
    dates = sorted({r.get("date") for r in rows if r.get("date")})
    modes = sorted({r.get("mode", "fwd") for r in rows})
    out = [f"# attnjit benchmark ({', '.join(modes) or 'fwd'})", ""]
    out.append(f"Device: {', '.join(gpus) or 'unknown'}; commit {', '.join(f'`{c}`' for c in commits) or 'unknown'}; "
               f"date {', '.join(dates) or 'unknown'}.")
    if envs:
        e = envs[-1]
        out.append(f"Software: torch {e.get('torch')}, CUDA {e.get('cuda')}, triton {e.get('triton')}, "
                   f"cuDNN {e.get('cudnn')}, Python {e.get('python')}; {e.get('sms')} SMs.")
    out += ["", "Conventions:",
            "- TFLOP/s = FLOPs / median time. FLOPs (FlashAttention's convention, ANCHORS.md): "
            "4 * B * Hq * Nq * Nk * D, times 0.5 for causal and every causal variant, times the exact "
            "fraction of kept (i, j) pairs for the sliding window and the document mask (column "
            "`flop_fraction` of the JSON lines); fwd+bwd = 3.5 x forward. The latent projection (MLA): "
            "4 * B * H * N^2 * L (halved for causal) plus its projections 2 * B * H * N * (D * L + L * Dv). "
            "Every implementation of a case is credited the same FLOPs.",
            "- Time: `triton.testing.do_bench(warmup=25 ms, rep=100 ms, return_mode='median')` after a "
            "warm-up call, so JIT and torch.compile time stay out (they are in `compile_s`: construction "
            "plus the first call).",
            "- Correctness: the first call's output against a float64 reference on the same inputs; "
            "passes when |out - ref| <= atol + rtol |ref| everywhere (bf16 2e-2, fp16 3e-3); NaN never "
            f"passes. {FAIL} marks a failed check (still timed). max = max |out - ref|, rel = ||out - ref|| / ||ref||.",
            "- Peak memory (`peak_mib`): the most memory one call had allocated through PyTorch's "
            "allocator above what was allocated before it, output included (max_memory_allocated after "
            "reset_peak_memory_stats, minus memory_allocated before), plus the most it took from the CUDA "
            "driver's memory pool (attnjit's workspace, `workspace_mib`; bench/driver_pool.py).",
            "- `-` = skipped (the backend cannot express the variant, or it would not fit; reasons below), "
            "`err` = the implementation raised (message below).",
            "- Ratios: attnjit TFLOP/s over another implementation's, only where that one passed its check; "
            "'best' = the fastest correct non-attnjit implementation of the row.", ""]
    return out


# FlashAttention-3's published forward at N 16k on an H100 SXM (../shared/ANCHORS.md, read from
# the FA3 repository's figure): shown in the plain and causal forward tables' N 16384 rows, not
# measured here.
FA3_PUBLISHED_FWD = {("plain", 64): 497, ("plain", 128): 648, ("plain", 256): 756,
                     ("causal", 64): 473, ("causal", 128): 616, ("causal", 256): 642}


def perf_sections(rows, png_names):
    out = []
    for (variant, dtype, mode), cells in sorted(groups(rows).items(),
                                                key=lambda kv: (order_variants(VARIANTS).index(kv[0][0])
                                                                if kv[0][0] in VARIANTS else 99, kv[0][1], kv[0][2])):
        present = order_impls({i for c in cells.values() for i in c})
        cols = [i for i in present if any(measured(c.get(i)) or (c.get(i) or {}).get("error")
                                          for c in cells.values())]
        anchors = [i for i in ANCHORS if i in cols]
        hdr = ["D", "H/Hkv", "B x N"] + [NAMES[i] if i in NAMES else i for i in cols]
        if "attnjit" in cols:
            hdr += ["attnjit / best"] + [f"/ {SHORT[i]}" for i in anchors]
        body = []
        for (D, H, Hkv, B, N), cell in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][4], kv[0][1])):
            line = [D, f"{H}/{Hkv}", f"{B} x {N}"] + [tflops_cell(cell.get(i)) for i in cols]
            if "attnjit" in cols:
                bi, _ = best_other(cell)
                rb = ratio(cell, bi)
                line.append(f"{rb:.2f} ({SHORT.get(bi, bi)})" if rb is not None else "-")
                line += [fmt(ratio(cell, i), ".2f") for i in anchors]
            body.append(line)
        if mode == "fwd" and any((variant, D) in FA3_PUBLISHED_FWD for (D, *_) in cells):
            hdr.append("FA3 published (H100, 16k)")
            for line, (D, _, _, _, N) in zip(body, sorted(cells, key=lambda k: (k[0], k[4], k[1]))):
                line.append(fmt(FA3_PUBLISHED_FWD.get((variant, D)) if N == 16384 else None))
        out += [f"## {variant}, {dtype}, {mode}", "", f"{VARIANTS.get(variant, variant)}. TFLOP/s:", ""]
        out += table(hdr, body)
        skipped = sorted({(i, r["skipped"]) for c in cells.values() for i, r in c.items()
                          if "skipped" in r and not r.get("error")})
        if skipped:
            out.append("")
        for i, why in skipped:
            out.append(f"- {NAMES.get(i, i)} skipped: {why}")
        png = png_names.get((variant, dtype, mode))
        if png:
            out += ["", f"![{variant} {dtype}]({png})"]
        out.append("")
    return out


def correctness_section(rows):
    out = ["## Correctness against the fp64 reference", "",
           "Worst max |out - ref| / worst rel error over the sizes of each variant; "
           "`n/m` = checks passed of checks made.", ""]
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        if r["variant"] == "overhead" or not measured(r):
            continue
        agg[(r["variant"], r["dtype"], r.get("mode", "fwd"))][r["impl"]].append(r)
    impls = order_impls({i for d in agg.values() for i in d})
    body = []
    for key in sorted(agg, key=lambda k: (order_variants(VARIANTS).index(k[0]) if k[0] in VARIANTS else 99, k[1], k[2])):
        line = [f"{key[0]} {key[1]}" + ("" if key[2] == "fwd" else f" {key[2]}")]
        for i in impls:
            rs = agg[key].get(i, [])
            if not rs:
                line.append("-")
                continue
            mx = [r.get("max_err") for r in rs]
            rl = [r.get("rel_err") for r in rs]
            worst_max = None if any(x is None for x in mx) else max(mx)
            worst_rel = None if any(x is None for x in rl) else max(rl)
            npass = sum(1 for r in rs if r.get("ok"))
            flag = "" if npass == len(rs) else f" {FAIL}"
            line.append(f"{fmt_err(worst_max)} / {fmt_err(worst_rel)} ({npass}/{len(rs)}){flag}")
        body.append(line)
    out += table(["variant"] + [NAMES.get(i, i) for i in impls], body)
    fails = [r for r in rows if measured(r) and not r.get("ok")]
    out.append("")
    if fails:
        out += [f"**{len(fails)} failed checks** (timed anyway):", ""]
        for r in fails:
            extra = f", {r['nonfinite']} non-finite" if r.get("nonfinite") else ""
            out.append(f"- {r['impl']} {case_label(r)}: max {fmt_err(r.get('max_err'))}, "
                       f"rel {fmt_err(r.get('rel_err'))}, {r.get('bad')} elements out of tolerance{extra}")
    else:
        out.append("Every measured implementation passed its check.")
    nondet = [r for r in rows if measured(r) and r.get("deterministic") is False]
    if nondet:
        out += ["", "Outputs that differed between two calls on the same inputs: " +
                ", ".join(f"{r['impl']} {case_label(r)}" for r in nondet) + "."]
    out.append("")
    return out


def case_label(r):
    s = f"{r['variant']} {r['dtype']} D={dims(r)} H={r['H']}/{r['Hkv']} B={r['B']} N={r['Nq']}"
    return s if r.get("mode", "fwd") == "fwd" else s + f" {r['mode']}"


def memory_section(rows):
    out = ["## Peak memory of one call (MiB above what was allocated before it)", "",
           "At the largest N each variant ran with attnjit measured.", ""]
    body, impls = [], set()
    for (variant, dtype, mode), cells in groups(rows).items():
        keys = [k for k, c in cells.items() if measured(c.get("attnjit"))] or \
               [k for k, c in cells.items() if any(measured(r) for r in c.values())]
        if not keys:
            continue
        k = max(keys, key=lambda k: (k[4], k[0]))
        impls |= {i for i, r in cells[k].items() if measured(r)}
        body.append(((variant, dtype, mode), k, cells[k]))
    impls = order_impls(impls)
    lines = []
    for (variant, dtype, mode), k, cell in sorted(body, key=lambda b: (order_variants(VARIANTS).index(b[0][0])
                                                                        if b[0][0] in VARIANTS else 99, b[0][1], b[1][0])):
        lines.append([f"{variant} {dtype}" + ("" if mode == "fwd" else f" {mode}"), k[0], f"{k[3]} x {k[4]}"] +
                     [fmt(cell[i].get("peak_mib"), ".0f") if measured(cell.get(i)) else "-" for i in impls])
    out += table(["variant", "D", "B x N"] + [NAMES.get(i, i) for i in impls], lines)
    out.append("")
    return out


def compile_section(rows):
    out = ["## First call (construction + first call, seconds)", "",
           "attnjit: compile() plus the first launch (NVRTC on a cold cache); flex: create_block_mask "
           "plus torch.compile on the first call. Max / median over the sizes of a variant.", ""]
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        if r["variant"] != "overhead" and measured(r) and r.get("compile_s") is not None and r["impl"] in ("attnjit", "flex"):
            agg[(r["variant"], r["dtype"])][r["impl"]].append(r["compile_s"])
    if not agg:
        return []
    body = []
    for key in sorted(agg, key=lambda k: (order_variants(VARIANTS).index(k[0]) if k[0] in VARIANTS else 99, k[1])):
        line = [f"{key[0]} {key[1]}"]
        for i in ("attnjit", "flex"):
            v = agg[key].get(i)
            line.append(f"{max(v):.2f} / {statistics.median(v):.2f}" if v else "-")
        body.append(line)
    out += table(["variant", "attnjit", "FlexAttention"], body)
    out.append("")
    return out


def tuning_section(rows):
    """attnjit tuned (--autotune) against its default on each case both ran: the speed-up and
    the tuned first call's time (construction plus the first call, which tunes the bucket)."""
    body, ratios = [], []
    for (variant, dtype, mode), cells in groups(rows).items():
        for k, cell in cells.items():
            d, t = cell.get("attnjit"), cell.get("attnjit_tuned")
            if not (measured(d) and measured(t)):
                continue
            x = t["tflops"] / d["tflops"]
            # The timings in turns (bench_attention.py), where both rows have them, decide.
            alt = None
            if d.get("ms_alternating") and t.get("ms_alternating"):
                alt = statistics.median(d["ms_alternating"]) / statistics.median(t["ms_alternating"])
            ratios.append(alt if alt is not None else x)
            body.append(((order_variants(VARIANTS).index(variant) if variant in VARIANTS else 99, dtype, mode, k),
                         [case_label(d), tflops_cell(d), tflops_cell(t), f"{x:.2f}", fmt(alt, ".2f"),
                          fmt(t.get("compile_s"), ".1f")]))
    if not body:
        return []
    body.sort(key=lambda b: b[0])
    out = ["## attnjit tuned against its default (tiles tuned per shape bucket: the forward's, and in fwdbwd the backward's key-tile kernel's)", "",
           "Tuned / default: from the two rows' timings (tuned timed right after default) and, in "
           "'in turns', from the medians of both timed again alternately, tuned first (3 rounds; "
           "older runs have none). The summary takes the turns where there are some. "
           f"{len(ratios)} cases: tuned / default from {min(ratios):.2f} to {max(ratios):.2f} "
           f"(median {statistics.median(ratios):.2f}); {sum(x >= 1.1 for x in ratios)} at 1.10x or more, "
           f"{sum(x < 0.98 for x in ratios)} below 0.98x. First call of the tuned one: construction plus the first "
           "launch, which compiles the bucket's candidates and times them unless an earlier case of the run "
           "tuned the same spec and bucket (then it comes from the tuning database).", ""]
    out += table(["case", "default TFLOP/s", "tuned TFLOP/s", "tuned / default", "in turns",
                  "tuned first call (s)"], [b[1] for b in body])
    out.append("")
    return out


def overhead_rows(rows):
    return [r for r in rows if r["variant"] == "overhead"]


def overhead_section(rows):
    ov = overhead_rows(rows)
    if not ov:
        return []
    out = ["## Per-call overhead", "",
           "B=1, H=1, N=128, D=64, bf16: host time per call (perf_counter over loops of 200 calls, no "
           "synchronisation inside a loop, no CUDA graphs; median of 10 loops, fastest in brackets) and "
           "do_bench's device time per call.", ""]
    body = []
    for r in sorted(ov, key=lambda r: (r.get("overhead_of", ""), IMPLS.index(r["impl"]) if r["impl"] in IMPLS else 9)):
        if "skipped" in r:
            body.append([r.get("overhead_of", "?"), NAMES.get(r["impl"], r["impl"]), "-", "-", r["skipped"]])
            continue
        chk = "ok" if r.get("ok") else f"{FAIL} max {fmt_err(r.get('max_err'))}"
        body.append([r.get("overhead_of", "?"), NAMES.get(r["impl"], r["impl"]),
                     f"{r['host_us']:.1f} ({r.get('host_us_min', r['host_us']):.1f})",
                     f"{r['ms'] * 1e3:.1f}", chk])
    out += table(["variant", "impl", "host us/call", "device us/call", "check"], body)
    out.append("")
    return out


def skip_section(rows):
    errs = [r for r in rows if r.get("error")]
    out = []
    if errs:
        out += ["## Errors", ""]
        for r in errs:
            where = case_label(r) if r["variant"] != "overhead" else f"overhead {r.get('overhead_of')}"
            out.append(f"- {r['impl']} {where}: `{r['error'][:300]}`")
        out.append("")
    return out


# ------------------------------------------------------------------ plots
def plots(rows, stem):
    """One PNG per (variant, dtype, mode): TFLOP/s against N, one line per implementation,
    one panel per head dim. Returns {(variant, dtype, mode): file name} ({} without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        print(f"# no plots: matplotlib unavailable ({e})", file=sys.stderr)
        return {}
    names = {}
    commits = sorted({str(r.get("commit")) for r in rows if r.get("commit")})
    gpus = sorted({r.get("gpu_name") or r.get("gpu") for r in rows if r.get("gpu")})
    for (variant, dtype, mode), cells in groups(rows).items():
        dims = sorted({k[0] for k in cells})
        fig, axes = plt.subplots(1, len(dims), figsize=(7.5 * len(dims), 4.2), squeeze=False)
        drawn = failed = False
        for ax, D in zip(axes[0], dims):
            keys = sorted((k for k in cells if k[0] == D), key=lambda k: k[4])
            impls = order_impls({i for k in keys for i in cells[k]})
            for i in impls:
                pts = [(k[4], cells[k][i]) for k in keys if measured(cells[k].get(i))]
                if not pts:
                    continue
                xs = [n for n, _ in pts]
                ys = [r["tflops"] for _, r in pts]
                ax.plot(xs, ys, marker="o", label=NAMES.get(i, i), color=COLORS.get(i),
                        linewidth=2.4 if i == "attnjit" else 1.4)
                bad = [(n, r["tflops"]) for n, r in pts if not r.get("ok")]
                if bad:
                    ax.scatter([b[0] for b in bad], [b[1] for b in bad], marker="x", s=90, color="red", zorder=5,
                               label="failed check" if not failed else None)
                    failed = True
                drawn = True
            # Cases an implementation skipped (cannot express, would not fit): hollow markers at 0.
            for i in impls:
                skipped = [k[4] for k in keys if "skipped" in (cells[k].get(i) or {})]
                if skipped and any(measured(cells[k].get(i)) for k in keys):
                    ax.scatter(skipped, [0] * len(skipped), marker="v", s=50, facecolors="none",
                               edgecolors=COLORS.get(i, "black"), zorder=5, clip_on=False,
                               label=f"{NAMES.get(i, i)} skipped")
            ax.set_xscale("log", base=2)
            ns = sorted({k[4] for k in keys})
            ax.set_xticks(ns)
            ax.set_xticklabels([str(n) for n in ns])
            ax.minorticks_off()
            ax.set_xlabel("N (B * N = %s)" % ("16384" if all(k[3] * k[4] == 16384 for k in keys) else "varies"))
            ax.set_ylabel("TFLOP/s")
            ax.set_title(f"{variant} {dtype} {mode}, D={D}")
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # off the lines
        fig.suptitle(f"{', '.join(gpus)} - commit {', '.join(commits)}" + (" (red x: failed check)" if failed else ""),
                     fontsize=9)
        fig.tight_layout()
        suffix = "" if mode == "fwd" else f"-{mode}"
        path = f"{stem}-{variant}-{dtype}{suffix}.png"
        if drawn:
            fig.savefig(path, dpi=90)
            names[(variant, dtype, mode)] = os.path.basename(path)
        plt.close(fig)
    ratio_png = ratio_plot(rows, stem, plt)
    if ratio_png:
        names[("ratio", "", "")] = ratio_png
    return names


def ratio_points(rows):
    """[(label, ratio, best other)] of attnjit over the fastest correct other implementation,
    per (variant, dtype, mode, D) at the largest N where attnjit was measured."""
    out = []
    for (variant, dtype, mode), cells in sorted(groups(rows).items(),
                                                key=lambda kv: (kv[0][2], kv[0][1], order_variants(VARIANTS).index(kv[0][0])
                                                                if kv[0][0] in VARIANTS else 99)):
        for D in sorted({k[0] for k in cells}):
            keys = [k for k in cells if k[0] == D and measured(cells[k].get("attnjit"))]
            if not keys:
                continue
            cell = cells[max(keys, key=lambda k: k[4])]
            bi, _ = best_other(cell)
            r = ratio(cell, bi)
            if r is not None:
                out.append((f"{variant} {dtype} {mode} D{D}", r, bi))
    return out


def ratio_plot(rows, stem, plt):
    """One summary PNG: attnjit's ratio to the best other implementation per variant."""
    pts = ratio_points(rows)
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(pts) + 1.2))
    ys = list(range(len(pts)))[::-1]
    ax.barh(ys, [p[1] for p in pts], color=[COLORS.get(p[2], "gray") for p in pts])
    for y, (_, r, bi) in zip(ys, pts):
        ax.text(r + 0.01, y, f"{r:.2f} vs {SHORT.get(bi, bi)}", va="center", fontsize=7)
    ax.set_yticks(ys)
    ax.set_yticklabels([p[0] for p in pts], fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("attnjit TFLOP/s / fastest correct other implementation (largest N)")
    ax.set_xlim(0, max(1.2, max(p[1] for p in pts) + 0.25))
    fig.tight_layout()
    path = f"{stem}-ratio.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return os.path.basename(path)


# ------------------------------------------------------------------ README section
def readme_section(rows, md_link, dtype="bf16", ns=(4096, 16384)):
    g = groups(rows)
    commits = sorted({str(r.get("commit")) for r in rows if r.get("commit")})
    gpus = sorted({r.get("gpu_name") or r.get("gpu") for r in rows if r.get("gpu")})
    out = [f"Forward pass, {', '.join(gpus) or 'unknown GPU'}, {dtype}, B * N = 16384, TFLOP/s "
           "(FlashAttention's FLOP count; masks count the pairs they keep), commit "
           f"{', '.join(f'`{c}`' for c in commits) or 'unknown'}. Ratio: attnjit over the fastest correct "
           "of SDPA flash, SDPA cuDNN and FlexAttention in the same run. Full tables, correctness, "
           f"memory and plots: [{os.path.basename(md_link)}]({md_link}).", ""]
    hdr = ["variant", "D"]
    for n in ns:
        hdr += [f"N={n}", "ratio (best)"]
    body = []
    for (variant, dt, mode), cells in sorted(g.items(), key=lambda kv: order_variants(VARIANTS).index(kv[0][0])
                                             if kv[0][0] in VARIANTS else 99):
        if dt != dtype or mode != "fwd":
            continue
        for D in sorted({k[0] for k in cells}):
            byn = {k[4]: c for k, c in cells.items() if k[0] == D}
            line = [variant, D]
            for n in ns:
                use = n if n in byn and measured(byn[n].get("attnjit")) else \
                    max([m for m in byn if m < n and measured(byn[m].get("attnjit"))], default=None)
                if use is None:
                    line += ["-", "-"]
                    continue
                cell = byn[use]
                a = cell["attnjit"]
                at = tflops_cell(a) + ("" if use == n else f" (N={use})")
                bi, _ = best_other(cell, among=ANCHORS)
                rb = ratio(cell, bi)
                line += [at, f"{rb:.2f} ({SHORT[bi]})" if rb is not None else "-"]
            if any(c != "-" for c in line[2:]):
                body.append(line)
    out += table(hdr, body)
    out += fwdbwd_table(g, dtype)
    ov = [r for r in overhead_rows(rows) if r.get("overhead_of") == "plain" and "host_us" in r]
    if ov:
        out += ["", "Host time per call, B=1 H=1 N=128 D=64: " + ", ".join(
            f"{NAMES.get(r['impl'], r['impl'])} {r['host_us']:.1f} us" for r in
            sorted(ov, key=lambda r: IMPLS.index(r["impl"]) if r["impl"] in IMPLS else 9)) + "."]
    fails = [r for r in rows if r["impl"] == "attnjit" and measured(r) and not r.get("ok")]
    errs = [r for r in rows if r["impl"] == "attnjit" and r.get("error")]
    if fails or errs:
        out += ["", f"attnjit: {len(fails)} failed check(s), {len(errs)} error(s) (see the summary)."]
    ours = [r for r in rows if r["impl"] == "attnjit"]
    if ours and not any(measured(r) or "host_us" in r for r in ours):
        out += ["", f"attnjit measured nothing in this run: {ours[0].get('skipped', '?')}"]
    out += ["", "Reproduce with `bench/run_bench.sh` (see [bench/README.md](bench/README.md))."]
    return out


# Rows whose best anchor is slow for a reason other than attention: (variant, anchor, a field
# of the anchor's row that marks the cause) -> the note under the table; the ratio gets a mark.
FWDBWD_CAVEATS = {
    ("alibi_causal", "flex", "dslopes_max_err"):
        "the ALiBi slopes were trained in this run (every implementation gave their gradient), and "
        "FlexAttention's backward then runs at about 1 TFLOP/s: the ratio says nothing about attention "
        "speed. The harness has kept the slopes fixed since.",
}


def fwdbwd_table(g, dtype):
    """Forward + backward at the largest N measured per (variant, D): attnjit (deterministic)
    and attnjit_fast, their ratios to SDPA flash and to the fastest correct anchor."""
    body, notes = [], []
    for (variant, dt, mode), cells in sorted(g.items(), key=lambda kv: order_variants(VARIANTS).index(kv[0][0])
                                             if kv[0][0] in VARIANTS else 99):
        if dt != dtype or mode != "fwdbwd":
            continue
        for D in sorted({k[0] for k in cells}):
            byn = {k[4]: c for k, c in cells.items() if k[0] == D and measured(c.get("attnjit"))}
            if not byn:
                continue
            n = max(byn)
            cell = byn[n]
            bi, _ = best_other(cell, among=ANCHORS)
            line = [variant, D, n, tflops_cell(cell["attnjit"]),
                    tflops_cell(cell["attnjit_fast"]) if measured(cell.get("attnjit_fast")) else "-"]
            caveat = next((note for (v, anchor, field), note in FWDBWD_CAVEATS.items()
                           if (v, anchor) == (variant, bi) and field in cell[bi]), None)
            for other in ("sdpa_flash", bi):
                r = ratio(cell, other) if other else None
                line.append(f"{r:.2f}" + (f" ({SHORT[other]})" if other == bi else "") if r is not None else "-")
            if caveat and line[-1] != "-":
                line[-1] += " *"
                notes += [f"\\* {variant}: {caveat}"] if f"\\* {variant}: {caveat}" not in notes else []
            body.append(line)
    if not body:
        return []
    return ["", "Forward + backward (training step; 3.5 x the forward's FLOPs; dQ, dK, dV checked against "
            "float64), TFLOP/s. `fast`: `compile(deterministic=False)`, dQ summed with atomics. Ratios are "
            "the deterministic attnjit's.", ""] + \
        table(["variant", "D", "N", "attnjit", "fast", "/ SDPA flash", "ratio (best)"], body) + \
        (["", *notes] if notes else [])


def update_readme(path, section):
    """Replace the text between the markers; False when the markers are absent."""
    if not os.path.exists(path):
        return False
    text = open(path).read()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < 0 or j < i:
        return False
    new = text[:i + len(BEGIN)] + "\n" + "\n".join(section) + "\n" + text[j:]
    if new != text:
        with open(path, "w") as f:
            f.write(new)
    return True


# ------------------------------------------------------------------ main
def default_md(path):
    base = path[:-6] if path.endswith(".jsonl") else path
    base = re.sub(r"-piece\d+of\d+$", "", base)
    return base + ".md"


def write_report(paths, md=None, readme=None, png=True):
    rows, envs = load(paths)
    md = md or default_md(paths[0])
    stem = md[:-3] if md.endswith(".md") else md
    png_names = plots(rows, stem) if png else {}
    lines = header_lines(rows, envs)
    if ("ratio", "", "") in png_names:
        lines += ["## attnjit against the best other implementation", "",
                  f"![attnjit / best]({png_names[('ratio', '', '')]})", ""]
    lines += perf_sections(rows, png_names)
    lines += correctness_section(rows)
    lines += memory_section(rows)
    lines += compile_section(rows)
    lines += tuning_section(rows)
    lines += overhead_section(rows)
    lines += skip_section(rows)
    lines.append(f"Sources: {', '.join(os.path.basename(p) for p in paths)} ({len(rows)} rows).")
    os.makedirs(os.path.dirname(os.path.abspath(md)), exist_ok=True)
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    result = {"md": md, "pngs": [os.path.join(os.path.dirname(md), n) for n in png_names.values()],
              "readme": None}
    if readme:
        link = os.path.relpath(os.path.abspath(md), os.path.dirname(os.path.abspath(readme)))
        section = readme_section(rows, link)
        result["section"] = section
        result["readme"] = update_readme(readme, section)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("jsonl", nargs="+")
    p.add_argument("--md", help="summary path (default: the first input's name with .md)")
    p.add_argument("--readme", default=os.path.join(HERE, "..", "README.md"))
    p.add_argument("--no-readme", action="store_true", help="leave the README alone")
    p.add_argument("--print-section", action="store_true",
                   help="print the README section instead of writing it (e.g. on the device machine)")
    p.add_argument("--no-png", action="store_true")
    a = p.parse_args(argv)
    if a.print_section:
        rows, _ = load(a.jsonl)
        res = write_report(a.jsonl, a.md, None, not a.no_png)
        link = "bench/results/" + os.path.basename(res["md"])  # where the lead will put it
        for path in [res["md"]] + res["pngs"]:
            print(f"wrote {path}")
        print("\n".join(readme_section(rows, link)))
        return 0
    res = write_report(a.jsonl, a.md, None if a.no_readme else a.readme, not a.no_png)
    print(f"summary: {res['md']}")
    for path in res["pngs"]:
        print(f"plot: {path}")
    if not a.no_readme:
        if res["readme"]:
            print(f"README performance section updated: {os.path.normpath(a.readme)}")
        else:
            print(f"README markers {BEGIN} / {END} not found in {os.path.normpath(a.readme)}; "
                  "the section would be:\n")
            print("\n".join(res["section"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
