"""The public entry points: compile(), attention(), spec_json()."""
from __future__ import annotations

from . import compiled as _compiled
from . import spec_json as _spec_json
from . import torch_ops as _torch_ops
from ._recent import RecentCallables
from .compiled import CompiledAttention
from .trace import trace

_recent = RecentCallables(CompiledAttention)  # attention()'s callables


def compile(score_mod=None, mask=None, causal=False, scale=None, enable_gqa=False, return_lse=False,
            tile=None, deterministic=True, mainloop=None, autotune=None) -> CompiledAttention:  # noqa: A001
    """A reusable attention callable: fn(q, k, v) -> out, or (out, lse) with return_lse.

    score_mod(score, b, h, q_idx, kv_idx) -> new score and mask(b, h, q_idx, kv_idx) -> keep
    are traced here, once (errors in them are raised now). causal=True ANDs the top-left
    causal mask (q_idx >= kv_idx) with `mask`. scale defaults to 1/sqrt(Dqk). enable_gqa
    allows Hq to be a multiple of Hkv. tile optionally pins the kernel's tile configuration
    (block_m, block_n, warps, stages). deterministic=False lets the backward (autograd) sum
    dQ with fp32 atomics where that exists (fp16 / bf16, head dims 64 and 128): faster, but
    dQ's bits may change from run to run (with reciprocal_band=, also the band's sums; at head
    dims over 128 the band's backward is the deterministic two-pass one). mainloop picks the
    main loop of the forward and of the backward's key-tile kernel: None (attnjit's choice: on
    an H100 / H200 the Hopper loop, TMA + wgmma, where it carries the spec), 'sm80' or 'sm90'
    (an error where it cannot run the spec). autotune=True times the candidate tiles of the forward
    (and, in training, of the backward's key-tile kernel) on the first call of each shape bucket
    and keeps the fastest (docs/autotune.md; None: as the ATTNJIT_AUTOTUNE environment variable
    says). The kernel is compiled on the first call for each
    (dtype, head dims, device) and cached in the process (and on disk by attnjit).
    The callable also takes sinks=, gate=, score_conv= and reciprocal_band=: fn(q, k, v,
    sinks=t, gate=g, score_conv=theta, reciprocal_band=(W, alpha)) (see attention()); the
    band's causal form follows `causal`.
    """
    return CompiledAttention(score_mod, mask, causal, scale, enable_gqa, return_lse, tile, deterministic, mainloop,
                             autotune)


