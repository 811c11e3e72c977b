"""fp64 reference on the GPU and the correctness check every implementation must pass.

The reference upcasts the same q, k, v (and small captured tensors) to float64 and computes
softmax(mask ? score_mod(scale * q k^T) : -inf) v over blocks of query rows, so that the
scores of one block (all batches and heads) stay under ~1 GiB and N = 16384 fits.
Rows without a kept key give 0 (docs/semantics.md).

Check: an element passes when |out - ref| <= atol + rtol * |ref| (reference/tolerance.h:
bf16 2e-2/2e-2, fp16 3e-3/3e-3); NaN or inf never passes. Reported: max_err = max |out - ref|,
rel_err = ||out - ref||_2 / ||ref||_2, ok, and bad (the number of failing elements).
"""
from __future__ import annotations

import math

TOLERANCE = {"bf16": (2e-2, 2e-2), "fp16": (3e-3, 3e-3), "fp32": (1e-4, 1e-4)}
CHUNK_SCORES = 1 << 27  # fp64 scores per query block: 1 GiB


def upcast_caps(caps: dict) -> dict:
    """Small floating tensors to float64; large ones (a pair bias) stay as they are: adding
    a 16-bit value to a float64 score promotes it exactly, without an 8x copy."""
    import torch
    out = {}
    for k, t in caps.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() <= (1 << 20):
            out[k] = t.double()
        else:
            out[k] = t
    return out


def reference(q, k, v, score_mod=None, mask=None, causal=False, scale=None, chunk_scores=CHUNK_SCORES):
    """q [B, Hq, Nq, D], k/v [B, Hkv, Nk, D] -> float64 [B, Hq, Nq, Dv]."""
    import torch
    B, Hq, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    dev = q.device
    q64, k64, v64 = q.double(), k.double(), v.double()
    if Hkv != Hq:
        k64 = k64.repeat_interleave(Hq // Hkv, dim=1)
        v64 = v64.repeat_interleave(Hq // Hkv, dim=1)
    out = torch.empty(B, Hq, Nq, v.shape[-1], dtype=torch.float64, device=dev)
    bi = torch.arange(B, device=dev).view(B, 1, 1, 1)
    hi = torch.arange(Hq, device=dev).view(1, Hq, 1, 1)
    kj = torch.arange(Nk, device=dev).view(1, 1, 1, Nk)
    rows = max(1, min(Nq, chunk_scores // (B * Hq * Nk)))
    kt = k64.transpose(-1, -2)
    for i0 in range(0, Nq, rows):
        i1 = min(Nq, i0 + rows)
        qi = torch.arange(i0, i1, device=dev).view(1, 1, i1 - i0, 1)
        s = torch.matmul(q64[:, :, i0:i1], kt).mul_(scale)
        if score_mod is not None:
            s = score_mod(s, bi, hi, qi, kj).to(torch.float64).expand(B, Hq, i1 - i0, Nk)
        keep = None
        if mask is not None:
            keep = mask(bi, hi, qi, kj)
        if causal:
            c = kj <= qi
            keep = c if keep is None else keep & c
        if keep is not None:
            s = s.masked_fill(~keep, -math.inf)
        m = s.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(s - m)
        del s
        l = p.sum(dim=-1, keepdim=True)
        o = torch.matmul(p, v64) / torch.where(l > 0, l, torch.ones_like(l))
        out[:, :, i0:i1] = o
        del p, o
    return out


def reference_of(case, inp):
    """The fp64 reference of a case's inputs (impls.Inputs), with the variant's mods
    rebuilt over float64 copies of the small captured tensors (ALiBi slopes)."""
    from mods import inline_variant
    var = inline_variant(case.variant, upcast_caps(inp.caps))
    return reference(inp.q.detach(), inp.k.detach(), inp.v.detach(), var.score_mod, var.mask, var.causal)


def check(out, ref, dtype: str) -> dict:
    """Compare an implementation's output with the fp64 reference."""
    import torch
    atol, rtol = TOLERANCE[dtype]
    if isinstance(out, (tuple, list)):
        out = out[0]
    if tuple(out.shape) != tuple(ref.shape):
        return dict(ok=False, max_err=None, rel_err=None, bad=None,
                    check_error=f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o = out.double()
    diff = (o - ref).abs_()
    finite = torch.isfinite(o)
    nonfinite = int((~finite).sum().item())
    bad_mask = ~(diff <= atol + rtol * ref.abs())  # NaN compares False -> bad
    bad = int(bad_mask.sum().item())
    max_err = float(diff.max().item()) if diff.numel() else 0.0
    num = torch.linalg.vector_norm(torch.where(finite, diff, torch.zeros_like(diff)))
    den = torch.linalg.vector_norm(ref)
    rel = float((num / den).item()) if den.item() > 0 else float(num.item())
    res = dict(ok=(bad == 0 and nonfinite == 0), max_err=max_err if math.isfinite(max_err) else None,
               rel_err=rel if nonfinite == 0 else None, bad=bad)
    if nonfinite:
        res["nonfinite"] = nonfinite
    return res
