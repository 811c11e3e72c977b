"""fp64 reference on the GPU and the correctness check every implementation must pass.

The reference upcasts the same q, k, v (and small captured tensors) to float64 and computes
softmax(mask ? score_mod(scale * q k^T) : -inf) v over blocks of query rows, so that the
scores of one block (all batches and heads) stay under ~1 GiB and N = 16384 fits.
Rows without a kept key give 0 (docs/semantics.md).

Check: an element passes when |out - ref| <= atol + rtol * |ref| (reference/tolerance.h:
bf16 2e-2/2e-2, fp16 3e-3/3e-3); NaN or inf never passes. Reported: max_err = max |out - ref|,
rel_err = ||out - ref||_2 / ||ref||_2, ok, and bad (the number of failing elements).

Gradients (fwdbwd): reference_grad gives fp64 dq, dk, dv of sum(out * dO), chunked the same
way, and the gradients of the captured tensors that require grad (a pair bias, ALiBi
slopes), summed over the blocks. check_grads: an element of a gradient g passes when
|g - ref| <= t max|ref| + t |ref| (reference::gradient_tolerance: t = bf16 1.6e-2, fp16 2e-3,
fp32 2e-5; for a captured tensor's gradient, a sum over many score elements whose terms
cancel, reference::summed_gradient_tolerance: bf16 5e-2, fp16 1e-2, fp32 1e-4). Reported
per gradient: dq_max_err, dq_rel_err (and dk_, dv_, d<name>_), then grad_ok and grad_bad.
"""
from __future__ import annotations

import math

TOLERANCE = {"bf16": (2e-2, 2e-2), "fp16": (3e-3, 3e-3), "fp32": (1e-4, 1e-4)}
GRAD_TOLERANCE = {"bf16": 1.6e-2, "fp16": 2e-3, "fp32": 2e-5}
SUMMED_GRAD_TOLERANCE = {"bf16": 5e-2, "fp16": 1e-2, "fp32": 1e-4}
CHUNK_SCORES = 1 << 27  # fp64 scores per query block: 1 GiB


def upcast_caps(caps: dict) -> dict:
    """Small floating tensors to float64; large ones (a pair bias) stay as they are: adding
    a 16-bit value to a float64 score promotes it exactly, without an 8x copy. Detached: a
    captured tensor that requires grad (fwdbwd) must not tie the reference's blocks into an
    autograd graph (it kept every block's scores alive: 70 GiB at N 8192)."""
    import torch
    out = {}
    for k, t in caps.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() <= (1 << 20):
            out[k] = t.detach().double()
        elif isinstance(t, torch.Tensor):
            out[k] = t.detach()
        else:
            out[k] = t
    return out


def _keep(mask, causal, bi, hi, qi, kj):
    """The kept (query, key) pairs of a block of rows, or None when every pair is kept."""
    keep = None if mask is None else mask(bi, hi, qi, kj)
    if causal:
        c = kj <= qi
        keep = c if keep is None else keep & c
    return keep


def reference(q, k, v, score_mod=None, mask=None, causal=False, scale=None, chunk_scores=CHUNK_SCORES,
              score_conv=None, gate=None):
    """q [B, Hq, Nq, D], k/v [B, Hkv, Nk, D] -> float64 [B, Hq, Nq, Dv]. Never builds an
    autograd graph, whatever requires grad.

    score_conv: theta [Hq, c_q, c_k] (c_k odd), the score convolution of SEMANTICS.md
    section 3 with the mask rule of docs/score_convolution.md (causal by definition):
    S0 = s where keep0 = (j <= i and mask), else 0; C[i, j] = sum_{a, b} theta[h, a, b]
    S0[i - (c_q - 1) + a, j - (c_k - 1) / 2 + b] [mask(i, j') and mask(i', j)]; score_mod
    applies to C; -inf where not keep0. gate: [B, Hq, Nq, Dv] (broadcastable), out =
    sigmoid(gate) * O."""
    import torch
    with torch.no_grad():
        out = _reference(q, k, v, score_mod, mask, causal or score_conv is not None, scale, chunk_scores, score_conv)
        if gate is not None:
            out.mul_(torch.sigmoid(gate.detach().double()))
        return out


