"""Per-kernel GPU times of one fwd+bwd step (torch.profiler), for attnjit's deterministic
and fast backward and SDPA's flash backend side by side: where the time of a training step
goes. Diagnostics only; speed claims come from bench_attention.py.

  python3 bench/tools/profile_backward.py [--d 128] [--n 4096] [--causal]
      [--tiles default,64x64x4x2,...]   backward tiles to try (block_m x block_n x warps x stages)
"""
import argparse
import collections

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import attnjit
from attnjit import autograd


def step_fn(impl, q, k, v, d_o, causal):
    if impl.startswith("attnjit"):
        fn = attnjit.compile(causal=causal, deterministic=impl == "attnjit")

        def step():
            fn(q, k, v).backward(d_o)
    else:
        def step():
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(d_o)
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--tiles", default="default")
    a = p.parse_args()
    h = 2048 // a.d
    b = 16384 // a.n
    q, k, v, d_o = (torch.randn(b, h, a.n, a.d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    runs = [(i, None) for i in ("attnjit", "attnjit_fast", "sdpa_flash")]
    for t in a.tiles.split(","):
        if t != "default":
            tile = dict(zip(("block_m", "block_n", "warps", "stages"), map(int, t.split("x"))))
            runs += [("attnjit", tile), ("attnjit_fast", tile)]
    plain_backward_for = autograd.backward_for
    for impl, tile in runs:
        # The backward's tile: autograd.backward_for takes one; compile() gives it none.
        autograd.backward_for = lambda js, dev, _t, det=True, tile=tile: plain_backward_for(js, dev, tile, det)
        try:
            step = step_fn(impl, q, k, v, d_o, a.causal)
            step()
        except Exception as e:  # an invalid tile for this kind: say so and go on
            print(f"== {impl} tile {tile}: {type(e).__name__}: {str(e)[:200]}")
            continue
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        reps = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                step()
            torch.cuda.synchronize()
        per = collections.defaultdict(float)
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per[e.name[:60]] += e.device_time / reps
        total = sum(per.values())
        print(f"== {impl} tile {tile} D{a.d} N{a.n} causal={a.causal}: {total / 1000:.3f} ms of kernels per step")
        for name, us in sorted(per.items(), key=lambda x: -x[1]):
            if us > 5:
                print(f"  {us / 1000:8.3f} ms  {name}")


if __name__ == "__main__":
    main()
