"""Where a data-dependent mask's time goes: the document mask of the harness beside masks
that isolate one cost each (bf16, D 128, H 16, B x N = 16384, forward and fwd+bwd).
Diagnostics only: outputs are compared with SDPA given the same mask as a boolean matrix,
not with fp64; speed claims come from bench_attention.py.

  python3 bench/tools/mask_probe.py [--shapes 1x16384,4x4096] [--mode fwd,fwdbwd]

Rows (TFLOP/s over the kept (i, j) pairs only, like the harness):
  plain        no mask: the loop's own rate
  doc          doc[b, i] == doc[b, j], the harness's random documents
  doc_one      the same mask over one document: every tile kept whole, classify still reads memory
  doc_aligned  equal documents on 128-key boundaries: no partial tile
  blocks       (i // L) == (j // L), the aligned documents' mask by arithmetic: classify reads nothing
  doc_sm80     the harness's documents on the sm80 loop
  doc_fast, doc_one_fast
               the same masks with deterministic=False: the fused backward (dQ by atomics)
               in place of the two-pass one a mask that reads memory takes, so the fwd+bwd
               rows show what the two passes cost
"""
import argparse
import os
import sys

import torch
import triton.testing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, ".."))
import attnjit  # noqa: E402
from cases import doc_ids  # noqa: E402
from mods import document_mask as doc_mask  # noqa: E402  (the harness's own mask function)


def block_mask(length):
    return lambda b, h, q_idx, kv_idx: (q_idx // length) == (kv_idx // length)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1x16384,4x4096")
    p.add_argument("--mode", default="fwd,fwdbwd")
    a = p.parse_args()
    D, H = 128, 16
    torch.manual_seed(0)
    for shape in a.shapes.split(","):
        B, N = map(int, shape.split("x"))
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        aligned_len = 2048 if N >= 8192 else 512
        docs = {
            "doc": torch.tensor(doc_ids(B, N), dtype=torch.int32, device="cuda"),
            "doc_one": torch.zeros(B, N, dtype=torch.int32, device="cuda"),
            "doc_aligned": (torch.arange(N, device="cuda", dtype=torch.int32) // aligned_len).expand(B, N).contiguous(),
        }
        rows = [("plain", None, None, None), ("doc", doc_mask(docs["doc"]), docs["doc"], None),
                ("doc_one", doc_mask(docs["doc_one"]), docs["doc_one"], None),
                ("doc_aligned", doc_mask(docs["doc_aligned"]), docs["doc_aligned"], None),
                ("blocks", block_mask(aligned_len), docs["doc_aligned"], None),
                ("doc_sm80", doc_mask(docs["doc"]), docs["doc"], "sm80"),
                ("doc_fast", doc_mask(docs["doc"]), docs["doc"], None),
                ("doc_one_fast", doc_mask(docs["doc_one"]), docs["doc_one"], None)]
        for name, mask, doc, mainloop in rows:
            keep = None if doc is None else (doc[:, :, None] == doc[:, None, :])[:, None]  # [B, 1, N, N]
            frac = 1.0 if keep is None else keep.float().mean().item()
            for mode in a.mode.split(","):
                if name.endswith("_fast") and mode == "fwd":
                    continue  # the same forward as without _fast
                flops = 4 * B * H * N * N * D * frac * (3.5 if mode == "fwdbwd" else 1.0)
                try:
                    fn = attnjit.compile(mask=mask, mainloop=mainloop, deterministic=not name.endswith("_fast"))
                    qq, kk, vv = (t.detach().requires_grad_(mode == "fwdbwd") for t in (q, k, v))
                    out = fn(qq, kk, vv)
                    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
                    err = (out.float() - ref.float()).abs().max().item()
                    if mode == "fwd":
                        run = lambda: fn(q, k, v)  # noqa: E731
                    else:
                        g = torch.randn_like(out)
                        run = lambda: torch.autograd.grad(fn(qq, kk, vv), (qq, kk, vv), g)  # noqa: E731
                    t = triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")
                    print(f"{B}x{N} {mode:6s} {name:12s} {flops / t / 1e9:6.0f} TFLOP/s  kept {frac:.3f}  "
                          f"{t:.3f} ms  max|out - sdpa| {err:.3g}", flush=True)
                except Exception as e:  # noqa: BLE001 (a probe reports every row)
                    print(f"{B}x{N} {mode} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