def attention(q, k, v, *, score_mod=None, mask=None, causal=False, scale=None, enable_gqa=False,
              return_lse=False, sinks=None, gate=None, score_conv=None, reciprocal_band=None):
    """out = softmax(mask ? score_mod(scale * q k^T) : -inf) v, like torch SDPA / FlexAttention.

    q [B, Hq, Nq, Dqk], k [B, Hkv, Nk, Dqk], v [B, Hkv, Nk, Dv]: CUDA tensors of one dtype
    (float16, bfloat16, float32), any strides with a contiguous last dimension. Returns out
    [B, Hq, Nq, Dv] in q's dtype, and with return_lse also lse [B, Hq, Nq] float32 (natural
    log). Runs on torch's current CUDA stream. The callable for these arguments is cached
    (by the identity of score_mod and mask), so calling again with the same functions does
    not trace again; use compile() in hot loops all the same.

    sinks: learnable attention sinks (gpt-oss style), a [Hq] float32 / float16 / bfloat16
    tensor of per-head logits that join every row's softmax denominator and take no value:
    P_ij = exp(t_ij) / (exp(sinks[h]) + sum_j' exp(t_ij')); lse includes the sink, and a row
    with no kept key gives out = 0, lse = sinks[h]. When sinks.requires_grad, loss.backward()
    fills sinks.grad (deterministic).

    gate: an output gate (AlphaFold's gated attention), logits g of q's dtype shaped like the
    output [B, Hq, Nq, Dv] or broadcastable to it: out = sigmoid(g) * softmax(...) v, fused
    into the kernel's epilogue; lse is the ungated softmax's. When g.requires_grad,
    loss.backward() fills g.grad.

    score_conv: Multi-Token Attention's key-query convolution, a kernel theta [Hq, c_q, c_k]
    (float32, float16 or bfloat16; c_q <= 8, c_k odd <= 15) convolved over the causally
    masked scores before softmax (docs/score_convolution.md); causal by definition, so
    causal= is not needed. A mask= (a document mask for packed sequences) also keeps the
    convolution's taps inside it: each document is convolved alone. score_mod then reads
    the convolved score. fp16 / bf16; gradients of q, k, v, theta (and sinks, gate) at every
    head dim (over 128 on sm_90 / sm_100 GPUs), and of score_mod's captured tensors read per
    element (a bias, or a pair bias broadcast over the batch), per query or per head, or as
    tables; not yet those read per key or broadcast over the heads (a clear error says so).

    reciprocal_band: (W, alpha), a reciprocal band of width W (an int >= 0, fixed per compiled
    kernel) that adds the transposed score inside the band before score_mod:
    T_ij = s_ij + alpha[h] * [band(i, j)] * s_ji with s_ji = scale * <q_j, k_i>. With
    causal=True the band is 0 <= i - j <= W (keys j > i masked), with causal=False |i - j| <= W.
    alpha: a Python float, a one-element tensor or a [Hq] tensor (one weight per query head),
    float32 (float16 / bfloat16 are converted), on q's device. Self-attention only (Nq == Nk),
    float16 / bfloat16 q, k, v, no score_conv. The band trains: loss.backward() gives q, k, v
    (and sinks, gate, captured tensors that require grad) their gradients through the band's
    s_ji terms, and alpha its gradient when alpha is a tensor that requires grad (a [Hq]
    tensor gets one per head; a one-element tensor, expanded to every head, gets the sum over
    the heads; a Python float is never differentiable), deterministic unless
    compile(..., deterministic=False) allows the fast backward. Training with the band: float16 /
    bfloat16, head dims up to 128 (a training call with a larger one raises SpecError).
    """
    if _compiled._is_compiling():  # torch.compile (dynamo) is tracing this call: the torch ops
        return _torch_ops.attention_compiled(q, k, v, score_mod, mask, causal, scale, enable_gqa, return_lse,
                                             (sinks, gate, score_conv, reciprocal_band))
    fn = _cached(score_mod, mask, causal, scale, enable_gqa, return_lse)
    return fn(q, k, v, sinks=sinks, gate=gate, score_conv=score_conv, reciprocal_band=reciprocal_band)


def _cached(score_mod, mask, causal, scale, enable_gqa, return_lse) -> CompiledAttention:
    return _recent.get(score_mod, mask, bool(causal), scale, bool(enable_gqa), bool(return_lse))


def spec_json(score_mod=None, mask=None, causal=False, scale=None, return_lse=False, *, dtype="bf16",
              head_dim: int = 128, head_dim_v: int | None = None, sinks_dtype: str | None = None,
              gate: bool = False, score_conv: tuple | None = None, reciprocal_band: tuple | None = None,
              latent: int | None = None) -> str:
    """The JSON spec (docs/spec_format.md) of a score_mod / mask for one dtype and head dims,
    without torch or a GPU: the text attnjit_spec_from_json reads. gate: with an output
    gate; score_conv: (c_q, c_k, kernel dtype) of a score convolution; reciprocal_band:
    (W, causal) of a reciprocal band (its alpha an f32 tensor [Hq]); latent: the latent dim
    L of a latent projection (what latent_attention() compiles; head_dim / head_dim_v are
    then q's and the output's)."""
    traced = trace(score_mod, mask, causal)
    return _spec_json.build(traced, dtype=dtype, head_dim_qk=head_dim,
                            head_dim_v=head_dim if head_dim_v is None else head_dim_v,
                            scale=scale, return_lse=return_lse, sinks_dtype=sinks_dtype, gate=gate,
                            score_conv=score_conv, reciprocal_band=reciprocal_band, latent=latent)
