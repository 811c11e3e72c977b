"""attnjit.latent_attention: the latent projection of Multi-head Latent Attention (MLA,
SEMANTICS.md section 4) fused into attnjit's forward kernel. Per query head h:
Q_lat = Q_h w_qlat[h], softmax over scale * Q_lat K_lat^T with the latent keys and values
shared by every head, O_h = (P V_lat) w_vup[h]; no [B, H, N, L] intermediate reaches memory.

The spec is the one attnjit.compile builds for score_mod / mask / causal / scale, plus the
"latent" entry (docs/spec_format.md): w_qlat and w_vup are structural tensors of q's dtype,
and K / V are the latent tensors viewed as [B, 1, Nk, L]. The trace, its variants and the
reads of captured tensors are CompiledAttention's; the call path is this file's, since K and
V are not [B, Hkv, Nk, Dqk]. Training runs the forward with LSE and the C library's latent
backward (api/latent_backward.h) through attnjit.autograd's Function: q, k_lat, v_lat,
w_qlat, w_vup, the band's alpha and captured tensors that require grad get .grad."""
from __future__ import annotations

from threading import get_ident

from . import autograd, compiled, dtypes
from ._recent import RecentCallables
from .compiled import CompiledAttention
from .errors import ArgumentError, InternalError
from .launcher import Launcher
from .reciprocal_band import check_reciprocal_band
from .spec_json import build as build_spec, latent_names, structural_name  # (attnjit.spec_json is api's)

_NAMES = ("q", "k_lat", "v_lat", "w_qlat", "w_vup")
_outside_graphs = None  # _call wrapped in torch.compiler.disable (made on first use under dynamo)


def latent_attention(q, k_lat, v_lat, w_qlat, w_vup, *, causal=False, scale=None, reciprocal_band=None,
                     score_mod=None, mask=None):
    """out [B, Hq, Nq, Dv] = per head h, softmax(mask ? score_mod(scale * (q_h w_qlat[h]) k_lat^T)
    : -inf) v_lat w_vup[h]: MLA with both projections fused into the kernel.

    q [B, Hq, Nq, Dqk]; k_lat, v_lat [B, Nk, L] (or [B, 1, Nk, L]), one latent head shared by
    every query head; w_qlat [Hq, Dqk, L] and w_vup [Hq, L, Dv] with contiguous rows starting
    on 16-byte boundaries (a contiguous tensor). CUDA tensors of one dtype on one device;
    q, k_lat, v_lat any strides with a contiguous last dimension. scale defaults to
    1/sqrt(L). causal, score_mod and mask act on the latent scores as in attnjit.attention.
    The kernels run float16 / bfloat16 with L a multiple of 8 up to what the C library
    builds (512 today, Dv up to 128 over L 256); it says so (SpecError) for anything else.
    reciprocal_band=(W, alpha) (RA + MLA, SEMANTICS.md section 4) is checked as in
    attnjit.attention (Nq == Nk; alpha a float, one element or [Hq]):
    scale * (q_i w_qlat[h]) k_lat_j gains alpha[h] * s_ji, s_ji = scale * (q_j w_qlat[h])
    k_lat_i, before score_mod, on the band 0 <= i - j <= W when causal (keys j > i masked),
    |i - j| <= W when not: its form follows causal. Up to L 256 it is fused into the latent
    kernel; over it the C library runs it in Q's space (K and V projected per head into a
    workspace the size of q, then the band's kernel). With grad mode on and any
    input requiring grad, the call records an autograd node: loss.backward() gives q, k_lat,
    v_lat, w_qlat, w_vup, alpha (a tensor that requires grad) and captured tensors that
    require grad their gradients, deterministically (the backward works per head in Q's
    space: docs/latent.md). The callable for (score_mod, mask, causal, scale) is cached like
    attnjit.attention's; a kernel is compiled per (dtype, Dqk, L, Dv, device, band). Under
    torch.compile it is a graph break."""
    if compiled._is_compiling():  # no torch op yet: dynamo runs the call outside its graph
        return _outside_graph()(q, k_lat, v_lat, w_qlat, w_vup, causal, scale, reciprocal_band, score_mod, mask)
    return _call(q, k_lat, v_lat, w_qlat, w_vup, causal, scale, reciprocal_band, score_mod, mask)


def _call(q, k_lat, v_lat, w_qlat, w_vup, causal, scale, reciprocal_band, score_mod, mask):
    return _cached(score_mod, mask, causal, scale)(q, k_lat, v_lat, w_qlat, w_vup, reciprocal_band)


def _outside_graph():
    global _outside_graphs
    if _outside_graphs is None:
        import torch
        _outside_graphs = torch.compiler.disable(_call)
    return _outside_graphs


def _cached(score_mod, mask, causal, scale) -> "LatentAttention":
    return _recent.get(score_mod, mask, bool(causal), scale)


