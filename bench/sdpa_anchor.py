#!/usr/bin/env python3
"""Side-by-side anchor: PyTorch SDPA (flash and cuDNN backends) on the shapes that
bench_forward times, on the same GPU, in the same run. Writes JSON lines to stdout.

FLOP convention (ANCHORS.md): 4 * B * H * Nq * Nk * D, halved when causal."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

BACKENDS = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}


def main():
    gpu = torch.cuda.get_device_name()
    commit = sys.argv[1] if len(sys.argv) > 1 else "unknown"
    for d in (64, 128):
        h = 2048 // d if d == 64 else 16
        for n in (1024, 4096, 16384):
            b = 16384 // n
            for causal in (False, True):
                q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                for impl, backend in BACKENDS.items():
                    try:
                        with sdpa_kernel(backend):
                            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            fn()
                            ms = do_bench(fn, warmup=100, rep=500, return_mode="median")
                    except Exception as e:  # a backend may not support a shape
                        print(f"# {impl} D={d} N={n} causal={causal}: {e}", file=sys.stderr)
                        continue
                    flops = 4 * b * h * n * n * d / (2 if causal else 1)
                    print(json.dumps(dict(impl=impl, variant="causal" if causal else "plain", dtype="bf16",
                                          B=b, H=h, Hkv=h, Nq=n, Nk=n, D=d, causal=causal, mode="fwd",
                                          ms=ms, tflops=flops / ms / 1e9, gpu=gpu, commit=commit)), flush=True)


if __name__ == "__main__":
    main()
