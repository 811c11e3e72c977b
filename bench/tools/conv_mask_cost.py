"""What a mask costs the score convolution's forward: attnjit with and without a document
mask of equal-length documents (the same causal work when a document spans the whole
sequence) at the mta_conv shapes. Diagnostics only; speed claims come from
bench_attention.py.

  python3 bench/tools/conv_mask_cost.py [--n 1024,4096] [--docs 1,4,16] [--mode fwd|fwdbwd] [--fast]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402

import attnjit  # noqa: E402


def time_ms(fn, iters=20):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", default="1024,4096,8192")
    p.add_argument("--docs", default="1,4,16")
    p.add_argument("--h", type=int, default=16)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--mode", default="fwd", choices=["fwd", "fwdbwd"])
    p.add_argument("--fast", action="store_true", help="the backward's dQ in any order (deterministic=False)")
    args = p.parse_args()
    train = args.mode == "fwdbwd"
    torch.manual_seed(0)
    for n in (int(x) for x in args.n.split(",")):
        b = max(1, 16384 // n)
        q, k, v = (torch.randn(b, args.h, n, args.d, device="cuda", dtype=torch.bfloat16).requires_grad_(train)
                   for _ in range(3))
        theta = 0.3 * torch.randn(args.h, 6, 11, device="cuda")
        theta[:, 5, 5] += 1.0
        theta.requires_grad_(train)
        d_out = torch.randn_like(q)

        compiled = {}

        def step(mask=None):
            if mask not in compiled:
                compiled[mask] = attnjit.compile(mask=mask, deterministic=not args.fast)
            out = compiled[mask](q, k, v, score_conv=theta)
            if train:
                out.backward(d_out)

        base = time_ms(step)
        print(f"{args.mode} N {n} B {b}: no mask {base:.3f} ms")
        for docs in (int(x) for x in args.docs.split(",")):
            doc = (torch.arange(n, device="cuda") * docs // n).to(torch.int32)

            def same_document(bb, h, q_idx, kv_idx):
                return doc[q_idx] == doc[kv_idx]

            t = time_ms(lambda: step(same_document))
            # Causal FLOPs shrink with the documents: per-document work is n^2 / docs.
            print(f"  {docs} documents: {t:.3f} ms ({t / base:.2f}x the unmasked time)")


if __name__ == "__main__":
    main()
