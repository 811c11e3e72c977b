"""The benchmark's case list: shapes, variants, FLOP counts and time estimates.

Pure Python (no torch), so the case list, the FLOP convention and the split into pieces
can be inspected and tested on a machine without a GPU:

    python3 bench/bench_attention.py --list [filters]

FLOP convention (../shared/ANCHORS.md, FlashAttention's): forward = 4 * B * Hq * Nq * Nk * D
times the fraction of (i, j) pairs the variant computes: 1 without a mask, exactly 0.5
for causal and every causal variant (ALiBi, softcap, GQA causal), and the exact fraction
of kept pairs for the sliding window and the document mask (counted once per case).
fwd+bwd = 3.5 x forward. Every implementation of a case is credited the same FLOPs.
The latent projection (MLA) adds its two projections to the attention's count (Case.flops).
"""
from __future__ import annotations

import dataclasses
import random
import re

DTYPES = ("bf16", "fp16")
MODES = ("fwd", "fwdbwd")
IMPLS = ("attnjit", "attnjit_fast", "sdpa_flash", "sdpa_cudnn", "flex", "flex_flash", "naive", "unfused")
# attnjit_fast: attnjit with compile(deterministic=False), the backward that sums dQ with
# atomics; fwdbwd only (its forward is attnjit's). unfused: the latent case's PyTorch pipeline
# (einsum projections around SDPA, which picks its backend); latent only. flex_flash:
# FlexAttention with kernel_options={"BACKEND": "FLASH"} (its FlashAttention CuTe kernels),
# recorded as skipped, with the reason, where the installed torch does not offer it.
ANCHORS = ("sdpa_flash", "sdpa_cudnn", "flex", "flex_flash")  # the implementations attnjit is judged against
# Run only when asked (--impl, or --autotune): attnjit_tuned, attnjit.compile(autotune=True) (its
# first call tunes the forward's tile for the shape bucket: docs/autotune.md).
OPT_IN_IMPLS = ("attnjit_tuned",)

PLAIN_N = (512, 1024, 2048, 4096, 8192, 16384)
VARIANT_N = (1024, 2048, 4096, 8192, 16384)
TOKENS = 16384            # B * N
WIDTH = 2048              # H * D for the plain shapes
PLAIN_D = (64, 128, 256)  # plain and causal; D 256 beside FlashAttention-3's published forward
WINDOW = 1024             # sliding window width (keys i-1023 .. i)
SOFTCAP = 30.0
DOC_SEED = 1234           # document lengths: random.Random(DOC_SEED + N)
PAIR_BIAS_MAX_GIB = 4.0   # the [1, H, N, N] bias tensor must fit in this
NAIVE_BYTES_PER_SCORE = 12  # naive's peak per score element (16-bit scores, fp32 softmax in/out)
NAIVE_MAX_GIB = 40.0
MTA_C = (6, 11)           # the MTA paper's kernel: c_q x c_k
MTA_N = (1024, 2048, 4096, 8192)
RA_W = 64                 # the reciprocal band's width (seed 000's ra_window)
MSA_HEADS, MSA_DIM = 8, 32    # AlphaFold's Evoformer MSA attention
MSA_S, MSA_N = (128, 512), (256, 768)  # MSA depth, residues
MLA_HEADS = (16, 128)     # query heads of the latent case (DeepSeek-V2/V3 run 128)
MLA_L = (256, 512)        # latent dims: DeepSeek's c_kv is 512, and 256 beside it
MLA_D, MLA_DV = 128, 128  # q's head dim (its non-rope part) and the output's
MLA_N = (1024, 2048, 4096, 8192)