def _conv_scores(q64, kt, theta, mask, scale, bi, hi, kj, i0, i1):
    """C of query rows [i0, i1) (all batches and heads): the scores of the c_q - 1 rows
    above are recomputed (the halo), each of the c_q x c_k taps is one shifted slice of the
    zero-padded S0 (out-of-range rows and keys read 0)."""
    import torch
    import torch.nn.functional as F
    B, Hq, Nk = q64.shape[0], q64.shape[1], kt.shape[-1]
    c_q, c_k = theta.shape[1], theta.shape[2]
    p_k, h0, rows = (c_k - 1) // 2, max(0, i0 - (c_q - 1)), i1 - i0
    pad_top = (c_q - 1) - (i0 - h0)  # rows above row 0 of the sequence
    qh = torch.arange(h0, i1, device=q64.device).view(1, 1, i1 - h0, 1)
    full = (B, Hq, i1 - h0, Nk)
    m = None if mask is None else mask(bi, hi, qh, kj).expand(full)
    keep0 = (kj <= qh).expand(full) if m is None else m & (kj <= qh)
    s0 = torch.matmul(q64[:, :, h0:i1], kt).mul_(scale).masked_fill_(~keep0, 0.0)
    s0 = F.pad(s0, (p_k, p_k, pad_top, 0))
    if m is not None:  # mask(i', j) of the halo rows and mask(i, j') of the rows, padded
        m_rows = F.pad(m[:, :, i0 - h0:], (p_k, p_k))
        m_halo = F.pad(m, (0, 0, pad_top, 0))
    th = theta.detach().double()
    c = torch.zeros(B, Hq, rows, Nk, dtype=torch.float64, device=q64.device)
    for a in range(c_q):
        for b in range(c_k):
            tap = s0[:, :, a:a + rows, b:b + Nk]
            if m is not None:
                tap = tap * (m_rows[:, :, :, b:b + Nk] & m_halo[:, :, a:a + rows])
            c.add_(tap * th[:, a, b].view(1, Hq, 1, 1))
    return c


def _reference(q, k, v, score_mod, mask, causal, scale, chunk_scores, score_conv=None):
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
        if score_conv is None:
            s = torch.matmul(q64[:, :, i0:i1], kt).mul_(scale)
        else:
            s = _conv_scores(q64, kt, score_conv, mask, scale, bi, hi, kj, i0, i1)
        if score_mod is not None:
            s = score_mod(s, bi, hi, qi, kj).to(torch.float64).expand(B, Hq, i1 - i0, Nk)
        keep = _keep(mask, causal, bi, hi, qi, kj)
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


