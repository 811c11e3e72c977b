"""fwd+bwd time at head dims over 128 (backward_fused in column halves): attnjit's
deterministic and fast backward beside SDPA's flash and cuDNN backends, bf16, B*N = 16384,
H = 2048 / D. Each prints its largest gradient difference from the flash backend's (relative to its largest).

  python3 bench/tools/wide_head_backward.py [--d 256] [--n 1024,4096] [--causal]

Prints one line per (impl, N): ms per fwd+bwd step (median of triton's do_bench) and
TFLOP/s at the fwd+bwd FLOP count (3.5 x 4 B H N^2 D; half of it causal).
"""
import argparse

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import attnjit


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--n", default="1024,4096")
    p.add_argument("--causal", action="store_true")
    a = p.parse_args()
    for n in (int(x) for x in a.n.split(",")):
        h, b = 2048 // a.d, max(1, 16384 // n)
        q, k, v, d_o = (torch.randn(b, h, n, a.d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_()

        def sdpa(backend):
            def step():
                with torch.nn.attention.sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, is_causal=a.causal).backward(d_o)
            return step

        impls = {  # the first sets the gradients the others are compared with
            "sdpa_flash": sdpa(torch.nn.attention.SDPBackend.FLASH_ATTENTION),
            "attnjit": lambda: attnjit.compile(causal=a.causal)(q, k, v).backward(d_o),
            "attnjit_fast": lambda: attnjit.compile(causal=a.causal, deterministic=False)(q, k, v).backward(d_o),
            "sdpa_cudnn": sdpa(torch.nn.attention.SDPBackend.CUDNN_ATTENTION),
        }
        want = None
        flop = 3.5 * 4 * b * h * n * n * a.d * (0.5 if a.causal else 1.0)
        for name, step in impls.items():
            try:
                for t in (q, k, v):
                    t.grad = None
                step()
                grads = [t.grad.float() for t in (q, k, v)]
                if want is None:
                    want = grads
                err = max(((g - w).abs().max() / w.abs().max()).item() for g, w in zip(grads, want))
                ms = do_bench(step, warmup=25, rep=100, grad_to_none=[q, k, v])
                print(f"D{a.d} N{n} B{b} H{h} {'causal' if a.causal else 'plain'} {name}: {ms:.3f} ms, "
                      f"{flop / ms / 1e9:.0f} TFLOP/s, max grad diff vs sdpa_flash {err:.2e}", flush=True)
            except Exception as e:  # a backend this torch lacks at this head dim
                print(f"D{a.d} N{n} {name}: not run ({type(e).__name__}: {str(e)[:120]})", flush=True)


if __name__ == "__main__":
    main()