# Variants: name -> (description, causal flag (the mask implies j <= i), D list, heads)
VARIANTS = {
    "plain": "no mask, no score_mod",
    "causal": "causal mask (top-left, j <= i)",
    "alibi_causal": "ALiBi (s + slope[h] * (j - i), slope[h] = 2^(-8(h+1)/H)) + causal",
    "softcap_causal": f"softcap {SOFTCAP:g} (c * tanh(s / c)) + causal",
    "sliding_window": f"sliding window {WINDOW} (0 <= i - j < {WINDOW})",
    "document": "document mask doc[b, i] == doc[b, j], random document lengths per batch row",
    "pair_bias": "pair bias s + bias[0, h, i, j], bias [1, H, N, N] in the input dtype",
    "gqa": "grouped-query attention, Hq = 32, Hkv = 8",
    "gqa_causal": "grouped-query attention, Hq = 32, Hkv = 8, causal",
    "mta_conv": f"Multi-Token Attention: score convolution {MTA_C[0]} x {MTA_C[1]} (theta [H, c_q, c_k]), causal",
    "reciprocal_band": f"reciprocal band (RA): s_ij + alpha[h] s_ji for 0 <= i - j <= {RA_W} (alpha [H]), causal",
    "msa_row": "AlphaFold MSA row attention: + pair bias [1, H, N, N] + mask bias [S, 1, 1, N], output gate; B = S",
    "msa_col": "AlphaFold MSA column attention: + mask bias [N_res, 1, 1, S], output gate; B = N_res, N = S",
    "latent": f"MLA latent projection: q [B, H, N, {MLA_D}] projected per head by w_qlat [H, {MLA_D}, L], attention "
              f"over the latent K / V [B, N, L] shared by every head, up-projected by w_vup [H, L, {MLA_DV}]; causal",
}
MSA_VARIANTS = ("msa_row", "msa_col")
CAUSAL_VARIANTS = {"causal", "alibi_causal", "softcap_causal", "gqa_causal", "mta_conv", "reciprocal_band", "latent"}


@dataclasses.dataclass(frozen=True)
class Case:
    variant: str
    dtype: str
    B: int
    H: int      # query heads
    Hkv: int
    N: int      # Nq == Nk
    D: int
    mode: str = "fwd"
    L: int = 0  # the latent dim of a latent case (K and V are [B, N, L]); 0 otherwise

    @property
    def causal(self) -> bool:
        """True when the variant's mask implies j <= i (the sliding window is causal-side)."""
        return self.variant in CAUSAL_VARIANTS or self.variant == "sliding_window"

    @property
    def name(self) -> str:
        latent = f"/L{self.L}" if self.L else ""
        return f"{self.variant}/{self.dtype}/{self.mode}/D{self.D}{latent}/H{self.H}x{self.Hkv}/B{self.B}xN{self.N}"

    @property
    def elem_bytes(self) -> int:
        return 2  # bf16 and fp16

    @property
    def scores(self) -> int:
        """Number of (b, h, i, j) score elements of the full problem."""
        return self.B * self.H * self.N * self.N

    def flop_fraction(self) -> float:
        return flop_fraction(self)

    def flops(self) -> float:
        if self.L:
            # latent: the attention at head dim L, 4 * B * H * N^2 * L (halved for causal), plus the
            # projections Q w_qlat and O_lat w_vup, 2 * B * H * N * (D * L + L * Dv)
            f = 4.0 * self.B * self.H * self.N * self.N * self.L * self.flop_fraction()
            f += 2.0 * self.B * self.H * self.N * (self.D * self.L + self.L * MLA_DV)
        else:
            f = 4.0 * self.B * self.H * self.N * self.N * self.D * self.flop_fraction()
        return f * (3.5 if self.mode == "fwdbwd" else 1.0)

    def case_skip(self) -> str | None:
        """A reason why no implementation runs this case, else None."""
        if self.variant == "pair_bias":
            gib = self.H * self.N * self.N * self.elem_bytes / 2**30
            if gib > PAIR_BIAS_MAX_GIB:
                return f"pair bias [1,{self.H},{self.N},{self.N}] is {gib:.0f} GiB > {PAIR_BIAS_MAX_GIB:g} GiB"
        return None

    def naive_peak_gib(self) -> float:
        # the reciprocal band's naive form holds a second score matrix (the transposed one)
        per_score = NAIVE_BYTES_PER_SCORE + (4 if self.variant == "reciprocal_band" else 0)
        return self.scores * per_score / 2**30

    def row(self) -> dict:
        """The case's keys of a result row."""
        row = dict(variant=self.variant, dtype=self.dtype, B=self.B, H=self.H, Hkv=self.Hkv,
                   Nq=self.N, Nk=self.N, D=self.D, causal=self.causal, mode=self.mode,
                   flop_fraction=self.flop_fraction())
        if self.L:
            row["L"] = self.L
        return row


def doc_lengths(B: int, N: int) -> list[list[int]]:
    """Random document lengths for each batch row (2 to 8 documents, cut points uniform),
    fixed seed per N so every run and every implementation sees the same documents."""
    rng = random.Random(DOC_SEED + N)
    out = []
    for _ in range(B):
        ndocs = rng.randint(2, 8)
        cuts = sorted(rng.sample(range(1, N), ndocs - 1))
        bounds = [0] + cuts + [N]
        out.append([bounds[i + 1] - bounds[i] for i in range(ndocs)])
    return out


