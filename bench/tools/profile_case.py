"""Per-kernel GPU times of one harness case (bench/cases.py) for each implementation asked
for (torch.profiler, which sees attnjit's driver-API launches too): where a step's time
goes. Diagnostics only; speed claims come from bench_attention.py.

  python3 bench/tools/profile_case.py --variant msa_row --b 128 --n 768 [--h 8 --d 32]
      [--mode fwdbwd] [--impl attnjit,flex] [--steps 5]
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import cases as C  # noqa: E402
import impls  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--variant", required=True)
    p.add_argument("--b", type=int, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--h", type=int, default=8)
    p.add_argument("--d", type=int, default=32)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--mode", default="fwdbwd")
    p.add_argument("--impl", default="attnjit")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--timeline", action="store_true", help="also each kernel of the last step, in order")
    p.add_argument("--frozen", default="", help="captured tensors to take out of the gradients (comma list)")
    a = p.parse_args()
    case = C.Case(a.variant, a.dtype, a.b, a.h, a.h, a.n, a.d, a.mode)
    for impl in a.impl.split(","):
        inp = impls.make_inputs(case)
        for name in filter(None, a.frozen.split(",")):
            inp.caps[name].requires_grad_(False)
        built = impls.build(impl, case, inp, argparse.Namespace(inline_mods=False))
        with built.ctx():
            for _ in range(3):  # compile, autotune, warm caches
                built.step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(a.steps):
                    built.step()
                torch.cuda.synchronize()
        per = collections.defaultdict(lambda: [0.0, 0])
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per[e.name][0] += e.device_time / 1e3 / a.steps
                per[e.name][1] += 1
        total = sum(t for t, _ in per.values())
        print(f"== {impl} {case.name}: {total:.3f} ms of kernels a step")
        for name, (t, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
            print(f"  {t:8.3f} ms  x{n // a.steps:<3} {name[:110]}")
        if a.timeline:
            events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            events.sort(key=lambda e: e.time_range.start)
            print("  last step, in launch order:")
            for e in events[-len(events) // a.steps:]:
                print(f"  {e.device_time / 1e3:8.3f} ms  {e.name[:110]}")


if __name__ == "__main__":
    main()
