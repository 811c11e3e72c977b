// Kernel configurations: the one source of truth for which kernels exist, which tiles each
// (kind, main loop) accepts, how much shared memory they take and what each GPU allows.
// Plain constexpr C++ with no includes: the host includes it to choose, prune and check
// configurations (codegen/kernel_config.h adds printing and errors); NVRTC includes it so
// the kernels static_assert the same rules.
//
// A kernel is a main loop (how tiles are moved and multiplied: simt, sm80; next sm90) x a
// kind (what it computes: forward; next the backward and its pre/post-processing, decode)
// x a Variant of generated hooks. To add a kind or a main loop: extend the enum, give it a
// branch in smem_bytes() and why_config_invalid(), and (main loops) a minimum arch.
//
// Alignment the host must check before launching any kind (else: a user error, not a
// launch):
//   * q, k, v, o base pointers: 16-byte aligned (kOperandAlignBytes);
//   * every batch / head / sequence stride of q, k, v, o, times the element size, a
//     multiple of 16 bytes (strides of dimensions of extent 1 are never used);
//   * the head dimension is contiguous (stride 1);
//   * lse (when not null): 4-byte aligned, any strides.
#pragma once

// Host and NVRTC alike: under CUDA compilers these constexpr helpers are host+device (NVRTC
// rejects unannotated functions unless -default-device is given).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_HD __host__ __device__
#define ATTNJIT_HD_INLINE ATTNJIT_HD __forceinline__
#else
#define ATTNJIT_HD
#define ATTNJIT_HD_INLINE inline
#endif