def reference_grad(q, k, v, dO, score_mod=None, mask=None, causal=False, scale=None,
                   chunk_scores=CHUNK_SCORES, captured=(), on_block_dt=None):
    """fp64 gradients of sum(out * dO), out = reference(q, k, v, ...): (dq [B, Hq, Nq, D],
    dk [B, Hkv, Nk, D], dv [B, Hkv, Nk, Dv]) and then one per tensor of `captured`. By hand,
    per block of query rows (as reference): P = softmax(S), dP = dO V^T, dS = P * (dP -
    rowsum(dO * O)), and dS through score_mod by autograd; dq of a block's rows is complete in
    the block, dk and dv add up over blocks. `captured`: float64 leaves that require grad,
    which score_mod reads (the caller builds score_mod over them); their gradients add up
    over blocks. on_block_dt(i0, i1, dt): called with each block's dL/dt [B, Hq, i1 - i0, Nk]
    (t = score_mod's output, 0 on masked keys), for gradients a caller sums itself: a
    [1, H, N, N] pair bias read at [0, h, i, j] gets dt summed over the batch, without the
    full-size gradient autograd would build per block. Other captured tensors are
    constants. Rows without a kept key have P = 0: zero gradients."""
    import torch
    B, Hq, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    groups = Hq // Hkv
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    dev = q.device
    q64, k64, v64, do64 = (t.detach().double() for t in (q, k, v, dO))
    if groups > 1:  # a query head's own copy of its K/V head; summed back over the group below
        k64 = k64.repeat_interleave(groups, dim=1)
        v64 = v64.repeat_interleave(groups, dim=1)
    dq = torch.empty_like(q64)
    dk = torch.zeros_like(k64)
    dv = torch.zeros_like(v64)
    captured = list(captured)
    d_captured = [torch.zeros_like(t, dtype=torch.float64) for t in captured]
    bi = torch.arange(B, device=dev).view(B, 1, 1, 1)
    hi = torch.arange(Hq, device=dev).view(1, Hq, 1, 1)
    kj = torch.arange(Nk, device=dev).view(1, 1, 1, Nk)
    rows = max(1, min(Nq, chunk_scores // (B * Hq * Nk)))
    kt, vt = k64.transpose(-1, -2), v64.transpose(-1, -2)
    for i0 in range(0, Nq, rows):
        i1 = min(Nq, i0 + rows)
        qc, doc = q64[:, :, i0:i1], do64[:, :, i0:i1]
        qi = torch.arange(i0, i1, device=dev).view(1, 1, i1 - i0, 1)
        s_raw = torch.matmul(qc, kt).mul_(scale)
        s = s_raw
        if score_mod is not None:
            with torch.enable_grad():  # the only autograd: dS through score_mod
                s_raw.requires_grad_(True)
                s = score_mod(s_raw, bi, hi, qi, kj).to(torch.float64).expand(B, Hq, i1 - i0, Nk)
        with torch.no_grad():
            keep = _keep(mask, causal, bi, hi, qi, kj)
            p = s.detach() if keep is None else s.detach().masked_fill(~keep, -math.inf)
            m = p.amax(dim=-1, keepdim=True)
            m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
            p = p.sub(m).exp_()
            l = p.sum(dim=-1, keepdim=True)
            p.div_(torch.where(l > 0, l, torch.ones_like(l)))       # P, 0 on masked keys
            o = torch.matmul(p, v64)
            delta = (doc * o).sum(dim=-1, keepdim=True)
            ds = torch.matmul(doc, vt).sub_(delta).mul_(p)          # dS: 0 wherever P is 0
            dv += torch.matmul(p.transpose(-1, -2), doc)
            del p, o
            if on_block_dt is not None:
                on_block_dt(i0, i1, ds)
        if score_mod is not None:  # a score_mod that ignores the score passes no gradient
            if s.requires_grad:
                got = torch.autograd.grad(s, [s_raw] + captured, ds, allow_unused=True)
                ds = got[0] if got[0] is not None else torch.zeros_like(ds)
                for acc, g in zip(d_captured, got[1:]):
                    if g is not None:
                        acc += g
                del got
            else:
                ds = torch.zeros_like(ds)
        del s, s_raw
        with torch.no_grad():
            ds.mul_(scale)
            dq[:, :, i0:i1] = torch.matmul(ds, k64)
            dk += torch.matmul(ds.transpose(-1, -2), qc)
        del ds
    if groups > 1:
        dk = dk.view(B, Hkv, groups, Nk, D).sum(dim=2)
        dv = dv.view(B, Hkv, groups, Nk, dv.shape[-1]).sum(dim=2)
    return (dq, dk, dv) + tuple(d_captured)


def conv_reference(q, k, v, theta):
    """SEMANTICS.md section 3 in float64 for q, k, v [B, H, N, D] and theta [H, c_q, c_k],
    one (batch, head) at a time (N x N scores of one head: 512 MiB at N 8192)."""
    import torch
    import torch.nn.functional as F
    with torch.no_grad():
        B, H, N, D = q.shape
        c_q, c_k = theta.shape[1], theta.shape[2]
        future = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
        out = torch.empty(B, H, N, v.shape[-1], dtype=torch.float64, device=q.device)
        for b in range(B):
            for h in range(H):
                s = (q[b, h].double() @ k[b, h].double().T) / math.sqrt(D)
                s = s.masked_fill(future, 0.0)
                s = F.pad(s, ((c_k - 1) // 2, (c_k - 1) // 2, c_q - 1, 0))[None, None]
                c = F.conv2d(s, theta[h].double()[None, None])[0, 0].masked_fill(future, -math.inf)
                out[b, h] = torch.softmax(c, dim=-1) @ v[b, h].double()
                del s, c
        return out


def conv_reference_grad(q, k, v, theta, dO):
    """fp64 gradients (dq, dk, dv, dtheta) of sum(conv_reference(q, k, v, theta) * dO), by
    autograd, one (batch, head) at a time (H == Hkv)."""
    import torch
    import torch.nn.functional as F
    B, H, N, D = q.shape
    c_q, c_k = theta.shape[1], theta.shape[2]
    future = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
    grads = [torch.empty(t.shape, dtype=torch.float64, device=q.device) for t in (q, k, v)]
    dtheta = torch.zeros(theta.shape, dtype=torch.float64, device=q.device)
    for b in range(B):
        for h in range(H):
            with torch.enable_grad():
                qh, kh, vh, th = (t.detach().double().requires_grad_(True) for t in (q[b, h], k[b, h], v[b, h], theta[h]))
                s = ((qh @ kh.T) / math.sqrt(D)).masked_fill(future, 0.0)
                s = F.pad(s, ((c_k - 1) // 2, (c_k - 1) // 2, c_q - 1, 0))[None, None]
                c = F.conv2d(s, th[None, None])[0, 0].masked_fill(future, -math.inf)
                out = torch.softmax(c, dim=-1) @ vh
                got = torch.autograd.grad(out, (qh, kh, vh, th), dO[b, h].double())
            for g, d in zip(grads, got[:3]):
                g[b, h] = d
            dtheta[h] += got[3]
            del s, c, out, got
    return tuple(grads) + (dtheta,)


def _band_scores(qh, kh, alpha_h, width):
    """T = s + alpha_h [0 <= i - j <= width] s^T, -inf above the diagonal (SEMANTICS.md
    section 4's causal band), for one (batch, head) in the dtype of qh."""
    import torch
    N, D = qh.shape
    s = (qh @ kh.T) / math.sqrt(D)
    i = torch.arange(N, device=qh.device)
    d = i.view(N, 1) - i.view(1, N)
    t = s + alpha_h * ((d >= 0) & (d <= width)).to(s.dtype) * s.T
    return t.masked_fill(d < 0, -math.inf)


def band_reference(q, k, v, alpha, width):
    """The causal reciprocal band in float64 for q, k, v [B, H, N, D] and alpha [H], one
    (batch, head) at a time."""
    import torch
    with torch.no_grad():
        B, H, N, _ = q.shape
        out = torch.empty(B, H, N, v.shape[-1], dtype=torch.float64, device=q.device)
        a = alpha.detach().double()
        for b in range(B):
            for h in range(H):
                t = _band_scores(q[b, h].double(), k[b, h].double(), a[h], width)
                out[b, h] = torch.softmax(t, dim=-1) @ v[b, h].double()
                del t
        return out


def band_reference_grad(q, k, v, alpha, width, dO):
    """fp64 gradients (dq, dk, dv, dalpha) of sum(band_reference(...) * dO), by autograd, one
    (batch, head) at a time (H == Hkv)."""
    import torch
    B, H, N, _ = q.shape
    grads = [torch.empty(t.shape, dtype=torch.float64, device=q.device) for t in (q, k, v)]
    dalpha = torch.zeros(alpha.shape, dtype=torch.float64, device=q.device)
    for b in range(B):
        for h in range(H):
            with torch.enable_grad():
                qh, kh, vh = (t.detach().double().requires_grad_(True) for t in (q[b, h], k[b, h], v[b, h]))
                ah = alpha[h].detach().double().requires_grad_(True)
                out = torch.softmax(_band_scores(qh, kh, ah, width), dim=-1) @ vh
                got = torch.autograd.grad(out, (qh, kh, vh, ah), dO[b, h].double())
            for g, d in zip(grads, got[:3]):
                g[b, h] = d
            dalpha[h] += got[3]
            del out, got
    return tuple(grads) + (dalpha,)


def latent_reference(q, k_lat, v_lat, w_qlat, w_vup, causal=True, chunk_scores=CHUNK_SCORES):
    """The latent projection (MLA, SEMANTICS.md section 4) in float64 for q [B, H, Nq, D],
    k_lat / v_lat [B, Nk, L] (one head shared by every query head), w_qlat [H, D, L] and w_vup
    [H, L, Dv]: per head, Q_lat = q_h w_qlat[h] (einsum, never rounded), softmax(Q_lat K^T /
    sqrt(L)) (keys j > i masked when causal), O_lat = P V, out_h = O_lat w_vup[h]. One head
    and a block of query rows at a time, so neither a [B, H, N, L] Q_lat nor more than
    chunk_scores scores exist at once; with causal a block reads only the keys up to its
    last row. Rows keep key 0 at least (Nq == Nk here): no empty row."""
    import torch
    with torch.no_grad():
        B, H, Nq, _ = q.shape
        Nk, L = k_lat.shape[-2], k_lat.shape[-1]
        k64, v64 = k_lat.detach().double(), v_lat.detach().double()
        out = torch.empty(B, H, Nq, w_vup.shape[-1], dtype=torch.float64, device=q.device)
        rows = max(1, min(Nq, chunk_scores // (B * Nk)))
        for h in range(H):
            q_lat = torch.einsum("bnd,dl->bnl", q[:, h].detach().double(), w_qlat[h].detach().double())
            wv = w_vup[h].detach().double()
            for i0 in range(0, Nq, rows):
                i1 = min(Nq, i0 + rows)
                nk = min(Nk, i1) if causal else Nk
                s = torch.matmul(q_lat[:, i0:i1], k64[:, :nk].transpose(-1, -2)).mul_(1.0 / math.sqrt(L))
                if causal:
                    i = torch.arange(i0, i1, device=q.device).view(-1, 1)
                    s.masked_fill_(torch.arange(nk, device=q.device).view(1, -1) > i, -math.inf)
                p = torch.softmax(s, dim=-1)
                del s
                out[:, h, i0:i1] = torch.matmul(torch.matmul(p, v64[:, :nk]), wv)
                del p
        return out


def latent_reference_grad(q, k_lat, v_lat, w_qlat, w_vup, dO, causal=True, chunk_scores=CHUNK_SCORES):
    """fp64 gradients (dq, dk_lat, dv_lat, dw_qlat, dw_vup) of sum(latent_reference(...) * dO)
    by autograd, one head and block of query rows at a time as latent_reference (rows are
    independent: each block adds its share to the latent K / V and to the head's weights)."""
    import torch
    B, H, Nq, _ = q.shape
    Nk, L = k_lat.shape[-2], k_lat.shape[-1]
    f64 = dict(dtype=torch.float64, device=q.device)
    dq = torch.empty(q.shape, **f64)
    dk, dv = torch.zeros(k_lat.shape, **f64), torch.zeros(v_lat.shape, **f64)
    dwq, dwv = torch.empty(w_qlat.shape, **f64), torch.empty(w_vup.shape, **f64)
    k64, v64 = k_lat.detach().double(), v_lat.detach().double()
    rows = max(1, min(Nq, chunk_scores // (B * Nk)))
    for h in range(H):
        wq = w_qlat[h].detach().double().requires_grad_(True)
        wv = w_vup[h].detach().double().requires_grad_(True)
        dwq_h, dwv_h = torch.zeros(wq.shape, **f64), torch.zeros(wv.shape, **f64)
        for i0 in range(0, Nq, rows):
            i1 = min(Nq, i0 + rows)
            nk = min(Nk, i1) if causal else Nk
            with torch.enable_grad():
                qb = q[:, h, i0:i1].detach().double().requires_grad_(True)
                kb = k64[:, :nk].clone().requires_grad_(True)
                vb = v64[:, :nk].clone().requires_grad_(True)
                s = torch.matmul(torch.matmul(qb, wq), kb.transpose(-1, -2)) * (1.0 / math.sqrt(L))
                if causal:
                    i = torch.arange(i0, i1, device=q.device).view(-1, 1)
                    s = s.masked_fill(torch.arange(nk, device=q.device).view(1, -1) > i, -math.inf)
                out = torch.matmul(torch.matmul(torch.softmax(s, dim=-1), vb), wv)
                got = torch.autograd.grad(out, (qb, kb, vb, wq, wv), dO[:, h, i0:i1].double())
            dq[:, h, i0:i1] = got[0]
            dk[:, :nk] += got[1]
            dv[:, :nk] += got[2]
            dwq_h += got[3]
            dwv_h += got[4]
            del s, out, got
        dwq[h], dwv[h] = dwq_h, dwv_h
    return dq, dk, dv, dwq, dwv


def reference_of(case, inp):
    """The fp64 reference of a case's inputs (impls.Inputs), with the variant's mods
    rebuilt over float64 copies of the small captured tensors (ALiBi slopes); an output
    gate (caps["gate"]) multiplies by sigmoid(gate)."""
    from mods import inline_variant
    import torch
    if case.variant == "mta_conv":
        return conv_reference(inp.q.detach(), inp.k.detach(), inp.v.detach(), inp.caps["theta"])
    if case.variant == "reciprocal_band":
        from cases import RA_W
        return band_reference(inp.q.detach(), inp.k.detach(), inp.v.detach(), inp.caps["alpha"], RA_W)
    if case.variant == "latent":
        return latent_reference(inp.q, inp.k, inp.v, inp.caps["w_qlat"], inp.caps["w_vup"], causal=True)
    var = inline_variant(case.variant, upcast_caps(inp.caps))
    out = reference(inp.q.detach(), inp.k.detach(), inp.v.detach(), var.score_mod, var.mask, var.causal)
    if "gate" in inp.caps:
        out.mul_(torch.sigmoid(inp.caps["gate"].detach().double()))
    return out


def reference_grads_of(case, inp):
    """The fp64 reference gradients of a fwdbwd case's inputs, for inp.dO: dq, dk, dv, then
    those of the captured tensors in inp.grad_caps (in its order), through float64 leaves."""
    from mods import inline_variant
    import torch
    if case.variant == "mta_conv":  # q, k, v, then theta (the one captured tensor trained)
        return conv_reference_grad(inp.q, inp.k, inp.v, inp.caps["theta"], inp.dO)
    if case.variant == "reciprocal_band":  # q, k, v, then alpha
        from cases import RA_W
        return band_reference_grad(inp.q, inp.k, inp.v, inp.caps["alpha"], RA_W, inp.dO)
    if case.variant == "latent":  # q, k_lat, v_lat, then w_qlat and w_vup
        return latent_reference_grad(inp.q, inp.k, inp.v, inp.caps["w_qlat"], inp.caps["w_vup"], inp.dO)
    caps = upcast_caps(inp.caps)
    leaves, summed, d_gate = [], {}, None
    dO = inp.dO
    if "gate" in inp.caps:
        # out = sigmoid(g) O: the attention's backward takes dO sigmoid(g); d g = dO O s (1 - s)
        sg = torch.sigmoid(inp.caps["gate"].detach().double())
        o = reference_of(case, inp) / sg
        d_gate = inp.dO.double() * o * sg * (1 - sg)
        dO = inp.dO.double() * sg
        del o
    for name in inp.grad_caps:
        if name == "gate":
            continue
        if (case.variant, name) in (("pair_bias", "bias"), ("msa_row", "pair")):
            # s + bias[0, h, i, j]: d bias[0, :, rows] = dt of the rows summed over the batch
            d = torch.zeros(inp.caps[name].shape, dtype=torch.float64, device=inp.q.device)
            summed[name] = d
            continue
        caps[name] = inp.caps[name].detach().double().requires_grad_(True)
        leaves.append(caps[name])
    var = inline_variant(case.variant, caps)

    def add_bias_rows(i0, i1, dt):
        for d in summed.values():
            d[0, :, i0:i1] += dt.sum(dim=0)
    grads = reference_grad(inp.q, inp.k, inp.v, dO, var.score_mod, var.mask, var.causal, captured=leaves,
                           on_block_dt=add_bias_rows if summed else None)
    by_leaf = dict(zip([n for n in inp.grad_caps if n not in summed and n != "gate"], grads[3:]))
    by_leaf["gate"] = d_gate
    return tuple(grads[:3]) + tuple(summed[n] if n in summed else by_leaf[n] for n in inp.grad_caps)


def _compare(out, ref, atol, rtol):
    """(max_err, rel_err, bad, nonfinite) of out against the float64 ref: max_err is None
    when not finite, rel_err None when out has a NaN/inf; NaN never passes."""
    import torch
    o = out.double()
    diff = (o - ref).abs_()
    finite = torch.isfinite(o)
    nonfinite = int((~finite).sum().item())
    bad = int((~(diff <= atol + rtol * ref.abs())).sum().item())  # NaN compares False -> bad
    max_err = float(diff.max().item()) if diff.numel() else 0.0
    num = torch.linalg.vector_norm(torch.where(finite, diff, torch.zeros_like(diff)))
    den = torch.linalg.vector_norm(ref)
    rel = float((num / den).item()) if den.item() > 0 else float(num.item())
    return (max_err if math.isfinite(max_err) else None), (rel if nonfinite == 0 else None), bad, nonfinite


def check(out, ref, dtype: str) -> dict:
    """Compare an implementation's output with the fp64 reference."""
    atol, rtol = TOLERANCE[dtype]
    if isinstance(out, (tuple, list)):
        out = out[0]
    if tuple(out.shape) != tuple(ref.shape):
        return dict(ok=False, max_err=None, rel_err=None, bad=None,
                    check_error=f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    max_err, rel, bad, nonfinite = _compare(out, ref, atol, rtol)
    res = dict(ok=(bad == 0 and nonfinite == 0), max_err=max_err, rel_err=rel, bad=bad)
    if nonfinite:
        res["nonfinite"] = nonfinite
    return res


GRAD_NAMES = ("dq", "dk", "dv")


def check_grads(grads, ref_grads, dtype: str, captured_names=()) -> dict:
    """Compare an implementation's (dq, dk, dv, then the captured tensors' gradients, named
    d<name> after captured_names) with reference_grad's. The absolute part of the tolerance
    scales with the largest reference gradient (as reference::gradient_tolerance: gradients
    have no natural unit, unlike O, a convex combination of V rows)."""
    res: dict = {}
    bad, errors = 0, []
    names = GRAD_NAMES + tuple("d" + n for n in captured_names)
    for i, (name, g, ref) in enumerate(zip(names, grads, ref_grads)):
        t = (GRAD_TOLERANCE if i < len(GRAD_NAMES) else SUMMED_GRAD_TOLERANCE)[dtype]
        res[f"{name}_max_err"] = res[f"{name}_rel_err"] = None
        if g is None or tuple(g.shape) != tuple(ref.shape):
            errors.append(f"{name}: " + ("no gradient" if g is None else
                                         f"shape {tuple(g.shape)} != reference {tuple(ref.shape)}"))
            continue
        g_max = float(ref.abs().max().item()) if ref.numel() else 0.0
        max_err, rel, n_bad, _ = _compare(g, ref, t * max(g_max, 1e-6), t)
        res[f"{name}_max_err"], res[f"{name}_rel_err"] = max_err, rel
        bad += n_bad
    res.update(grad_ok=(not errors and bad == 0), grad_bad=bad)
    if errors:
        res["grad_check_error"] = "; ".join(errors)
    return res