def doc_ids(B: int, N: int) -> list[list[int]]:
    """doc[b][i]: the document index of token i in batch row b."""
    return [[d for d, n in enumerate(lens) for _ in range(n)] for lens in doc_lengths(B, N)]


def window_pairs(N: int, w: int) -> int:
    """Pairs (i, j) of an N x N problem with 0 <= i - j < w."""
    if N <= w:
        return N * (N + 1) // 2
    return w * (w + 1) // 2 + (N - w) * w


def flop_fraction(case: Case) -> float:
    if case.variant in CAUSAL_VARIANTS:
        return 0.5
    if case.variant == "sliding_window":
        return window_pairs(case.N, WINDOW) / (case.N * case.N)
    if case.variant == "document":
        lens = doc_lengths(case.B, case.N)
        return sum(n * n for row in lens for n in row) / (case.B * case.N * case.N)
    return 1.0


def all_cases(dtypes=DTYPES, modes=("fwd",)) -> list[Case]:
    cases = []
    for mode in modes:
        for dtype in dtypes:
            for variant in ("plain", "causal"):
                for D in PLAIN_D:
                    for N in PLAIN_N:
                        cases.append(Case(variant, dtype, TOKENS // N, WIDTH // D, WIDTH // D, N, D, mode))
            for variant in ("alibi_causal", "softcap_causal", "sliding_window", "document", "pair_bias"):
                for N in VARIANT_N:
                    cases.append(Case(variant, dtype, TOKENS // N, 16, 16, N, 128, mode))
            for variant in ("gqa", "gqa_causal"):
                for N in VARIANT_N:
                    cases.append(Case(variant, dtype, TOKENS // N, 32, 8, N, 64, mode))
            for N in MTA_N:
                cases.append(Case("mta_conv", dtype, TOKENS // N, 16, 16, N, 128, mode))
            for N in VARIANT_N:
                cases.append(Case("reciprocal_band", dtype, TOKENS // N, 16, 16, N, 128, mode))
            for S in MSA_S:
                for N in MSA_N:
                    cases.append(Case("msa_row", dtype, S, MSA_HEADS, MSA_HEADS, N, MSA_DIM, mode))
                    cases.append(Case("msa_col", dtype, N, MSA_HEADS, MSA_HEADS, S, MSA_DIM, mode))
            for H in MLA_HEADS:
                for L in MLA_L:
                    for N in MLA_N:
                        cases.append(Case("latent", dtype, TOKENS // N, H, 1, N, MLA_D, mode, L))
    return cases


QUICK = [("plain", 128, 1024), ("causal", 128, 1024), ("alibi_causal", 128, 1024),
         ("document", 128, 1024), ("pair_bias", 128, 1024), ("gqa_causal", 64, 1024)]


def select(cases, dtypes=None, variants=None, ns=None, quick=False, names=None):
    """The cases that pass every filter given; `names`: regular expressions, a case is kept when
    one of them matches its whole name (e.g. 'plain/bf16/fwd/D128/.*N16384')."""
    patterns = [re.compile(p) for p in names or []]
    out = []
    for c in cases:
        if patterns and not any(p.fullmatch(c.name) for p in patterns):
            continue
        if dtypes and c.dtype not in dtypes:
            continue
        if variants and c.variant not in variants:
            continue
        if ns and c.N not in ns:
            continue
        if quick and (c.variant, c.D, c.N) not in QUICK:
            continue
        out.append(c)
    return out


# ---- time estimates (seconds of wall time on an H100; calibrate from the printed actuals)
STARTUP_S = 20.0          # import torch/triton, CUDA context, cuBLAS/cuDNN handles
OVERHEAD_S = 25.0         # the per-call overhead rows (two flex compiles, 2000-call loops)
PER_CASE_S = 0.5          # inputs, dynamo reset, empty_cache, bookkeeping
TIMED_S = 0.45            # do_bench (25 ms warm-up + 100 ms) + first call + check + memory call
FLEX_COMPILE_S = 3.0      # torch.compile(flex_attention) per (variant, shape), block mask included
ATTNJIT_COMPILE_S = 1.2   # cold NVRTC compile, once per (variant, dtype, D) in a process
ATTNJIT_TUNE_S = 20.0     # attnjit_tuned: its candidates compiled and timed, once per case


def runs(case: Case, impl: str) -> str | None:
    """None when impl runs the case, else the reason it is skipped (decided before any GPU
    work; runtime refusals are recorded as they happen)."""
    skip = case.case_skip()
    if skip:
        return skip
    if impl == "attnjit_fast" and case.mode != "fwdbwd":
        return "attnjit_fast differs from attnjit in the backward only"
    if impl == "unfused" and case.variant != "latent":
        return "unfused is the latent case's PyTorch pipeline"
    if case.variant == "latent" and impl not in ("attnjit", "unfused", "naive"):
        return "the latent case's PyTorch pipeline is the unfused row (SDPA, which picks its backend)"
    if impl == "sdpa_flash" and case.variant not in ("plain", "causal", "gqa", "gqa_causal"):
        return "SDPA's flash backend takes no mask, bias or score_mod (not emulated)"
    if impl == "sdpa_cudnn" and case.variant not in ("plain", "causal", "gqa", "gqa_causal", "pair_bias",
                                                     *MSA_VARIANTS):
        return "SDPA's cuDNN backend: only is_causal and an additive attn_mask; this variant is not emulated"
    if case.variant == "mta_conv" and impl in ("flex", "flex_flash"):
        return "FlexAttention's score_mod is pointwise: it cannot convolve the score matrix"
    if case.variant == "reciprocal_band" and impl in ("flex", "flex_flash"):
        return "FlexAttention's score_mod is pointwise: it cannot add the transposed score s_ji"
    if impl == "naive" and case.naive_peak_gib() > NAIVE_MAX_GIB:
        return (f"naive would materialise {case.scores / 2**30:.1f} Gi scores "
                f"(~{case.naive_peak_gib():.0f} GiB peak > {NAIVE_MAX_GIB:g} GiB)")
    return None


def estimate_s(case: Case, impls=IMPLS, seen=None) -> float:
    """Estimated wall seconds of one case. `seen` (a set, updated) remembers which attnjit
    kernels a process already compiled."""
    t = PER_CASE_S
    if case.case_skip():
        return 0.01
    # fp64 reference: fp64 GEMMs at ~50 TFLOP/s plus ~12 elementwise passes over the scores
    t += 8.0 * case.B * case.H * case.N * case.N * (case.L or case.D) / 50e12 + case.scores * 1.2e-10
    fwdbwd = 3.0 if case.mode == "fwdbwd" else 1.0
    for impl in impls:
        if runs(case, impl):
            continue
        t += TIMED_S * fwdbwd
        if impl in ("flex", "flex_flash"):
            t += FLEX_COMPILE_S * fwdbwd
        if impl == "attnjit_tuned":
            t += ATTNJIT_TUNE_S
        if impl in ("attnjit", "attnjit_fast", "attnjit_tuned"):
            key = (impl, case.variant, case.dtype, case.D, case.mode)
            if seen is None or key not in seen:
                t += ATTNJIT_COMPILE_S
            if seen is not None:
                seen.add(key)
        if impl == "naive":
            # ~40 bytes of traffic per score at ~2.5 TB/s, ~8 calls (estimate, warm-up, reps)
            t += 8 * fwdbwd * case.scores * 40 / 2.5e12
    return t


def estimate_all(cases, impls=IMPLS) -> list[float]:
    seen: set = set()
    return [estimate_s(c, impls, seen) for c in cases]


def split_pieces(cases, n: int, impls=IMPLS) -> list[list[Case]]:
    """Cut the ordered case list into n contiguous pieces of about equal estimated time
    (contiguous keeps the cases of one variant together, so kernels compile once)."""
    est = estimate_all(cases, impls)
    total = sum(est)
    pieces: list[list[Case]] = [[] for _ in range(n)]
    acc = 0.0
    for c, t in zip(cases, est):
        idx = min(n - 1, int((acc + t / 2) / total * n)) if total > 0 else 0
        pieces[idx].append(c)
        acc += t
    return pieces


def parse_piece(text: str) -> tuple[int, int]:
    """'2/3' -> (2, 3), 1-based."""
    i, n = (int(x) for x in text.split("/"))
    if not 1 <= i <= n:
        raise ValueError(f"piece {text}: need 1 <= i <= n")
    return i, n
