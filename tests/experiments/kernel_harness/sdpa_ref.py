"""Side-by-side anchor on the device machine: PyTorch SDPA flash backend (FA2) at the
harness's speed shapes (bf16, B*N = 16384, H*D = 2048). Median of 30 after warm-up."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

def bench(D, N, causal):
    H = 2048 // D
    B = 16384 // N
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for _ in range(5):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        ts = []
        for _ in range(30):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
    ts.sort()
    ms = ts[len(ts) // 2]
    flop = 4 * B * H * N * N * D / (2 if causal else 1)
    return ms, flop / ms / 1e9

print("SDPA flash (FA2), bf16, TFLOP/s:", torch.cuda.get_device_name())
for D in (128, 64):
    for N in (1024, 4096, 16384):
        pm, pt = bench(D, N, False)
        cm, ct = bench(D, N, True)
        print(f"FA2 D={D:3d} N={N:5d} plain {pt:6.1f} causal {ct:6.1f} ({pm:.3f} ms / {cm:.3f} ms)")