def check_arguments(q, k_lat, v_lat, w_qlat, w_vup, torch) -> tuple:
    """(k, v, L): k_lat and v_lat as [B, 1, Nk, L] views, after checking the five tensors
    against each other (type, rank, dtype, device, shapes, a contiguous last dimension).
    Nothing here needs CUDA: a CPU tensor is refused later, at the device check. The
    projections' row alignment is the C library's check (at launch, an ArgumentError too)."""
    given = tuple(zip(_NAMES, (q, k_lat, v_lat, w_qlat, w_vup)))
    for name, t in given:
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(f"latent_attention: {name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4:
        raise ArgumentError(f"latent_attention: q has shape {tuple(q.shape)}; q is [B, Hq, Nq, Dqk]")
    for name, t in given[1:3]:
        if not (t.dim() == 3 or (t.dim() == 4 and t.shape[1] == 1)):
            raise ArgumentError(f"latent_attention: {name} has shape {tuple(t.shape)}; the latent keys and values "
                                "are [B, Nk, L], or [B, 1, Nk, L]: one head, shared by every query head")
    for name, t, what in (("w_qlat", w_qlat, "the query projection [Hq, Dqk, L]"),
                          ("w_vup", w_vup, "the output projection [Hq, L, Dv]")):
        if t.dim() != 3:
            raise ArgumentError(f"latent_attention: {name} has shape {tuple(t.shape)}; it is {what}")
    for name, t in given[1:]:
        if t.dtype is not q.dtype:
            raise ArgumentError(f"latent_attention: {name} has dtype {t.dtype} but q has {q.dtype}; q, k_lat, v_lat, "
                                "w_qlat and w_vup share one dtype")
        if t.device != q.device:
            raise ArgumentError(f"latent_attention: {name} is on {t.device} but q is on {q.device}; move it to q's "
                                "device")
    if tuple(k_lat.shape) != tuple(v_lat.shape):
        raise ArgumentError(f"latent_attention: k_lat {tuple(k_lat.shape)} and v_lat {tuple(v_lat.shape)} must have "
                            "the same shape [B, Nk, L]")
    B, Hq, Nq, Dqk = q.shape
    Bk, Nk, L = k_lat.shape[0], k_lat.shape[-2], k_lat.shape[-1]
    if Bk != B:
        raise ArgumentError(f"latent_attention: batch sizes differ: q {tuple(q.shape)}, k_lat {tuple(k_lat.shape)}; "
                            "dimension 0 must agree")
    if Nk == 0:
        raise ArgumentError("latent_attention: k_lat and v_lat have length 0: attention needs at least one key")
    where = f"(Hq and Dqk from q {tuple(q.shape)}, L from k_lat {tuple(k_lat.shape)})"
    if tuple(w_qlat.shape) != (Hq, Dqk, L):
        raise ArgumentError(f"latent_attention: w_qlat has shape {tuple(w_qlat.shape)}; it must be [Hq, Dqk, L] = "
                            f"[{Hq}, {Dqk}, {L}] {where}")
    if w_vup.shape[0] != Hq or w_vup.shape[1] != L:
        raise ArgumentError(f"latent_attention: w_vup has shape {tuple(w_vup.shape)}; it must be [Hq, L, Dv] = "
                            f"[{Hq}, {L}, Dv] {where}")
    for name, t in given:
        if t.stride(-1) != 1:
            raise ArgumentError(f"latent_attention: {name} has strides {t.stride()}: its last dimension must be "
                                "contiguous (stride 1)" + ("; other dimensions may have any stride" if name in
                                                           _NAMES[:3] else "; pass a contiguous tensor"))
    # a size-1 head dimension is always a view (no copy, whatever the strides)
    k = k_lat if k_lat.dim() == 4 else k_lat.view(B, 1, Nk, L)
    v = v_lat if v_lat.dim() == 4 else v_lat.view(B, 1, Nk, L)
    return k, v, L


class LatentAttention:
    """fn(q, k_lat, v_lat, w_qlat, w_vup, reciprocal_band=None) -> out; see latent_attention."""

    def __init__(self, score_mod=None, mask=None, causal=False, scale=None):
        self._attn = CompiledAttention(score_mod, mask, causal, scale)  # the trace and its variants

    def __call__(self, q, k_lat, v_lat, w_qlat, w_vup, reciprocal_band=None):
        torch = compiled._torch()
        k, v, L = check_arguments(q, k_lat, v_lat, w_qlat, w_vup, torch)
        variant, tensors, values = self._captured(q)
        alpha = band = None
        if reciprocal_band is not None:
            width, alpha = check_reciprocal_band(reciprocal_band, q, k, torch)
            band = (width, self._attn.causal)  # the band's causal form is the call's
        inputs = list(zip(_NAMES, (q, k_lat, v_lat, w_qlat, w_vup))) + [("reciprocal_band's alpha", alpha)]
        inputs += [(f"captured tensor '{t.name}'", value) for t, value in zip(variant.traced.tensors, values)]
        training = torch.is_grad_enabled() and any(t is not None and t.requires_grad for _, t in inputs)
        device = q.get_device()
        if device < 0:
            raise ArgumentError(f"latent_attention: q, k_lat, v_lat, w_qlat and w_vup must be CUDA tensors, got "
                                f"{q.device}")
        B, Hq, Nq, Dqk = q.shape
        Dv = w_vup.shape[2]
        key = ("latent", q.dtype, Dqk, L, Dv, device, get_ident(), band, training)  # beside CompiledAttention's
        launcher = variant.launchers.get(key)
        if launcher is None:
            launcher = variant.launchers[key] = self._make_launcher(variant, q, L, Dv, device, band, training)
        if B == 0 or Nq == 0 or Hq == 0:
            return q.new_empty((B, Hq, Nq, Dv))
        structural = list(zip(latent_names(variant.traced), (w_qlat, w_vup)))
        if alpha is not None:
            structural.append((structural_name(variant.traced, "reciprocal_band"), alpha))
        rows = list(zip((t.name for t in variant.traced.tensors), tensors))
        rows += [(name, (x.data_ptr(), dtypes.CODES[dtypes.name_of(x.dtype)], x.shape, x.stride()))
                 for name, x in structural]
        rows.sort(key=lambda r: r[0])  # the spec's order: by name
        scalars = [float(read()) for read in variant.scalar_reads]
        launch = lambda: launcher(q, k, v, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), device,
                                  [r[1] for r in rows], scalars)
        if not training:
            return launch()
        # Every differentiable input but q, k, v, alpha: by spec name, sorted (the backward's grads).
        by_name = dict(zip((t.name for t in variant.traced.tensors), values))
        by_name.update(zip(latent_names(variant.traced), (w_qlat, w_vup)))
        grad_names = tuple(sorted(n for n, t in by_name.items() if t.requires_grad))
        alpha_name = structural_name(variant.traced, "reciprocal_band") if alpha is not None else None
        asked = grad_names + ((alpha_name,) if alpha is not None and alpha.requires_grad else ())
        backward = autograd.backward_for(launcher.kernel.spec.to_json(), device, None, True, tuple(sorted(asked)))
        kept = {**by_name, **({alpha_name: alpha} if alpha is not None else {})}  # alive until the backward
        call = autograd.Call(backward, dtypes.CODES[dtypes.name_of(q.dtype)], device,
                             [(kept[name], *packed) for name, packed in rows], scalars, grad_names,
                             [by_name[n] for n in grad_names], (None, None, None, alpha_name))
        out, _ = autograd.attention_function().apply(call, launch, q, k, v, None, None, None, alpha,
                                                     *call.grad_values)
        return out

    def _captured(self, q) -> tuple:
        """(variant, the captured tensors as the launch packs them, their values): the trace
        whose guards hold, traced again (once) when a captured tensor changed dtype or rank."""
        attn = self._attn
        variant = attn._variant
        if variant.traced.guards and not variant.traced.guards_hold():
            variant = attn._current_variant()
        for retraced in (False, True):
            tensors, values = [], []
            for read, torch_dtype, ndim, code, t in variant.tensor_reads:
                value = read()
                if getattr(value, "dtype", None) is not torch_dtype or value.dim() != ndim:
                    if retraced:
                        raise ArgumentError(f"captured tensor '{t.name}' ({t.slot.where}) holds {value!r}; bind a "
                                            "CUDA torch tensor to it before calling")
                    break
                if value.device != q.device:
                    raise ArgumentError(f"captured tensor '{t.name}' ({t.slot.where}) is on {value.device} but q "
                                        f"is on {q.device}; move it to the same device")
                values.append(value)
                tensors.append((value.data_ptr(), code, value.shape, value.stride()) if ndim else
                               (value.data_ptr(), code, (1,), (1,)))  # a 0-dim tensor is read as [1]
            else:
                return variant, tensors, values
            variant = attn._current_variant()
        raise InternalError("latent_attention: the captured tensors matched no trace after tracing again")

    def _make_launcher(self, variant, q, L: int, Dv: int, device: int, band, with_lse: bool) -> Launcher:
        dtype = dtypes.name_of(q.dtype)
        if dtype not in dtypes.ATTENTION_DTYPES:
            raise ArgumentError(f"latent_attention: q has dtype {q.dtype}; attnjit takes float16, bfloat16 or float32")
        traced = variant.traced
        text = build_spec(traced, dtype=dtype, head_dim_qk=q.shape[3], head_dim_v=Dv, scale=self._attn.scale,
                               reciprocal_band=band, latent=L, return_lse=with_lse)
        kernel = compiled.kernel_for(text, device, None)  # SpecError: what the C library does not build
        expected = [(t.name, t.dtype, t.rank) for t in traced.tensors]
        expected += [(name, dtype, 3) for name in latent_names(traced)]
        if band is not None:
            expected.append((structural_name(traced, "reciprocal_band"), "f32", 1))
        expected.sort()
        if kernel.spec.tensors() != expected:
            raise InternalError(f"the compiled latent spec reads {kernel.spec.tensors()} but the call passes "
                                f"{expected}")
        return Launcher(kernel, dtype=dtype, head_dim_v=Dv, return_lse=with_lse,
                        tensor_ranks=[rank for _, _, rank in expected], num_scalars=len(traced.scalars))


_recent = RecentCallables(LatentAttention)  # latent_attention()'s callables
