"""Forward TFLOP/s of attnjit's tile configurations on plain / causal bf16 attention, beside
SDPA cuDNN: which tile a default should be. Diagnostics only (each output is compared with
SDPA's, not with fp64); speed claims come from bench_attention.py.

  python3 bench/tools/tile_sweep.py --d 64 --tiles 128,128,12,2 128,128,12,3 128,64,12,4
      [--shapes 4x4096,1x16384] [--causal both]
"""
import argparse
import os
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import attnjit  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--tiles", nargs="+", required=True, help="block_m,block_n,warps,stages")
    p.add_argument("--shapes", default="4x4096,1x16384", help="BxN, B * N = 16384 in the harness")
    p.add_argument("--causal", default="both", choices=["no", "yes", "both"])
    a = p.parse_args()
    heads = 2048 // a.d  # the harness's H * D = 2048
    torch.manual_seed(0)
    for causal in {"no": [False], "yes": [True], "both": [False, True]}[a.causal]:
        for shape in a.shapes.split(","):
            b, n = map(int, shape.split("x"))
            q, k, v = (torch.randn(b, heads, n, a.d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            flops = 4 * b * heads * n * n * a.d * (0.5 if causal else 1.0)
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                t = triton.testing.do_bench(
                    lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    warmup=25, rep=100, return_mode="median")
            print(f"d{a.d} {'causal' if causal else 'plain'} {b}x{n}: cuDNN {flops / t / 1e9:.0f}", flush=True)
            for tile in a.tiles:
                tile_t = tuple(int(x) for x in tile.split(","))
                try:
                    fn = attnjit.compile(causal=causal, tile=dict(zip(("block_m", "block_n", "warps", "stages"), tile_t)))
                    out = fn(q, k, v)
                    err = (out.float() - ref.float()).abs().max().item()
                    t = triton.testing.do_bench(lambda: fn(q, k, v), warmup=25, rep=100, return_mode="median")
                    print(f"   tile {tile}: {flops / t / 1e9:.0f} TFLOP/s (max |out - cuDNN| {err:.3g})", flush=True)
                except Exception as e:  # noqa: BLE001 (a sweep reports every tile)
                    print(f"   tile {tile}: {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
