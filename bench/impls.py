"""The implementations under test, each built for one case as a zero-argument step().

    attnjit     attnjit.compile(score_mod, mask, causal, enable_gqa) called on (q, k, v)
    sdpa_flash  F.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION)
    sdpa_cudnn  the same under sdpa_kernel(CUDNN_ATTENTION); pair bias as a float attn_mask
    flex        torch.compile(flex_attention, dynamic=False), same score_mod, block mask
                from the same mask function (create_block_mask)
    naive       materialised scores in the input dtype, float32 softmax (the latent case:
                explicit matmuls and a softmax in the input dtype)
    unfused     the latent case as a PyTorch user writes it: einsum projection of q, SDPA
                over the latent K / V expanded across the heads (SDPA picks its backend,
                recorded as sdpa_backend), einsum up-projection

A step() returns the forward output (mode fwd), or runs forward and backward and returns the
forward output (mode fwdbwd). Variants a backend cannot express are skipped before any GPU
work (cases.runs); nothing is emulated. torch is imported inside the functions, so this
module imports on a machine without torch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import zlib
from typing import Callable

from cases import MLA_DV, MTA_C, RA_W, Case
from mods import Variant, and_masks, attnjit_variant, causal_mask, inline_variant


class Skip(Exception):
    """The implementation refuses this case (recorded as 'skipped' with the message)."""


@dataclasses.dataclass
class Inputs:
    q: object
    k: object
    v: object
    caps: dict              # captured tensors: slopes [H] f32, doc [B, N] i32, bias [1, H, N, N];
                            # the latent case's w_qlat [H, D, L] and w_vup [H, L, Dv] (k, v: [B, N, L])
    variant: Variant        # the inline mods over caps
    dO: object = None       # gradient of the output (fwdbwd)
    grad_caps: tuple = ()   # names of the captured tensors that require grad (fwdbwd): bias, pair, ...


@dataclasses.dataclass
class Built:
    step: Callable                      # one call: forward (and backward in fwdbwd)
    ctx: Callable = contextlib.nullcontext  # entered around every use of step
    setup_s: float = 0.0                # construction time before the first call
    extra: dict = dataclasses.field(default_factory=dict)


TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def torch_dtype(name: str):
    import torch
    return getattr(torch, TORCH_DTYPES[name])


def case_seed(case: Case) -> int:
    return zlib.crc32(f"{case.variant}/{case.dtype}/{case.B}/{case.H}/{case.Hkv}/{case.N}/{case.D}".encode())


def alibi_slopes(H: int):
    """ALiBi's geometric slopes 2^(-8 (h + 1) / H) (exact for H a power of two)."""
    import torch
    return torch.exp2(-8.0 * torch.arange(1, H + 1, dtype=torch.float32) / H).cuda()


