"""One fwd+bwd step each of attnjit's deterministic and fast backward and of SDPA's flash
backend, after a warm-up outside the profiled range: for a profiler such as Nsight Compute
(ncu --profile-from-start off), which then sees each backward kernel once.

  python3 bench/tools/one_backward_step.py [--d 128] [--n 4096] [--causal]
"""
import argparse

import torch
import torch.nn.functional as F

import attnjit


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--causal", action="store_true")
    a = p.parse_args()
    h, b = 2048 // a.d, 16384 // a.n
    q, k, v, d_o = (torch.randn(b, h, a.n, a.d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    steps = [lambda det=det: attnjit.compile(causal=a.causal, deterministic=det)(q, k, v).backward(d_o)
             for det in (True, False)]

    def sdpa():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=a.causal).backward(d_o)

    steps.append(sdpa)
    for s in steps:  # compile and warm up
        s()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for s in steps:
        s()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
