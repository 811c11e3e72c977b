#!/usr/bin/env python3
"""Markdown summary of a device run: attnjit beside the anchors measured in the same run.
Usage: summarize.py attnjit.jsonl sdpa.jsonl  (JSON lines from bench_forward and sdpa_anchor.py)"""
import json
import sys


def load(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def main():
    ours = load(sys.argv[1])
    anchors = load(sys.argv[2]) if len(sys.argv) > 2 else []
    key = lambda r: (r["variant"], r["D"], r["Nq"])
    by = {}
    for r in anchors:
        by.setdefault(key(r), {})[r["impl"]] = r
    out = []
    comp = [r for r in ours if r.get("kind") == "compile"]
    if comp:
        c = comp[0]
        out.append(f"Device: {c['gpu']}, commit {c['commit']}.\n")
        out.append(f"Compile: cold {c['cold_compile_s']:.2f} s (generate, NVRTC, load), "
                   f"disk-cache hit {c['disk_hit_ms']:.2f} ms, memory-cache hit {c['memory_hit_us']:.1f} us.\n")
    out.append("| variant | D | B x N | attnjit TFLOP/s | SDPA flash (FA2) | ratio | SDPA cuDNN | ratio |")
    out.append("|---|---|---|---|---|---|---|---|")
    fwd = [r for r in ours if r.get("impl") == "attnjit"]
    for r in fwd:
        a = by.get(key(r), {})
        fa2, cud = a.get("sdpa_flash"), a.get("sdpa_cudnn")
        cell = lambda x: (f"{x['tflops']:.0f}", f"{r['tflops'] / x['tflops']:.2f}") if x else ("-", "-")
        f1, f2 = cell(fa2)
        c1, c2 = cell(cud)
        out.append(f"| {r['variant']} | {r['D']} | {r['B']} x {r['Nq']} | {r['tflops']:.0f} | {f1} | {f2} | {c1} | {c2} |")
    # Mask skipping: same kernel with and without the causal mask.
    plain = {(r["D"], r["Nq"]): r["ms"] for r in fwd if r["variant"] == "plain"}
    lines = [f"D={r['D']} N={r['Nq']}: {plain[(r['D'], r['Nq'])] / r['ms']:.2f}x"
             for r in fwd if r["variant"] == "causal" and (r["D"], r["Nq"]) in plain]
    if lines:
        out.append("\nCausal speed-up over the unmasked kernel (time ratio): " + ", ".join(lines) + ".")
    print("\n".join(out))


if __name__ == "__main__":
    main()