def make_inputs(case: Case) -> Inputs:
    """Random q, k, v ~ N(0, 1) (never zeros) and the variant's captured tensors."""
    import torch
    from cases import doc_ids
    dt = torch_dtype(case.dtype)
    g = torch.Generator(device="cuda")
    g.manual_seed(case_seed(case))
    if case.variant == "latent":
        return _latent_inputs(case, dt, g)
    grad = case.mode == "fwdbwd"
    q = torch.randn(case.B, case.H, case.N, case.D, device="cuda", dtype=dt, generator=g)
    k = torch.randn(case.B, case.Hkv, case.N, case.D, device="cuda", dtype=dt, generator=g)
    v = torch.randn(case.B, case.Hkv, case.N, case.D, device="cuda", dtype=dt, generator=g)
    caps = {"B": case.B}
    if case.variant == "alibi_causal":
        caps["slopes"] = alibi_slopes(case.H)
    if case.variant == "document":
        caps["doc"] = torch.tensor(doc_ids(case.B, case.N), dtype=torch.int32, device="cuda")
    if case.variant == "pair_bias":
        caps["bias"] = torch.randn(1, case.H, case.N, case.N, device="cuda", dtype=dt, generator=g)
    if case.variant == "mta_conv":
        c_q, c_k = MTA_C
        theta = 0.3 * torch.randn(case.H, c_q, c_k, device="cuda", generator=g)
        theta[:, c_q - 1, (c_k - 1) // 2] += 1.0  # near the identity (the paper's init), not equal to it
        caps["theta"] = theta
    if case.variant == "reciprocal_band":
        # seed 000's alpha (0.5), a different one per head, trained in fwdbwd
        caps["alpha"] = 0.5 + 0.1 * torch.randn(case.H, device="cuda", generator=g)
    if case.variant in ("msa_row", "msa_col"):
        # AlphaFold: mask bias 1e9 (mask - 1) over keys (10% masked), gate logits like the output
        keep = torch.rand(case.B, 1, 1, case.N, device="cuda", generator=g) > 0.1
        caps["mask_bias"] = (1e9 * (keep.to(torch.float32) - 1)).to(dt)
        caps["gate"] = torch.randn(case.B, case.H, case.N, case.D, device="cuda", dtype=dt, generator=g)
        if case.variant == "msa_row":
            caps["pair"] = torch.randn(1, case.H, case.N, case.N, device="cuda", dtype=dt, generator=g)
    # The float captured tensors trained in fwdbwd. Not ALiBi's slopes: they are fixed by its
    # definition, and a model does not train them; training them put every implementation on
    # a path no ALiBi user takes (FlexAttention at 1 TFLOP/s, attnjit's two-pass backward for
    # input gradients). Their gradient is checked by tests/gpu (GradKind::Alibi).
    trained = ("bias", "pair", "gate", "theta", "alpha")
    if grad:  # every implementation gives their gradients too
        for name in trained:
            if name in caps:
                caps[name].requires_grad_(True)
    inp = Inputs(q, k, v, caps, inline_variant(case.variant, caps),
                 grad_caps=tuple(n for n in trained if n in caps and grad))
    if grad:
        for t in (inp.q, inp.k, inp.v):
            t.requires_grad_(True)
        inp.dO = torch.randn(case.B, case.H, case.N, case.D, device="cuda", dtype=dt, generator=g)
    return inp


def _latent_inputs(case: Case, dt, g) -> Inputs:
    """q [B, H, N, D] and the latent k, v [B, N, L] ~ N(0, 1); the projections w_qlat [H, D, L]
    and w_vup [H, L, Dv] ~ N(0, 1 / fan-in), so the latent queries, the scores and the output
    have unit scale (as tests/gpu/latent_test.cpp). fwdbwd: all five are trained (they require
    grad; w_qlat and w_vup are the captured tensors whose gradients are checked) against dO
    [B, H, N, Dv] ~ N(0, 1)."""
    import torch
    B, H, N, D, L = case.B, case.H, case.N, case.D, case.L

    def randn(*shape, std=1.0):
        return (std * torch.randn(*shape, device="cuda", generator=g)).to(dt)
    caps = {"B": B, "w_qlat": randn(H, D, L, std=D ** -0.5), "w_vup": randn(H, L, MLA_DV, std=L ** -0.5)}
    grad = case.mode == "fwdbwd"
    inp = Inputs(randn(B, H, N, D), randn(B, N, L), randn(B, N, L), caps, inline_variant(case.variant, caps),
                 grad_caps=("w_qlat", "w_vup") if grad else ())
    if grad:
        for t in (inp.q, inp.k, inp.v, caps["w_qlat"], caps["w_vup"]):
            t.requires_grad_(True)
        inp.dO = randn(B, H, N, MLA_DV)
    return inp


def _gated(forward: Callable, inp: Inputs) -> Callable:
    """forward, times sigmoid(gate) when the case has an output gate (for the implementations
    that cannot fuse it)."""
    gate = inp.caps.get("gate")
    if gate is None:
        return forward

    def gated():
        import torch
        return forward() * torch.sigmoid(gate)
    return gated


def _with_backward(forward: Callable, inp: Inputs, mode: str) -> Callable:
    if mode == "fwd":
        return forward

    def step():
        out = forward()
        o = out[0] if isinstance(out, (tuple, list)) else out
        o.backward(inp.dO)
        return o.detach()
    return step


# ---------------------------------------------------------------- attnjit
_attnjit = None


def attnjit_module():
    """import attnjit once; raises Skip with the reason when it cannot be imported."""
    global _attnjit
    if _attnjit is None:
        try:
            import attnjit
        except Exception as e:  # not built / library missing: every attnjit row says why
            raise Skip(f"import attnjit failed: {type(e).__name__}: {e}") from e
        _attnjit = attnjit
    return _attnjit


def build_attnjit(case: Case, inp: Inputs, opts, deterministic: bool = True, autotune: bool = False) -> Built:
    attnjit = attnjit_module()
    if case.variant == "latent":
        return _attnjit_latent(attnjit, inp, case.mode)
    var, source = attnjit_variant(case.variant, inp.caps, getattr(attnjit, "mods", None),
                                  use_library=not getattr(opts, "inline_mods", False))
    kw = {}
    if case.H != case.Hkv:
        kw["enable_gqa"] = True
    t0 = time.perf_counter()
    if not deterministic:
        kw["deterministic"] = False
    if autotune:
        kw["autotune"] = True
    fn = attnjit.compile(score_mod=var.score_mod, mask=var.mask, causal=var.causal, **kw)
    setup = time.perf_counter() - t0
    q, k, v = inp.q, inp.k, inp.v
    extras = {name: inp.caps[cap] for name, cap in (("gate", "gate"), ("score_conv", "theta")) if cap in inp.caps}
    if case.variant == "reciprocal_band":
        extras["reciprocal_band"] = (RA_W, inp.caps["alpha"])

    def forward():
        out = fn(q, k, v, **extras)
        if case.mode == "fwdbwd":
            o = out[0] if isinstance(out, (tuple, list)) else out
            if not o.requires_grad:
                raise Skip("attnjit's output does not require grad: no backward yet")
        return out
    return Built(_with_backward(forward, inp, case.mode), setup_s=setup,
                 extra={"mod_source": source})


def _attnjit_latent(attnjit, inp: Inputs, mode: str) -> Built:
    """The fused call: both projections inside the kernel, K / V [B, N, L] read once per head."""
    if not hasattr(attnjit, "latent_attention"):
        raise Skip("this attnjit has no latent_attention")
    q, k, v, wq, wv = inp.q, inp.k, inp.v, inp.caps["w_qlat"], inp.caps["w_vup"]

    def forward():
        try:
            return attnjit.latent_attention(q, k, v, wq, wv, causal=True)
        except attnjit.SpecError as e:  # what the kernels do not build: a refusal
            raise Skip(f"attnjit refused: {e.message}") from e
    return Built(_with_backward(forward, inp, mode))


# ---------------------------------------------------------------- SDPA
def build_sdpa(case: Case, inp: Inputs, opts, backend_name: str) -> Built:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[backend_name]
    kw = {}
    if case.H != case.Hkv:
        kw["enable_gqa"] = True
    if case.variant == "pair_bias":
        kw["attn_mask"] = inp.caps["bias"]  # [1, H, N, N], broadcast over the batch
    elif case.variant in ("msa_row", "msa_col"):
        caps = inp.caps
        mask = caps["mask_bias"]  # [B, 1, 1, N]
        kw["attn_mask"] = mask + caps["pair"] if "pair" in caps else mask  # a float mask (materialised sum)
    elif inp.variant.score_mod is not None or inp.variant.mask is not None:
        raise Skip("SDPA cannot express this variant without emulation")
    causal = inp.variant.causal
    q, k, v = inp.q, inp.k, inp.v

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
    return Built(_with_backward(_gated(forward, inp), inp, case.mode), ctx=lambda: sdpa_kernel(backend))


# ---------------------------------------------------------------- FlexAttention
_flex = None


def flex_compiled():
    """torch.compile(flex_attention, dynamic=False), made once, with dynamo's recompile
    limits raised so a new shape or mod recompiles instead of silently falling back to eager."""
    global _flex
    if _flex is None:
        import torch
        import torch._dynamo as dyn
        from torch.nn.attention.flex_attention import flex_attention
        for name, value in (("cache_size_limit", 1024), ("recompile_limit", 1024),
                            ("accumulated_cache_size_limit", 4096), ("accumulated_recompile_limit", 4096)):
            if hasattr(dyn.config, name):
                setattr(dyn.config, name, value)
        _flex = torch.compile(flex_attention, dynamic=False)
    return _flex


def flex_flash_missing() -> str | None:
    """Why FlexAttention's FLASH backend cannot run here (None when it can): it needs a torch
    whose flex_attention takes kernel_options' BACKEND, and FlashAttention's CuTe kernels."""
    import importlib.util
    import inspect
    from torch.nn.attention import flex_attention as fa
    if "BACKEND" not in inspect.getsource(fa):
        import torch
        return f"FlexAttention's FLASH backend is not in torch {torch.__version__} (no kernel_options BACKEND)"
    try:
        found = importlib.util.find_spec("flash_attn.cute") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return "FlexAttention's FLASH backend needs flash_attn.cute (FlashAttention's CuTe kernels), not installed"
    return None


def build_flex(case: Case, inp: Inputs, opts, backend: str | None = None) -> Built:
    from torch.nn.attention.flex_attention import create_block_mask
    flex = flex_compiled()
    var = inp.variant
    mask_fn = and_masks(var.mask, causal_mask if var.causal else None)
    t0 = time.perf_counter()
    block_mask = None
    if mask_fn is not None:
        # the document mask reads doc[b]: one block mask per batch row; the others broadcast
        B = case.B if case.variant == "document" else None
        block_mask = create_block_mask(mask_fn, B, None, case.N, case.N, device="cuda")
    setup = time.perf_counter() - t0
    kw = {}
    if case.H != case.Hkv:
        kw["enable_gqa"] = True
    if backend is not None:
        kw["kernel_options"] = {"BACKEND": backend}
    q, k, v, sm = inp.q, inp.k, inp.v, var.score_mod

    def forward():
        return flex(q, k, v, score_mod=sm, block_mask=block_mask, **kw)
    return Built(_with_backward(_gated(forward, inp), inp, case.mode), setup_s=setup,
                 extra={"block_mask_s": round(setup, 4)})


def build_flex_flash(case: Case, inp: Inputs, opts) -> Built:
    why = flex_flash_missing()
    if why:
        raise Skip(why)
    return build_flex(case, inp, opts, backend="FLASH")


# ---------------------------------------------------------------- naive
def build_naive(case: Case, inp: Inputs, opts) -> Built:
    import torch
    var = inp.variant
    q, k, v = inp.q, inp.k, inp.v
    dt = q.dtype
    scale = 1.0 / math.sqrt(case.D)
    B, H, N = case.B, case.H, case.N
    bi = torch.arange(B, device="cuda").view(B, 1, 1, 1)
    hi = torch.arange(H, device="cuda").view(1, H, 1, 1)
    qi = torch.arange(N, device="cuda").view(1, 1, N, 1)
    kj = torch.arange(N, device="cuda").view(1, 1, 1, N)
    groups = case.H // case.Hkv
    if case.variant == "mta_conv":
        return Built(_with_backward(_naive_mta(q, k, v, inp.caps["theta"], scale), inp, case.mode))
    if case.variant == "reciprocal_band":
        return Built(_with_backward(_naive_ra(q, k, v, inp.caps["alpha"], scale), inp, case.mode))
    if case.variant == "latent":
        return Built(_with_backward(_naive_latent(q, k, v, inp.caps["w_qlat"], inp.caps["w_vup"]), inp, case.mode))

    def forward():
        kk, vv = k, v
        if groups > 1:
            kk, vv = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        s = torch.matmul(q, kk.transpose(-1, -2)).mul_(scale)         # scores in the input dtype
        if var.score_mod is not None:
            s = var.score_mod(s, bi, hi, qi, kj).to(dt)
        keep = var.mask(bi, hi, qi, kj) if var.mask is not None else None
        if var.causal:
            keep = (kj <= qi) if keep is None else keep & (kj <= qi)
        if keep is not None:
            s.masked_fill_(~keep, -math.inf)
        p = torch.softmax(s, dim=-1, dtype=torch.float32)            # fp32 softmax
        del s
        return torch.matmul(p.to(dt), vv)
    return Built(_with_backward(_gated(forward, inp), inp, case.mode))


def _naive_ra(q, k, v, alpha, scale):
    """RA as a PyTorch user writes it (seed 000's intended math): two score matrices in the
    input dtype, the transposed one added inside the causal band, an fp32 softmax."""
    import torch

    def forward():
        N = q.shape[2]
        i = torch.arange(N, device=q.device)
        d = i.view(N, 1) - i.view(1, N)
        band = (d >= 0) & (d <= RA_W)
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        t = s + torch.where(band, alpha.to(s.dtype).view(1, -1, 1, 1) * s.transpose(-1, -2), torch.zeros_like(s))
        del s
        t = t.masked_fill(d < 0, -math.inf)
        p = torch.softmax(t, dim=-1, dtype=torch.float32)
        del t
        return torch.matmul(p.to(q.dtype), v)
    return forward


def _naive_latent(q, k_lat, v_lat, w_qlat, w_vup):
    """MLA written out: explicit matmuls and a softmax in the input dtype. Q_lat = q @ w_qlat
    (w_qlat [H, D, L] broadcast over the batch), scores Q_lat K^T with K [B, 1, N, L]
    broadcast over the heads, -inf above the diagonal, P V, @ w_vup."""
    import torch
    N, L = q.shape[2], k_lat.shape[-1]
    scale = 1.0 / math.sqrt(L)
    future = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
    k, v = k_lat.unsqueeze(1), v_lat.unsqueeze(1)

    def forward():
        q_lat = torch.matmul(q, w_qlat)
        s = torch.matmul(q_lat, k.transpose(-1, -2)).mul_(scale)
        del q_lat
        s.masked_fill_(future, -math.inf)
        p = torch.softmax(s, dim=-1)  # in the input dtype
        del s
        o_lat = torch.matmul(p, v)
        del p
        return torch.matmul(o_lat, w_vup)
    return forward


def build_unfused(case: Case, inp: Inputs, opts) -> Built:
    """The latent case as a PyTorch user writes it around SDPA: einsum projection of q to
    [B, H, N, L], SDPA over k / v [B, N, L] expanded across the heads (stride 0, no copy),
    einsum up-projection. SDPA picks its backend (flash takes head dims up to 256); the one it
    picks for these inputs is recorded as sdpa_backend."""
    import torch
    import torch.nn.functional as F
    q, wq, wv = inp.q, inp.caps["w_qlat"], inp.caps["w_vup"]
    B, H, N, L = case.B, case.H, case.N, case.L
    k = inp.k.unsqueeze(1).expand(B, H, N, L)
    v = inp.v.unsqueeze(1).expand(B, H, N, L)
    scale = 1.0 / math.sqrt(L)

    def forward():
        q_lat = torch.einsum("bhnd,hdl->bhnl", q, wq)
        o_lat = F.scaled_dot_product_attention(q_lat, k, v, is_causal=True, scale=scale)
        del q_lat
        return torch.einsum("bhnl,hlv->bhnv", o_lat, wv)
    with torch.no_grad():
        backend = _sdpa_choice(torch.einsum("bhnd,hdl->bhnl", q, wq), k, v, scale)  # SDPA's own q_lat
    return Built(_with_backward(forward, inp, case.mode), extra={"sdpa_backend": backend})


def _sdpa_choice(q, k, v, scale) -> str:
    """The backend SDPA dispatches these inputs to (torch's private _fused_sdp_choice, the
    function SDPA itself asks), or "unknown" where this torch lacks it."""
    import torch
    try:
        from torch.nn.attention import SDPBackend
        return SDPBackend(torch._fused_sdp_choice(q, k, v, None, 0.0, True, scale=scale)).name.lower()
    except Exception as e:  # a private API: record that it failed rather than fail the row
        return f"unknown ({type(e).__name__})"


def _naive_mta(q, k, v, theta, scale):
    """The MTA reference code's pre-softmax key-query convolution, as it writes it: scores in
    the input dtype, zero above the diagonal, F.conv2d over the padded scores (groups = H),
    -inf above the diagonal, fp32 softmax."""
    import torch
    import torch.nn.functional as F
    H, N = q.shape[1], q.shape[2]
    c_q, c_k = theta.shape[1], theta.shape[2]
    future = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
    weight = theta.to(q.dtype).unsqueeze(1)  # [H, 1, c_q, c_k]

    def forward():
        s = torch.matmul(q, k.transpose(-1, -2)).mul_(scale)
        s = s.masked_fill(future, 0.0)
        s = F.conv2d(F.pad(s, ((c_k - 1) // 2, (c_k - 1) // 2, c_q - 1, 0)), weight, groups=H)
        s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1, dtype=torch.float32)
        del s
        return torch.matmul(p.to(q.dtype), v)
    return forward


BUILDERS = {
    "attnjit": build_attnjit,
    "attnjit_fast": lambda c, i, o: build_attnjit(c, i, o, deterministic=False),
    "attnjit_tuned": lambda c, i, o: build_attnjit(c, i, o, autotune=True),
    "sdpa_flash": lambda c, i, o: build_sdpa(c, i, o, "sdpa_flash"),
    "sdpa_cudnn": lambda c, i, o: build_sdpa(c, i, o, "sdpa_cudnn"),
    "flex": build_flex,
    "flex_flash": build_flex_flash,
    "naive": build_naive,
    "unfused": build_unfused,
}


def build(impl: str, case: Case, inp: Inputs, opts) -> Built:
    return BUILDERS[impl](case, inp, opts)