namespace attnjit {

enum class ElemKind : int { f16 = 0, bf16 = 1, f32 = 2 };

// What the kernel computes. The backward (FlashAttention-2's algorithm: P and dS
// recomputed tile by tile) comes in two sequences:
//  two-pass (every main loop): backward_dq (one CTA per query tile: dQ, and the per-row
//    LSE2 and Delta = rowsum(dO * O) into a workspace), then backward_dkdv (one CTA per
//    KV tile: dK, dV). No additions across CTAs.
//  fused (sm80 loops; the default where it exists): backward_stats (per-row LSE2, Delta;
//    zeroes the fp32 dQ sums), backward_fused (one CTA per KV tile: dK, dV, and dQ added
//    to the sums: two products fewer), backward_dq_convert (dQ from the sums). The
//    additions go one CTA at a time per query tile in a fixed order (deterministic), or in
//    any order (the fast backward, opt-in: run-to-run bits of dQ may differ).
//  with an output gate (spec.gate), either sequence starts with backward_stats, which
//    also writes dO * sigmoid(gate) for the later kernels and the gate's gradient
//    (backward/args.h); the two-pass backward_dq recomputes the statistics it wrote.
//  either sequence, for a spec with attention sinks whose gradient is asked for, then
//    runs backward_sink_grad (twice: chunk sums, then per head: d sink_h = -sum_{b, i}
//    exp(sink_h - LSE_i) * Delta_i, in a fixed order from LSE, O and dO; deterministic;
//    no tiles and no main loop of its own).
//  the latent projection's backward (api/latent_backward.h) adds latent_gemm: batched
//    products C[z] = sum_k A B (projected K and V per head before, the weights' and the
//    latent tensors' gradients after the backward above), one CTA per C tile; sm80 only.
// Room for: decode.
enum class KernelKind : int {
    forward = 0,
    backward_dkdv = 1,
    backward_dq = 2,
    backward_stats = 3,
    backward_fused = 4,
    backward_dq_convert = 5,
    backward_sink_grad = 6,
    latent_gemm = 7,
};

ATTNJIT_HD constexpr bool is_backward(KernelKind k) {
    return k == KernelKind::backward_dkdv || k == KernelKind::backward_dq || k == KernelKind::backward_stats ||
           k == KernelKind::backward_fused || k == KernelKind::backward_dq_convert ||
           k == KernelKind::backward_sink_grad;
}
// The per-row kinds of the fast backward: no tiles of their own, block_m rows a CTA.
ATTNJIT_HD constexpr bool is_backward_rows(KernelKind k) {
    return k == KernelKind::backward_stats || k == KernelKind::backward_dq_convert;
}
// The kinds whose CTA owns a KV tile (block_n keys) and streams query tiles (block_m).
ATTNJIT_HD constexpr bool owns_keys(KernelKind k) {
    return k == KernelKind::backward_dkdv || k == KernelKind::backward_fused;
}

// How the kernel moves tiles and multiplies them.
enum class MainloopKind : int {
    simt = 0,  // fp32 FFMA, fp32-accurate; any arch
    sm80 = 1,  // fp16 / bf16: cp.async + ldmatrix + mma.sync; sm_80 and newer
    sm90 = 2,  // fp16 / bf16 forward: TMA + mbarriers + wgmma, warp-specialised; sm_90a only
};

struct TileConfig {
    int block_m;  // query rows per CTA
    int block_n;  // keys per inner-loop step
    int warps;    // warps per CTA
    int stages;   // shared-memory stages for K/V
};

// Which work item (query tile, head, batch) each CTA of a forward takes, and in what order
// (common/cta_order.cuh says what each order does and when it pays):
//   kOrderAuto: the kernel's own (CtaOrder: chunked by 16 MiB where tiles can be skipped,
//     else per head); the others: that order, whatever the Variant.
// 0 is the kernel's own so that a zeroed ForwardArgs keeps it.
enum : int {
    kOrderAuto = 0,
    kOrderPerHead = 1,
    kOrderChunked16 = 2,
    kOrderChunked4 = 3,
    kOrderChunked1 = 4,
    kOrderLast = kOrderChunked1,
    kOrderBatchInner = 8  // a flag beside the others, set by the sm90 loop itself (never chosen)
};

// The sm90 forward's grid: by_size, a persistent grid of one CTA an SM that takes the work items
// in turn where there are more items than SMs, else one CTA an item; or either, always.
enum class Sm90Grid : int { by_size = 0, persistent = 1, per_item = 2 };
constexpr Sm90Grid kSm90Grids[] = {Sm90Grid::by_size, Sm90Grid::persistent, Sm90Grid::per_item};

// How a forward's CTAs take their work: chosen at launch (ForwardArgs::cta_order, the grid's
// shape), so every schedule runs the same compiled kernel (config_id, and with it the kernel's
// cache key, leaves it out). The autotuner times the schedules of its fastest tile.
struct CtaSchedule {
    int order = kOrderAuto;
    Sm90Grid grid = Sm90Grid::by_size;
};
ATTNJIT_HD constexpr bool operator==(const CtaSchedule& a, const CtaSchedule& b) {
    return a.order == b.order && a.grid == b.grid;
}
ATTNJIT_HD constexpr bool operator!=(const CtaSchedule& a, const CtaSchedule& b) { return !(a == b); }

ATTNJIT_HD constexpr const char* cta_order_name(int order) {
    return order == kOrderAuto        ? "auto"
           : order == kOrderPerHead   ? "per_head"
           : order == kOrderChunked16 ? "chunked16"
           : order == kOrderChunked4  ? "chunked4"
           : order == kOrderChunked1  ? "chunked1"
                                      : "?";
}
ATTNJIT_HD constexpr const char* sm90_grid_name(Sm90Grid g) {
    return g == Sm90Grid::by_size ? "by_size" : g == Sm90Grid::persistent ? "persistent" : g == Sm90Grid::per_item ? "per_item" : "?";
}

// Everything that selects a kernel besides the Variant: travels from the plan through
// codegen::KernelSource to the compiled and loaded kernel.
struct KernelConfig {
    KernelKind kind;
    MainloopKind mainloop;
    ElemKind elem;  // Q, K, V, O element type
    int head_dim_qk;
    int head_dim_v;
    TileConfig tile;
    // Forward sm80 and backward_fused only: the score convolution's layout (Multi-Token
    // Attention, sm80/score_conv.cuh, sm80/score_conv_backward.cuh): operand tiles with
    // halo rows, the staged S0 (and dC) tiles and the Toeplitz fragments of the kernel.
    bool score_conv = false;
    // Forward only: score_mod's bias tile (a captured f16 / bf16 tensor read at
    // [..., q_idx, kv_idx], common/bias_tile.cuh) is copied tile by tile into shared memory
    // beside the K/V pipeline (sm80: cp.async, sm80/bias_tile.cuh; sm90: a bulk tensor copy
    // a stage, sm90/mainloop.cuh), rather than read element by element from global memory.
    bool bias_tile = false;
    // Forward, backward_dq, backward_dkdv and backward_fused sm80: the reciprocal band (RA,
    // sm80/reciprocal_band.cuh): K at the query tile's rows and Q at the key tile's rows
    // beside the pipeline.
    bool recip_band = false;
    // Forward sm80 only: the latent projection (MLA, sm80/latent.cuh), L > 0: the main loop runs
    // at head dim L over K, V [Nk x L]; head_dim_qk and head_dim_v stay Q's and O's (the
    // projections' other sides). 0: none.
    int latent = 0;
    // Forward sm80 and sm90 only: the launch-time schedule (CtaSchedule; its grid: sm90 only).
    CtaSchedule schedule{};
};

ATTNJIT_HD constexpr bool operator==(const TileConfig& a, const TileConfig& b) {
    return a.block_m == b.block_m && a.block_n == b.block_n && a.warps == b.warps && a.stages == b.stages;
}
ATTNJIT_HD constexpr bool operator!=(const TileConfig& a, const TileConfig& b) { return !(a == b); }
ATTNJIT_HD constexpr bool operator==(const KernelConfig& a, const KernelConfig& b) {
    return a.kind == b.kind && a.mainloop == b.mainloop && a.elem == b.elem && a.head_dim_qk == b.head_dim_qk &&
           a.head_dim_v == b.head_dim_v && a.tile == b.tile && a.score_conv == b.score_conv &&
           a.bias_tile == b.bias_tile && a.recip_band == b.recip_band && a.latent == b.latent &&
           a.schedule == b.schedule;
}
ATTNJIT_HD constexpr bool operator!=(const KernelConfig& a, const KernelConfig& b) { return !(a == b); }

ATTNJIT_HD constexpr int elem_bytes(ElemKind e) { return e == ElemKind::f32 ? 4 : 2; }

ATTNJIT_HD constexpr const char* elem_kind_name(ElemKind e) {
    return e == ElemKind::f16 ? "f16" : e == ElemKind::bf16 ? "bf16" : e == ElemKind::f32 ? "f32" : "?";
}
ATTNJIT_HD constexpr const char* kernel_kind_name(KernelKind k) {
    return k == KernelKind::forward         ? "forward"
           : k == KernelKind::backward_dkdv ? "backward_dkdv"
           : k == KernelKind::backward_dq   ? "backward_dq"
           : k == KernelKind::backward_stats ? "backward_stats"
           : k == KernelKind::backward_fused ? "backward_fused"
           : k == KernelKind::backward_dq_convert ? "backward_dq_convert"
           : k == KernelKind::backward_sink_grad ? "backward_sink_grad"
           : k == KernelKind::latent_gemm ? "latent_gemm"
                                            : "?";
}
ATTNJIT_HD constexpr const char* mainloop_kind_name(MainloopKind m) {
    return m == MainloopKind::simt ? "simt" : m == MainloopKind::sm80 ? "sm80" : m == MainloopKind::sm90 ? "sm90" : "?";
}

constexpr int kOperandAlignBytes = 16;

// Head dims (of Q/K and of V, independently): every multiple of 8 from 8 to 256. A
// KernelConfig holds the real ones (the tensors' last dimension); the tiled kernels compute
// at the tile head dim (below) with the columns past the real dim zero-filled on load and
// never stored. Multiples of 8 keep every row a whole number of 16-byte chunks for 16-bit
// types (the sm80 loops' cp.async) and of 4-float chunks for f32.
constexpr int kMinHeadDim = 8, kMaxHeadDim = 256, kHeadDimStep = 8;
ATTNJIT_HD constexpr bool head_dim_supported(int d) {
    return d >= kMinHeadDim && d <= kMaxHeadDim && d % kHeadDimStep == 0;
}
// The head dim the tiles are built for: the next of 32, 64, 96, 128, 256 at or above d (and
// 512 above 256: the latent dim of a latent projection only).
ATTNJIT_HD constexpr int tile_head_dim(int d) {
    return d <= 32 ? 32 : d <= 64 ? 64 : d <= 96 ? 96 : d <= 128 ? 128 : d <= 256 ? 256 : 512;
}
// The latent dims of a latent projection (KernelConfig::latent): multiples of 8 up to 512.
constexpr int kMaxLatentTileDim = 512;
ATTNJIT_HD constexpr bool latent_dim_supported(int l) {
    return l >= kMinHeadDim && l <= kMaxLatentTileDim && l % kHeadDimStep == 0;
}
// Warps that share a row group and split the latent tile's columns (sm80/mainloop.cuh): two
// over 256 columns, whose accumulator rows would not fit one warp's registers.
ATTNJIT_HD constexpr int latent_col_split(int l) { return tile_head_dim(l) > 256 ? 2 : 1; }

// backward_fused's tile head dims: 64, 128 or 256 (its warp grids split those evenly,
// sm80/backward_fused.cuh); head dims 8 to 32, 72 to 96 and 136 to 248 run padded to them.
ATTNJIT_HD constexpr int fused_tile_head_dim(int d) { return d <= 64 ? 64 : d <= 128 ? 128 : 256; }
// backward_fused's CTAs per key tile: at a tile head dim of 256 two, each accumulating half
// of the columns of dK, dV and dQ (the registers of d128) from the full-depth S and dP.
ATTNJIT_HD constexpr int fused_column_split(int dqk, int dv) {
    return fused_tile_head_dim(dqk) > 128 || fused_tile_head_dim(dv) > 128 ? 2 : 1;
}
// backward_fused's tile head dim of Q/K (qk) or of V: fused_tile_head_dim, but at least 128
// for Q/K under a column split (dQ's 4 column warps need 64 columns a half, in n8 pairs).
ATTNJIT_HD constexpr int fused_tile_head_dims(int dqk, int dv, bool qk) {
    const int t = fused_tile_head_dim(qk ? dqk : dv);
    return qk && fused_column_split(dqk, dv) > 1 && t < 128 ? 128 : t;
}
// The tile head dim of Q/K (qk) or of V of a kind: backward_fused's, or tile_head_dim.
ATTNJIT_HD constexpr int kernel_tile_head_dim(KernelKind kind, int dqk, int dv, bool qk) {
    return kind == KernelKind::backward_fused ? fused_tile_head_dims(dqk, dv, qk) : tile_head_dim(qk ? dqk : dv);
}

// Whether the kernel computes at padded tile head dims: the tiled kinds (the sm80 loops, the
// simt forward) at a real head dim that is not a tile head dim. The simt backward and the
// per-row kinds work element by element at the real dims.
ATTNJIT_HD constexpr bool head_dims_padded(const KernelConfig& c) {
    const bool tiled = c.kind == KernelKind::forward || (c.mainloop == MainloopKind::sm80 && !is_backward_rows(c.kind) &&
                                                         c.kind != KernelKind::backward_sink_grad);
    return tiled && (kernel_tile_head_dim(c.kind, c.head_dim_qk, c.head_dim_v, true) != c.head_dim_qk ||
                     kernel_tile_head_dim(c.kind, c.head_dim_qk, c.head_dim_v, false) != c.head_dim_v);
}

ATTNJIT_HD constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// ---- per-arch limits -------------------------------------------------------------------

// The most dynamic shared memory one block may opt into on sm_<sm> (sm = major * 10 +
// minor, e.g. 90 for sm_90a), in bytes; 0 for an arch attnjit does not know.
ATTNJIT_HD constexpr int max_dynamic_smem_bytes(int sm) {
    return sm == 80 || sm == 87             ? 163 * 1024
           : sm == 86 || sm == 89 || sm == 120 ? 99 * 1024
           : sm == 90 || sm == 100 || sm == 103 ? 227 * 1024
                                               : 0;
}
// The largest of them: a configuration above it runs nowhere.
constexpr int kMaxDynamicSmemBytes = 227 * 1024;

// The oldest arch a main loop runs on.
ATTNJIT_HD constexpr int min_sm(MainloopKind m) {
    return m == MainloopKind::sm90 ? 90 : m == MainloopKind::sm80 ? 80 : 70;
}
// The sm90 loop's wgmma and setmaxnreg exist on sm_90a alone (not on sm_100 and later).
ATTNJIT_HD constexpr bool runs_on(MainloopKind m, int sm) { return m == MainloopKind::sm90 ? sm == 90 : sm >= min_sm(m); }

// The sm90 forward: a producer warpgroup and two consumer warpgroups of 64 query rows, tile head
// dims of whole 64-column swizzle blocks (64, 128, 256; others run on the sm80 loop). At tile
// head dims of 64 a third consumer warpgroup (192 query rows, 16 warps) fits the registers:
// there a tile's softmax weighs twice as much against its products as at 128, and a third
// warpgroup keeps the tensor cores fed while two of them run it (FlashAttention-3's choice).
constexpr int kSm90Warps = 12;
ATTNJIT_HD constexpr int sm90_forward_warps(int block_m) { return 4 * (1 + block_m / 64); }
ATTNJIT_HD constexpr int sm90_forward_block_m(int warps) { return 64 * (warps / 4 - 1); }
// The sm90 forward's shapes: 128 query rows with 12 warps, 192 with 16 (other tiles are sm80's).
ATTNJIT_HD constexpr bool is_sm90_forward_tile(int block_m, int warps) {
    return (block_m == 128 || block_m == 192) && warps == sm90_forward_warps(block_m);
}
ATTNJIT_HD constexpr bool sm90_head_dims(int dqk, int dv) {
    return tile_head_dim(dqk) % 64 == 0 && tile_head_dim(dv) % 64 == 0 && tile_head_dim(dqk) <= 256 &&
           tile_head_dim(dv) <= 256;
}

// ---- shared memory ----------------------------------------------------------------------

// Scratch for the block-collective classify helpers (intervals.cuh): 16 bytes per warp,
// rounded up to 128 so the tiles after it stay 128-byte aligned.
ATTNJIT_HD constexpr int scratch_bytes(int warps) { return ceil_div(16 * warps, 128) * 128; }

// simt main loop: rows are padded by 4 floats (16 bytes) to spread banks.
constexpr int kSimtRowPad = 4;

// Dynamic shared memory of a configuration, exactly (each main loop static_asserts its
// layout against this). dqk, dv below are the tile head dims (tile_head_dim), except in the
// simt backward, which works element by element at the real ones:
//  forward sm80: scratch | Q [block_m x dqk] | K [stages][block_n x dqk] |
//                V [stages][block_n x dv]       (XOR-swizzled, no padding)
//  forward sm80 with bias_tile: the above | bias [block_m x block_n] (16-bit, XOR-swizzled;
//                one buffer: refilled after each step's score hooks, common/bias_tile.cuh)
//  forward sm90: sm90/mainloop.cuh's layout (header, Q, K and V stages; with bias_tile a bias
//                stage [block_m x block_n] 16-bit beside each, 128-byte swizzled 64-column blocks)
//  forward sm80 with recip_band: the above | K at the query rows [block_m x dqk] |
//                Q at the key rows [stages][block_n x dqk] (XOR-swizzled; the Q ring travels with K)
//  forward sm80 with latent L (dl = tile_head_dim(L)): scratch | Q_lat [block_m x dl] | then
//                one region, the largest of: K, V [stages][block_n x dl] (the main loop);
//                Q [block_m x dqk] and W_qlat[h] [dqk x min(dl, 256)] (the prologue, 256
//                columns at a time); W_vup[h] [dl x dv] (the epilogue) | with dl 512 (two
//                warps a row group, latent_col_split): the partial scores of every warp
//                [warps][16 rows a warp x block_n] (f32) | with recip_band (L up to 256): the
//                band's tiles at Q's head dim as above (the prologue also stages the latent K
//                at the query rows [block_m x dl], after W_qlat[h])
//  forward sm80 with score_conv: scratch | Q [(block_m + 16) x dqk] |
//                K [stages][(block_n + 16) x dqk] | V [stages][block_n x dv] |
//                S0 [(block_m + 16) x (block_n + 24)] f16 (row-major, unswizzled) |
//                Toeplitz fragments [8 x 3 x 32 lanes x 4 bytes] |
//                mask bits [(block_m + 16) x (ceil((block_n + 16) / 32) + 1)] (32-bit words)
//  forward simt: scratch | Q [block_m x (dqk+4)] | K [block_n x (dqk+4)] |
//                V [block_n x dv] | P [warps x block_n]   (floats)
//  backward simt (both kinds): scratch | Q [block_m x (dqk+1)] | dO [block_m x (dv+1)] |
//                K [block_n x (dqk+1)] | V [block_n x (dv+1)] | P, dS [block_m x (block_n+1)] |
//                LSE, Delta [block_m]   (floats)
//  backward_dkdv sm80: scratch | K, V [block_n x (dqk + dv)] |
//                [2 stages] Q, dO [block_m x (dqk + dv)] | [2 stages] LSE, Delta [block_m] (f32)
//  backward_dq sm80: scratch | Q, dO [block_m x (dqk + dv)] | [2 stages] K, V
//                [block_n x (dqk + dv)] | LSE, Delta [block_m] (f32)   (XOR-swizzled)
//  backward_dq sm80 with score_conv: scratch | Q [(block_m + 16) x dqk] | dO [block_m x dv] |
//                [2 stages] K [(block_n + 16) x dqk], V [block_n x dv] | LSE, Delta [block_m] |
//                S0, Toeplitz fragments and mask bits as in the forward
//  backward_fused sm80: backward_dkdv's with [stages] for [2 stages] | P, dS [block_m x block_n]
//                (stages: 2, or 1 at a tile head dim of 256)
//  backward_fused sm80 with recip_band: the above | K at the query rows [stages][block_m x dqk] |
//                Q at the key rows [block_n x dqk] (the streamed head's; the band-masked dS
//                goes into P's tile once dV's product has read it)
//  backward_fused sm80 with score_conv: scratch | K [(block_n + 32) x dqk] |
//                V [(block_n + 16) x dv] | [stages] Q [(block_m + 32) x dqk],
//                dO [(block_m + 16) x dv] | [stages] LSE, Delta [block_m + 16] (f32) |
//                P, dS [block_m x block_n] | S0 [(block_m + 32) x (block_n + 40)] f16 |
//                dC [(block_m + 16) x (block_n + 24)] f16 | 2 x Toeplitz fragments |
//                mask bits, dtheta corrections (score_conv_backward_mask_bytes)
//  latent_gemm: [stages] A, B tiles [(block_m + block_n) x kLatentGemmBlockK] (sm80/latent_gemm.cuh)
//  backward_stats, backward_dq_convert, backward_sink_grad: none (the last one's
//                block reduction uses one float per warp of static shared memory)
// The score convolution's Toeplitz B fragments: up to 8 query taps x 3 k8 steps x 32
// lanes x one 32-bit register.
// latent_gemm's k step (sm80/latent_gemm.cuh BK).
constexpr int kLatentGemmBlockK = 64;
constexpr int kScoreConvFragmentBytes = 8 * 3 * 32 * 4;
// Its most taps (c_q <= 8, c_k <= 15): one dtheta correction each under a mask.
constexpr int kScoreConvMaxTaps = 8 * 15;
// backward_fused's bits of the spec's mask over S0 ((block_m + 32) x (block_n + 32), a word
// past the keys) and its dtheta corrections (a float a tap), sm80/score_conv_backward.cuh;
// reserved for every convolution.
ATTNJIT_HD constexpr int score_conv_backward_mask_bytes(int block_m, int block_n) {
    return (block_m + 32) * ((block_n + 32 + 31) / 32 + 1) * 4 + kScoreConvMaxTaps * 4;
}
// The forward's bits of the spec's mask over the extended tile (a Variant with
// kScoreConvMask, sm80/score_conv.cuh); reserved for every convolution (under 3 KiB).
ATTNJIT_HD constexpr int score_conv_mask_bytes(int block_m, int block_n) {
    return (block_m + 16) * ((block_n + 16 + 31) / 32 + 1) * 4;
}

ATTNJIT_HD constexpr int smem_bytes(const KernelConfig& c) {
    const TileConfig& t = c.tile;
    const int dqk = kernel_tile_head_dim(c.kind, c.head_dim_qk, c.head_dim_v, true),
              dv = kernel_tile_head_dim(c.kind, c.head_dim_qk, c.head_dim_v, false);
    if (is_backward_rows(c.kind) || c.kind == KernelKind::backward_sink_grad) return 0;
    if (c.kind == KernelKind::latent_gemm) return t.stages * (t.block_m + t.block_n) * kLatentGemmBlockK * elem_bytes(c.elem);
    if (c.kind == KernelKind::backward_fused && c.score_conv) {
        const int bm = t.block_m, bn = t.block_n;
        return scratch_bytes(t.warps) +
               elem_bytes(c.elem) *
                   ((bn + 32) * dqk + (bn + 16) * dv + t.stages * ((bm + 32) * dqk + (bm + 16) * dv) + 2 * bm * bn) +
               t.stages * 2 * 4 * (bm + 16) + 2 * ((bm + 32) * (bn + 40) + (bm + 16) * (bn + 24)) +
               2 * kScoreConvFragmentBytes + score_conv_backward_mask_bytes(bm, bn);
    }
    if (c.kind == KernelKind::backward_dq && c.score_conv)
        return scratch_bytes(t.warps) +
               elem_bytes(c.elem) * ((t.block_m + 16) * dqk + t.block_m * dv + 2 * ((t.block_n + 16) * dqk + t.block_n * dv)) +
               2 * 4 * t.block_m + 2 * (t.block_m + 16) * (t.block_n + 24) + kScoreConvFragmentBytes +
               score_conv_mask_bytes(t.block_m, t.block_n);
    // The reciprocal band in the two-pass backward: backward_dq keeps K at its query rows and
    // copies Q at the key rows with each K/V stage; backward_dkdv copies both with each Q/dO
    // stage (the Q rows at its keys are the streamed head's).
    if (c.recip_band && c.kind == KernelKind::backward_dq)
        return scratch_bytes(t.warps) + elem_bytes(c.elem) * (t.block_m + 2 * t.block_n) * (dqk + dv) +
               2 * 4 * t.block_m + elem_bytes(c.elem) * (t.block_m + 2 * t.block_n) * dqk;
    if (c.recip_band && c.kind == KernelKind::backward_dkdv)
        return scratch_bytes(t.warps) + elem_bytes(c.elem) * (t.block_n + t.stages * t.block_m) * (dqk + dv) +
               t.stages * 2 * 4 * t.block_m + elem_bytes(c.elem) * t.stages * (t.block_m + t.block_n) * dqk;
    if (c.latent > 0 && c.kind == KernelKind::forward) {
        const int dl = tile_head_dim(c.latent), pipeline = t.stages * t.block_n * 2 * dl;
        const int prologue = t.block_m * dqk + dqk * (dl < 256 ? dl : 256) + (c.recip_band ? t.block_m * dl : 0),
                  epilogue = dl * dv;
        const int region = pipeline > prologue ? (pipeline > epilogue ? pipeline : epilogue)
                                               : (prologue > epilogue ? prologue : epilogue);
        const int split = latent_col_split(c.latent);
        return scratch_bytes(t.warps) + elem_bytes(c.elem) * (t.block_m * dl + region) +
               (split > 1 ? split * t.block_m * t.block_n * 4 : 0) +
               (c.recip_band ? elem_bytes(c.elem) * (t.block_m + t.stages * t.block_n) * dqk : 0);
    }
    if (is_backward(c.kind) && c.mainloop == MainloopKind::sm80)
        return owns_keys(c.kind)
                   ? scratch_bytes(t.warps) + elem_bytes(c.elem) * (t.block_n + t.stages * t.block_m) * (dqk + dv) +
                         t.stages * 2 * 4 * t.block_m +
                         (c.kind == KernelKind::backward_fused ? 2 * elem_bytes(c.elem) * t.block_n * t.block_m : 0) +
                         // backward_fused with the band: Q at its key rows (one head at a time) and K at
                         // the query rows with each Q/dO stage; the band-masked dS reuses P's tile.
                         (c.kind == KernelKind::backward_fused && c.recip_band
                              ? elem_bytes(c.elem) * (t.block_n + t.stages * t.block_m) * dqk
                              : 0)
                   : scratch_bytes(t.warps) + elem_bytes(c.elem) * (t.block_m + 2 * t.block_n) * (dqk + dv) +
                         2 * 4 * t.block_m;
    if (c.mainloop == MainloopKind::sm90 && owns_keys(c.kind))  // header + slack, K and V,
        return 2048 + elem_bytes(c.elem) * (t.block_n + t.stages * t.block_m) * (dqk + dv) +  // Q and dO stages,
               t.stages * 2 * 4 * t.block_m +                                                 // LSE2 and Delta,
               (c.kind == KernelKind::backward_fused  // two dS^T, dQ_partial at the real head dim
                    ? 2 * elem_bytes(c.elem) * t.block_n * t.block_m + 4 * t.block_m * c.head_dim_qk
                    : 0);
    if (c.mainloop == MainloopKind::sm90)  // 1 KiB header (barriers, tile ring) + 1 KiB alignment slack
        return 2048 + elem_bytes(c.elem) * (t.block_m * dqk + t.stages * t.block_n * (dqk + dv)) +
               (c.bias_tile ? 2 * t.stages * t.block_m * t.block_n : 0);  // a 16-bit bias tile a stage
    if (is_backward(c.kind))  // simt: element by element, at the real head dims (no padding)
        return scratch_bytes(t.warps) + 4 * ((t.block_m + t.block_n) * (c.head_dim_qk + 1 + c.head_dim_v + 1) +
                                             2 * t.block_m * (t.block_n + 1) + 2 * t.block_m);
    return c.mainloop == MainloopKind::simt
               ? scratch_bytes(t.warps) + 4 * (t.block_m * (dqk + kSimtRowPad) + t.block_n * (dqk + kSimtRowPad) +
                                               t.block_n * dv + t.warps * t.block_n)
           : c.score_conv
               ? scratch_bytes(t.warps) +
                     elem_bytes(c.elem) * ((t.block_m + 16) * dqk + t.stages * ((t.block_n + 16) * dqk + t.block_n * dv)) +
                     2 * (t.block_m + 16) * (t.block_n + 24) + kScoreConvFragmentBytes +
                     score_conv_mask_bytes(t.block_m, t.block_n)
               : scratch_bytes(t.warps) + elem_bytes(c.elem) * (t.block_m * dqk + t.stages * t.block_n * (dqk + dv)) +
                     (c.bias_tile ? 2 * t.block_m * t.block_n : 0) +
                     (c.recip_band ? elem_bytes(c.elem) * (t.block_m + t.stages * t.block_n) * dqk : 0);
}

ATTNJIT_HD constexpr int threads(const KernelConfig& c) { return c.tile.warps * 32; }

// ---- validity ---------------------------------------------------------------------------

// The head dims backward_fused runs without padding past the usual tile head dim (real ones
// 40..64, 104..128, 136..256; not a Q/K tile of 64 beside a V tile of 256): where the
// backward prefers it. Other head dims run it padded (fused_tile_head_dims), which the score
// convolution's backward does; without one they take the two-pass backward.
ATTNJIT_HD constexpr bool fused_backward_head_dims(int dqk, int dv) {
    return fused_tile_head_dims(dqk, dv, true) == tile_head_dim(dqk) &&
           fused_tile_head_dims(dqk, dv, false) == tile_head_dim(dv);
}

// Null when the configuration is valid on some GPU; otherwise the reason, in English.
// Whether a tile of `block_n` keys can stage score_mod's bias tile on `loop`: the sm80 loop
// copies whole 16-byte chunk groups (32 keys), the sm90 loop two bulk boxes of 64 keys (at 64
// keys its staged reads were wrong on the H100: 0af792c, the autotuner's candidate test). Other
// tiles read the bias element by element (codegen::make_config).
ATTNJIT_HD constexpr bool bias_tile_fits(MainloopKind loop, int block_n) {
    return loop == MainloopKind::sm90 ? block_n == 128 : block_n % 32 == 0;
}

ATTNJIT_HD constexpr const char* why_config_invalid(const KernelConfig& c) {
    const TileConfig& t = c.tile;
    if (c.kind == KernelKind::latent_gemm) {  // sm80/latent_gemm.cuh: no Variant, no structural features
        if (c.mainloop != MainloopKind::sm80 || c.elem == ElemKind::f32)
            return "latent_gemm runs on the sm80 main loop (f16 / bf16)";
        if (c.score_conv || c.bias_tile || c.recip_band || c.latent != 0 || c.schedule != CtaSchedule{})
            return "latent_gemm has no structural features and no CTA schedule";
        if (t.warps % 2 != 0 || t.warps < 2 || t.warps > 16 || t.block_n != 128 || t.block_m % (8 * t.warps) != 0 ||
            t.block_m > 256)
            return "latent_gemm: block_n 128, warps in a (warps / 2) x 2 grid of 16-row multiples x 64-column tiles";
        if (t.stages < 2 || t.stages > 4) return "latent_gemm: stages 2 to 4";
        if (smem_bytes(c) > kMaxDynamicSmemBytes) return "tile needs more than 227 KiB of shared memory";
        return nullptr;
    }
    if (c.kind != KernelKind::forward && !is_backward(c.kind)) return "unknown kernel kind";
    if (c.schedule.order < kOrderAuto || c.schedule.order > kOrderLast) return "unknown CTA order";
    if (c.schedule.order != kOrderAuto && (c.kind != KernelKind::forward || c.mainloop == MainloopKind::simt))
        return "a CTA order is chosen for the sm80 and sm90 forward only";
    if (c.schedule.grid != Sm90Grid::by_size && (c.kind != KernelKind::forward || c.mainloop != MainloopKind::sm90))
        return "the grid (persistent or one CTA an item) is chosen for the sm90 forward only";
    if (c.score_conv && ((c.kind != KernelKind::forward && c.kind != KernelKind::backward_fused &&
                          c.kind != KernelKind::backward_dq) ||
                         c.mainloop != MainloopKind::sm80))
        return "the score convolution runs in the sm80 forward, backward_fused and backward_dq only (f16 / bf16) for "
               "now";
    if (c.bias_tile && (c.kind != KernelKind::forward || c.mainloop == MainloopKind::simt || c.score_conv))
        return "the staged bias tile is a feature of the sm80 and sm90 forward without a score convolution";
    if (c.bias_tile && !bias_tile_fits(c.mainloop, t.block_n))
        return c.mainloop == MainloopKind::sm90 ? "sm90: the staged bias tile takes block_n 128 (two boxes of 64 keys)"
                                                : "the staged bias tile needs block_n a multiple of 32";
    if (c.recip_band && ((c.kind != KernelKind::forward && c.kind != KernelKind::backward_dq &&
                          c.kind != KernelKind::backward_dkdv && c.kind != KernelKind::backward_fused) ||
                         c.mainloop != MainloopKind::sm80 || c.score_conv ||
                         (c.kind == KernelKind::backward_fused && fused_column_split(c.head_dim_qk, c.head_dim_v) > 1)))
        return "the reciprocal band runs in the sm80 forward, backward_dq, backward_dkdv and backward_fused (f16 / "
               "bf16, head dims up to 128 in the backward, no score convolution)";
    if (c.latent != 0 && (c.kind != KernelKind::forward || c.mainloop != MainloopKind::sm80 || c.score_conv ||
                          c.bias_tile || (c.recip_band && latent_col_split(c.latent) > 1)))
        return "the latent projection runs in the sm80 forward only (f16 / bf16; no score convolution or staged bias "
               "tile; a reciprocal band beside it up to L 256) for now";
    if (c.latent != 0 && !latent_dim_supported(c.latent)) return "the latent dim L must be a multiple of 8 from 8 to 512";
    if (c.latent != 0 && latent_col_split(c.latent) > 1 &&
        (t.warps % 2 != 0 || t.block_m != 8 * t.warps || tile_head_dim(c.head_dim_v) > 128))
        return "a latent dim over 256: two warps a 16-row group (block_m = 8 x warps), Dv up to 128 (W_vup[h] is "
               "staged whole)";
    if (c.score_conv && (t.block_n % 16 != 0 || t.block_m % 16 != 0))
        return "the score convolution needs block_m and block_n multiples of 16";
    if (c.score_conv && c.kind == KernelKind::backward_fused && (t.block_n != 64 || t.block_m % 32 != 0))
        return "the score convolution's backward: block_n 64, block_m 32 or 64 (sm80/score_conv_backward.cuh)";
    if (c.score_conv && c.kind == KernelKind::backward_dq && t.block_n % 32 != 0)
        return "the score convolution in backward_dq needs block_n a multiple of 32 (its mask's words)";
    // backward_stats also runs first in the two-pass backward of a gated spec (any dtype,
    // any main loop: it has no tiles of its own).
    const bool fast_backward = c.kind == KernelKind::backward_fused || c.kind == KernelKind::backward_dq_convert;
    if (fast_backward && c.mainloop != MainloopKind::sm80 &&
        !(c.kind == KernelKind::backward_fused && c.mainloop == MainloopKind::sm90))
        return "the fast backward needs the sm80 main loop (backward_fused: sm80 or sm90)";
    if (!head_dim_supported(c.head_dim_qk) || !head_dim_supported(c.head_dim_v))
        return "unsupported head dim (a multiple of 8 from 8 to 256)";
    if (t.warps <= 0 || t.warps > 16) return "warps must be in [1, 16]";
    if (t.block_m <= 0 || t.block_n <= 0) return "block sizes must be positive";
    if (c.kind == KernelKind::backward_sink_grad) {
        // Plain fp32 code over rows for any element type: no main loop, no tiles (block_m
        // and block_n are unused; warps split the rows).
        if (c.mainloop != MainloopKind::simt) return "backward_sink_grad runs as simt code";
        if (t.stages != 1) return "backward_sink_grad: stages must be 1";
        return nullptr;
    }
    if (is_backward_rows(c.kind)) {
        if (c.elem == ElemKind::f32 && c.kind == KernelKind::backward_dq_convert)
            return "the fast backward takes f16 or bf16 only";
        if (t.block_m % t.warps != 0 || t.block_m / t.warps > 32)
            return "backward row kernels: block_m a multiple of warps, at most 32 rows per warp";
    } else if (is_backward(c.kind) && c.mainloop == MainloopKind::sm80) {
        // The warps split the CTA's own rows (keys for dkdv, queries for dq) in 16-row
        // fragments; the streamed tile is a multiple of 16.
        const bool dkdv = owns_keys(c.kind);
        const int own = dkdv ? t.block_n : t.block_m, streamed = dkdv ? t.block_m : t.block_n;
        if (c.elem == ElemKind::f32) return "the sm80 backward takes f16 or bf16 only";
        // (backward_dq with a score convolution computes no dQ: its registers fit at 256.)
        if ((c.head_dim_qk > 128 || c.head_dim_v > 128) && c.kind != KernelKind::backward_fused &&
            !(c.kind == KernelKind::backward_dq && c.score_conv))
            return "backward_dkdv and backward_dq sm80 take head dims up to 128 (136 to 256 run on simt)";
        if (own % (16 * t.warps) != 0 && c.kind != KernelKind::backward_fused)
            return dkdv ? "backward_dkdv sm80: block_n must be a multiple of 16 keys per warp"
                        : "backward_dq sm80: block_m must be a multiple of 16 rows per warp";
        if (own / (16 * t.warps) > 2 && c.kind != KernelKind::backward_fused)
            return "backward sm80: at most 32 rows per warp";
        if (streamed % 16 != 0 || streamed > 128)
            return dkdv ? "backward_dkdv sm80: block_m must be a multiple of 16, at most 128"
                        : "backward_dq sm80: block_n must be a multiple of 16, at most 128";
        const bool fused_256 = c.kind == KernelKind::backward_fused &&
                               fused_column_split(c.head_dim_qk, c.head_dim_v) > 1;
        if (fused_256 ? t.stages != 1 && t.stages != 2 : t.stages != 2)
            return "backward sm80: stages must be 2 (backward_fused at head dims over 128: 1 or 2)";
        if (c.kind == KernelKind::backward_fused) {  // sm80/backward_fused.cuh's warp grids
            if (t.warps != 8) return "backward_fused: 8 warps";
            if (t.block_m != 32 && t.block_m != 64 &&
                !(t.block_m == 128 && c.head_dim_qk <= 64 && c.head_dim_v <= 64))
                return "backward_fused: block_m 32 or 64 (or 128 with head dims up to 64)";
            if (t.block_n != 64 && t.block_n != 128) return "backward_fused: block_n 64 or 128";
        }
    } else if (owns_keys(c.kind) && c.mainloop == MainloopKind::sm90) {
        // sm90/backward_dkdv.cuh (backward_dkdv, and backward_fused with dQ): two consumer
        // warpgroups of 64 keys, 64 queries a step.
        if (c.elem == ElemKind::f32) return "the sm90 main loop takes f16 or bf16 only";
        if (c.score_conv || c.recip_band) return "the sm90 backward has no structural modifiers (sm80 runs them)";
        if (!sm90_head_dims(c.head_dim_qk, c.head_dim_v) || tile_head_dim(c.head_dim_qk) > 128 ||
            tile_head_dim(c.head_dim_v) > 128)
            return "the sm90 backward takes head dims of 33-64 and 97-128 (whole 64-column blocks, dK and dV in "
                   "registers)";
        if (t.block_m != 64 || t.block_n != 128 || t.warps != kSm90Warps)
            return "sm90 backward: block_m 64, block_n 128, 12 warps (a producer and two consumer warpgroups)";
        if (t.stages < 2 || t.stages > 3) return "sm90 backward: stages 2 or 3";
    } else if (is_backward(c.kind)) {
        if (c.mainloop != MainloopKind::simt) return "unknown backward main loop";
        if (t.block_m > 64 || t.block_n > 64) return "backward simt: block_m and block_n at most 64";
        if (t.stages != 1) return "backward simt: stages must be 1";
    } else if (c.mainloop == MainloopKind::simt) {
        if (c.elem != ElemKind::f32) return "the simt main loop takes f32 only";
        if (t.block_m % t.warps != 0) return "simt: block_m must be a multiple of warps";
        if (t.block_m / t.warps > 16) return "simt: at most 16 rows per warp";
        if (t.block_n % 32 != 0 || t.block_n > 128) return "simt: block_n must be 32, 64, 96 or 128";
        if (t.stages != 1) return "simt: stages must be 1";
    } else if (c.mainloop == MainloopKind::sm90) {
        if (c.elem == ElemKind::f32) return "the sm90 main loop takes f16 or bf16 only";
        if (c.score_conv || c.recip_band || c.latent != 0)
            return "the sm90 main loop has no structural modifiers (score_conv, recip_band, latent: sm80)";
        if (!sm90_head_dims(c.head_dim_qk, c.head_dim_v))
            return "the sm90 main loop takes head dims of 33-64, 97-128 and 129-256 (tiles of whole 64-column blocks)";
        if ((t.block_m != 128 && t.block_m != 192) || t.warps != sm90_forward_warps(t.block_m))
            return "sm90: block_m 128 with 12 warps or 192 with 16 (a producer warpgroup and a consumer warpgroup per 64 "
                   "query rows)";
        // FlashAttention-3's tiles: 176 keys at head dim 128 (a tile's softmax over more keys), 80 at 256.
        if (t.block_n != 64 && t.block_n != 80 && t.block_n != 128 && t.block_n != 176)
            return "sm90: block_n 64, 80, 128 or 176";
        // Three consumers have 160 registers a thread, not 240: S, P and O of 128 keys at 64 columns.
        if (t.block_m == 192 &&
            (tile_head_dim(c.head_dim_qk) > 64 || tile_head_dim(c.head_dim_v) > 64 || t.block_n > 128))
            return "sm90: block_m 192 (three consumer warpgroups of 160 registers) at tile head dims of 64 and block_n up "
                   "to 128 only";
        // S (block_n / 2) and O (dv / 2) registers a thread, of 240, beside P (block_n / 4) and the
        // rest: 64 + 64 (+ 32) at d128, 88 + 64 (+ 44) with 176 keys, 40 + 128 (+ 20) with 80 keys
        // beside V at 256 (a few bytes of spills); 128 keys beside V at 256 (64 + 128) would leave
        // too few for P and the rest.
        if (t.block_n / 2 + tile_head_dim(c.head_dim_v) / 2 > 184)
            return "sm90: block_n + the tile head dim of V at most 368 (the consumers' S and O registers)";
        if (t.stages < 2 || t.stages > 4) return "sm90: stages 2 to 4 (a consumer holds one stage while it waits for the next)";
    } else if (c.mainloop == MainloopKind::sm80) {
        if (c.elem == ElemKind::f32) return "the sm80 main loop takes f16 or bf16 only";
        const int row_warps = t.warps / (c.latent ? latent_col_split(c.latent) : 1);  // warps with their own rows
        if (t.block_m % (16 * row_warps) != 0) return "block_m must be a multiple of 16 rows per warp";
        if (t.block_m / (16 * row_warps) > 4) return "at most 64 rows per warp";
        if (t.block_n % 16 != 0 || t.block_n > 256) return "block_n must be a multiple of 16, at most 256";
        if (t.stages < 1 || t.stages > 3) return "stages must be 1, 2 or 3";
    } else {
        return "unknown main loop";
    }
    if (smem_bytes(c) > kMaxDynamicSmemBytes) return "tile needs more than 227 KiB of shared memory";
    return nullptr;
}

// Null when the configuration is valid and runs on sm_<sm>; otherwise the reason. On an
// arch this header does not know, the driver judges the shared memory at load time.
ATTNJIT_HD constexpr const char* why_config_invalid_on(const KernelConfig& c, int sm) {
    if (const char* why = why_config_invalid(c)) return why;
    if (!runs_on(c.mainloop, sm))
        return c.mainloop == MainloopKind::sm90 ? "the sm90 main loop runs on sm_90a (H100, H200) only"
                                                : "the main loop needs a newer GPU";
    const int limit = max_dynamic_smem_bytes(sm);
    if (limit != 0 && smem_bytes(c) > limit) return "tile needs more shared memory than this GPU allows";
    return nullptr;
}

ATTNJIT_HD constexpr bool config_is_valid(const KernelConfig& c) { return why_config_invalid(c) == nullptr; }

// ---- defaults ---------------------------------------------------------------------------

// The main loop of a kind for an element type and head dims on sm_<sm>.
ATTNJIT_HD constexpr MainloopKind default_mainloop(KernelKind kind, ElemKind e, int dqk, int dv, int /*sm*/) {
    // backward_fused (and the dQ conversion after it) also takes head dims over 128, by
    // halves of the columns (fused_column_split); the two-pass kinds run them on simt.
    return e == ElemKind::f32 || kind == KernelKind::backward_sink_grad ||
                   (is_backward(kind) && (dqk > 128 || dv > 128) && kind != KernelKind::backward_fused &&
                    kind != KernelKind::backward_dq_convert)
               ? MainloopKind::simt
               : MainloopKind::sm80;
}

// The tile used when nothing else is asked for, fitting sm_<sm>'s shared memory.
ATTNJIT_HD constexpr TileConfig default_tile(KernelKind kind, MainloopKind m, int dqk, int dv, int sm) {
    // Backward sm80: 64 x 64 with 4 warps for backward_dkdv and backward_dq (two CTAs an
    // SM: 7% faster on the H100 than 128-row CTAs of 8 warps, bench/results/
    // 2026-11-23-h100-24f14e2-backward.md); backward_fused 128 keys x 64 queries, 8 warps
    // (x 128 queries at head dims 64; 64 x 32 on GPUs with 99 KiB of shared memory; 64 x 64
    // over 128 columns, split in halves: 197 KiB, or 64 x 32 in 163 KiB).
    // Backward simt: {16, 16} keeps head dims 256 inside the 99 KiB of sm_86 / sm_89 / sm_120.
    // backward_sink_grad: 8 warps over a head's rows (block_m, block_n unused).
    // latent_gemm: 128 x 128 C tiles, 8 warps, three stages of k (96 KiB; two in 99 KiB).
    const bool small_smem = max_dynamic_smem_bytes(sm) < 128 * 1024;
    return kind == KernelKind::backward_sink_grad ? TileConfig{64, 64, 8, 1}
           : kind == KernelKind::latent_gemm ? TileConfig{128, 128, 8, small_smem ? 2 : 3}
           : is_backward_rows(kind) ? TileConfig{64, 64, 4, 1}
           : is_backward(kind) && m == MainloopKind::sm80
               ? (kind != KernelKind::backward_fused ? TileConfig{64, 64, 4, 2}
                  : small_smem                      ? TileConfig{32, 64, 8, 2}
                  : dqk > 128 || dv > 128           ? (max_dynamic_smem_bytes(sm) >= 200 * 1024 ? TileConfig{64, 64, 8, 2}
                                                                                               : TileConfig{32, 64, 8, 2})
                  : dqk <= 64 && dv <= 64           ? TileConfig{128, 128, 8, 2}
                                                    : TileConfig{64, 128, 8, 2})
           : is_backward(kind) ? (dqk + dv > 256 && max_dynamic_smem_bytes(sm) < 128 * 1024 ? TileConfig{16, 16, 4, 1}
                                : dqk + dv > 256 || max_dynamic_smem_bytes(sm) < 128 * 1024 ? TileConfig{16, 32, 4, 1}
                                                                                           : TileConfig{32, 32, 8, 1})
           : m == MainloopKind::simt ? TileConfig{32, 32, 4, 1}
           : (dqk > 128 || dv > 128)
               ? (max_dynamic_smem_bytes(sm) >= 128 * 1024 ? TileConfig{128, 64, 8, 1} : TileConfig{64, 64, 4, 1})
           : (dqk > 64 || dv > 64) ? TileConfig{128, 64, 4, 2}
                                   : TileConfig{128, 128, 4, 2};
}

// The score convolution's forward tile: 128 x 128 with 8 warps, one stage (the fastest of
// six tiles on the H100 at N 1024-8192, bench/results/2026-11-23-h100-mta-tiles.md: the
// halo is 1/8 of the tile each way); 64 x 64 where shared memory is 99 KiB or a head dim
// is over 128 (the extended Q and K tiles of d256 need 254 KiB at 128 x 128).
// The backward (backward_fused): 64 x 64 with 8 warps (the halos are recomputed per step:
// 96 x 96 products of Q K^T for a 64 x 64 tile), 32 x 64 where shared memory is 99 KiB;
// at head dims over 128, 32 x 64 with one stage of Q and dO (182 KiB: sm_90 and sm_100 only).
// backward_dq (the gradients of captured tensors beside it): 64 x 64 with 4 warps, 32 x 64
// with 2 where shared memory is 99 KiB or a head dim is over 128 (201 KiB at d256).
ATTNJIT_HD constexpr TileConfig default_score_conv_tile(int sm, int dqk, int dv, KernelKind kind = KernelKind::forward) {
    if (kind == KernelKind::backward_dq)
        return dqk > 128 || dv > 128 || max_dynamic_smem_bytes(sm) < 128 * 1024 ? TileConfig{32, 64, 2, 2}
                                                                                 : TileConfig{64, 64, 4, 2};
    if (kind == KernelKind::backward_fused)
        return dqk > 128 || dv > 128                  ? TileConfig{32, 64, 8, 1}
               : max_dynamic_smem_bytes(sm) < 128 * 1024 ? TileConfig{32, 64, 8, 2}
                                                         : TileConfig{64, 64, 8, 2};
    return max_dynamic_smem_bytes(sm) < 128 * 1024 || dqk > 128 || dv > 128 ? TileConfig{64, 64, 4, 1}
                                                                             : TileConfig{128, 128, 8, 1};
}

// The forward tile with a staged bias tile (KernelConfig::bias_tile): at head dims up to 32
// the kernel moves more bias than K/V through L2, and 64 x 64 with 4 warps keeps more
// loads in flight than 128 x 128 (12-23% faster on msa_row, bench/results/
// 2026-11-24-h100-94479f9-bias-tile.md); other head dims keep default_tile.
ATTNJIT_HD constexpr TileConfig default_bias_tile_tile(int dqk, int dv, TileConfig plain) {
    return dqk <= 32 && dv <= 32 ? TileConfig{64, 64, 4, 2} : plain;
}

// The forward tile with a reciprocal band (KernelConfig::recip_band): its two more operand
// tiles cost shared memory, and two CTAs an SM matter more than a second stage (d128 on the
// H200: 128 x 64 with one stage is 1.4-1.5x faster than with two, which leave one CTA an SM;
// bench/results/2026-11-27-h200-reciprocal-band-forward.md). So: the plain tile, then it with
// one stage, then 64 x 64 with two stages or one (32 x 32 for d256 on the 99 KiB GPUs), the
// first that fits two CTAs an SM, else the first that fits one. The backward kinds: their plain
// tile where it fits, else one with half the streamed tile.
ATTNJIT_HD constexpr TileConfig default_recip_band_tile(KernelConfig c, int sm) {
    const int limit = max_dynamic_smem_bytes(sm);
    const TileConfig plain = c.tile;
    if (is_backward(c.kind)) {  // two stages; half the streamed tile where that fits two CTAs an SM
        const TileConfig small = c.kind == KernelKind::backward_dq      ? TileConfig{64, 32, 4, 2}
                                 : c.kind == KernelKind::backward_fused ? TileConfig{64, 64, 8, 2}
                                                                        : TileConfig{32, 64, 4, 2};
        const TileConfig both[] = {plain, small};
        for (int ctas = 2; ctas >= 1; --ctas)
            for (const TileConfig& t : both) {
                c.tile = t;
                if (limit == 0 || ctas * smem_bytes(c) <= limit) return t;
            }
        return small;
    }
    const TileConfig tiles[] = {plain, TileConfig{plain.block_m, plain.block_n, plain.warps, 1},
                                TileConfig{64, 64, 4, 2}, TileConfig{64, 64, 4, 1}, TileConfig{32, 32, 2, 1}};
    for (int ctas = 2; ctas >= 1; --ctas)
        for (const TileConfig& t : tiles) {
            c.tile = t;
            if (limit == 0 || ctas * smem_bytes(c) <= limit) return t;
        }
    return tiles[4];
}

// The first of `tiles` whose shared memory fits sm_<sm> (any, on an arch this header does not
// know), else the last (which check_config then refuses, saying why).
template <int N>
ATTNJIT_HD constexpr TileConfig first_fitting_tile(KernelConfig c, int sm, const TileConfig (&tiles)[N]) {
    const int limit = max_dynamic_smem_bytes(sm);
    for (const TileConfig& t : tiles) {
        c.tile = t;
        if (limit == 0 || smem_bytes(c) <= limit) return t;
    }
    return tiles[N - 1];
}

// The forward tile with a latent projection (KernelConfig::latent): the plain tile of head dim
// L where its prologue's and epilogue's operands fit the GPU too, else 64 x 64 with 4 warps,
// two stages or one.
ATTNJIT_HD constexpr TileConfig default_latent_tile(KernelConfig c, int sm) {
    // Over 256: 8 warps over 64 rows, two stages of 32 keys (64 keys spill: 248 bytes at L 512,
    // Dqk 128, sm_90a), else one stage of 64.
    const TileConfig wide[] = {TileConfig{64, 32, 8, 2}, TileConfig{64, 64, 8, 1}};
    // With a reciprocal band, 16 rows a warp: 32 spill its registers (80 bytes at L 128, Dqk 64).
    const TileConfig tiles[] = {c.recip_band ? TileConfig{128, 64, 8, 2}
                                             : default_tile(KernelKind::forward, MainloopKind::sm80, c.latent, c.latent, sm),
                                TileConfig{64, 64, 4, 2}, TileConfig{64, 64, 4, 1}};
    return latent_col_split(c.latent) > 1 ? first_fitting_tile(c, sm, wide) : first_fitting_tile(c, sm, tiles);
}

// The sm90 loop's tile (c: its kind, element type and head dims). The forward's: 192 query rows
// (three consumer warpgroups) at tile head dims of 64, else 128 (two), two stages, 128 keys a
// step (162 KiB at d128); else 80 (a tile head dim of V of 256, whose O takes 128 registers a
// thread; or Q/K at 256 beside V at 128, whose 128-key stages would need 258 KiB: FlashAttention-3's
// tile at head dim 256, 2-5% over 64 keys on the H200), else 64 (also where a staged bias tile
// rules 80 out): the first valid on sm_90a, else the last (which make_config then leaves to the
// sm80 loop).
// backward_dkdv and backward_fused: 128 keys (two consumer warpgroups), 64 queries a step, two stages.
ATTNJIT_HD constexpr TileConfig default_sm90_tile(KernelConfig c) {
    c.mainloop = MainloopKind::sm90;
    if (owns_keys(c.kind)) return TileConfig{64, 128, kSm90Warps, 2};
    const TileConfig tiles[] = {TileConfig{192, 128, sm90_forward_warps(192), 2}, TileConfig{128, 128, kSm90Warps, 2},
                                TileConfig{128, 80, kSm90Warps, 2}, TileConfig{128, 64, kSm90Warps, 2}};
    for (const TileConfig& t : tiles) {
        c.tile = t;
        if (why_config_invalid_on(c, 90) == nullptr) return t;
    }
    return tiles[1];
}

ATTNJIT_HD constexpr KernelConfig default_config(KernelKind kind, ElemKind e, int dqk, int dv, int sm) {
    return KernelConfig{kind, default_mainloop(kind, e, dqk, dv, sm), e, dqk, dv,
                        default_tile(kind, default_mainloop(kind, e, dqk, dv, sm), dqk, dv, sm)};
}

// Whether the fused backward (backward_fused without a score convolution) runs for these
// dims on sm_<sm>: fp16 / bf16, head dims it takes without extra padding, and a default
// tile that fits the GPU's shared memory (head dims over 128: not on the 99 KiB GPUs).
// Without it the backward is the two-pass one.
ATTNJIT_HD constexpr bool fused_backward_runs(ElemKind e, int dqk, int dv, int sm) {
    return e != ElemKind::f32 && fused_backward_head_dims(dqk, dv) &&
           why_config_invalid_on(default_config(KernelKind::backward_fused, e, dqk, dv, sm), sm) == nullptr;
}

}  // namespace attnjit
