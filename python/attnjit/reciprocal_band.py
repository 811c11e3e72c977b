"""The reciprocal band's call-time argument: reciprocal_band=(W, alpha) checked and alpha
made the float32 tensor [Hq] the kernel reads. Used by eager calls (compiled.py) and traced
by dynamo under torch.compile (torch_ops.py): torch ops and tensor attributes only."""
from __future__ import annotations

from .errors import ArgumentError


def check_reciprocal_band(band, q, k, torch) -> tuple:
    """(W, alpha) of a call's reciprocal_band=(W, alpha), checked against q and k, with alpha
    as the kernel reads it: a float32 tensor [Hq] on q's device (a float or a one-element
    tensor becomes a stride-0 [Hq] view, which keeps autograd: the backward writes d alpha
    as a dense [Hq] buffer and autograd's ExpandBackward sums it over the heads into the one
    element). Dynamo traces it too (torch_ops._call_plan): torch ops and attributes only."""
    if not isinstance(band, (tuple, list)) or len(band) != 2:
        got = f"a {type(band).__name__} of {len(band)}" if isinstance(band, (tuple, list)) else type(band).__name__
        raise ArgumentError(f"reciprocal_band must be a pair (W, alpha), got {got}: W the band width (an int >= 0), "
                            "alpha a float, a one-element tensor or a [Hq] tensor")
    width, alpha = band
    if isinstance(width, bool) or not isinstance(width, int) or width < 0:
        raise ArgumentError(f"reciprocal_band=(W, alpha) has W = {width!r}; the band width W is an int >= 0 "
                            "(0: the diagonal alone)")
    if q.dtype is not torch.float16 and q.dtype is not torch.bfloat16:
        raise ArgumentError(f"reciprocal_band: q, k, v are {q.dtype}; the reciprocal band runs on float16 / bfloat16 "
                            "only: convert them (q.half(), q.bfloat16()) or leave the band out")
    if q.shape[2] != k.shape[2]:
        raise ArgumentError(f"reciprocal_band adds s_ji = scale * <q_j, k_i> to s_ij, which needs self-attention: "
                            f"q has {q.shape[2]} rows and k has {k.shape[2]}; give q and k the same length (Nq == Nk)")
    Hq = q.shape[1]
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        return width, q.new_full((1,), float(alpha), dtype=torch.float32).expand(Hq)
    if not isinstance(alpha, torch.Tensor):
        raise ArgumentError(f"reciprocal_band's alpha must be a float or a torch.Tensor, got {type(alpha).__name__}")
    if alpha.device != q.device:
        raise ArgumentError(f"reciprocal_band's alpha is on {alpha.device} but q is on {q.device}; move it to the "
                            "same device")
    if alpha.dtype is torch.float16 or alpha.dtype is torch.bfloat16:
        alpha = alpha.float()  # the kernel reads f32; the conversion keeps autograd
    elif alpha.dtype is not torch.float32:
        raise ArgumentError(f"reciprocal_band's alpha has dtype {alpha.dtype}; it must be float32 (float16 and "
                            "bfloat16 are converted)")
    if alpha.numel() == 1 and tuple(alpha.shape) != (Hq,):
        alpha = alpha.reshape(1).expand(Hq)  # one weight for every head: stride 0
    elif alpha.dim() != 1 or alpha.shape[0] != Hq:
        raise ArgumentError(f"reciprocal_band's alpha has shape {tuple(alpha.shape)}; it must have one element or "
                            f"be [Hq] = [{Hq}]: one weight per query head")
    return width, alpha

