// Tile configurations of the forward kernel: the one source of truth for which tiles
// exist and how much shared memory they take. Plain constexpr C++ with no includes:
// the host includes it to choose and prune configurations, NVRTC includes it to
// static_assert the same rules inside the kernel.
//
// Alignment the host must check before launching (else: a user error, not a launch):
//   * q, k, v, o base pointers: 16-byte aligned (kForwardAlignBytes);
//   * every batch / head / sequence stride of q, k, v, o, times the element size, a
//     multiple of 16 bytes (strides of dimensions of extent 1 are never used and may be
//     anything);
//   * the head dimension is contiguous (stride 1);
//   * lse (when not null): 4-byte aligned, any strides.
// Q, K and V tiles are read with 16-byte cp.async; O is written 4 bytes (16-bit types)
// or 4 bytes (fp32) at a time.
#pragma once

// Host and NVRTC alike: under CUDA compilers these constexpr helpers are host+device (NVRTC
// rejects unannotated functions unless -default-device is given).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_HD __host__ __device__
#else
#define ATTNJIT_HD
#endif

namespace attnjit {

enum class ElemKind : int { f16 = 0, bf16 = 1, f32 = 2 };

ATTNJIT_HD constexpr int elem_bytes(ElemKind e) { return e == ElemKind::f32 ? 4 : 2; }

constexpr int kForwardAlignBytes = 16;

struct TileConfig {
    int block_m;  // query rows per CTA
    int block_n;  // keys per inner-loop step
    int warps;    // warps per CTA
    int stages;   // shared-memory stages for K/V
};

ATTNJIT_HD constexpr bool head_dim_supported(int d) {
    return d == 32 || d == 64 || d == 96 || d == 128 || d == 256;
}

ATTNJIT_HD constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Shared scratch for the block-collective classify helpers (intervals.cuh): 16 bytes
// per warp, rounded up to 128 so the tiles after it stay 128-byte aligned.
ATTNJIT_HD constexpr int forward_scratch_bytes(int warps) { return ceil_div(16 * warps, 128) * 128; }

// fp32 (SIMT) main loop: rows are padded by 4 floats (16 bytes) to spread banks.
constexpr int simt_row_pad = 4;

// Dynamic shared memory the forward kernel needs for this tile (bytes), exactly.
//  16-bit (mma.sync) path: scratch | Q [block_m x dqk] | K [stages][block_n x dqk] |
//                          V [stages][block_n x dv]       (XOR-swizzled, no padding)
//  fp32 (SIMT) path:       scratch | Q [block_m x (dqk+4)] | K [block_n x (dqk+4)] |
//                          V [block_n x dv] | P [warps x block_n]
ATTNJIT_HD constexpr int forward_smem_bytes(ElemKind e, int dqk, int dv, TileConfig t) {
    return e == ElemKind::f32
               ? forward_scratch_bytes(t.warps) +
                     4 * (t.block_m * (dqk + simt_row_pad) + t.block_n * (dqk + simt_row_pad) +
                          t.block_n * dv + t.warps * t.block_n)
               : forward_scratch_bytes(t.warps) +
                     2 * (t.block_m * dqk + t.stages * t.block_n * (dqk + dv));
}

// Null when the configuration is valid; otherwise the reason, in English.
ATTNJIT_HD constexpr const char* why_tile_invalid(ElemKind e, int dqk, int dv, TileConfig t) {
    if (!head_dim_supported(dqk) || !head_dim_supported(dv)) return "unsupported head dim";
    if (t.warps <= 0 || t.warps > 16) return "warps must be in [1, 16]";
    if (t.block_m <= 0 || t.block_n <= 0) return "block sizes must be positive";
    if (e == ElemKind::f32) {
        if (t.block_m % t.warps != 0) return "fp32: block_m must be a multiple of warps";
        if (t.block_m / t.warps > 16) return "fp32: at most 16 rows per warp";
        if (t.block_n % 32 != 0 || t.block_n > 128) return "fp32: block_n must be 32, 64, 96 or 128";
        if (t.stages != 1) return "fp32: stages must be 1";
    } else {
        if (t.block_m % (16 * t.warps) != 0) return "block_m must be a multiple of 16 rows per warp";
        if (t.block_m / (16 * t.warps) > 4) return "at most 64 rows per warp";
        if (t.block_n % 16 != 0 || t.block_n > 256) return "block_n must be a multiple of 16, at most 256";
        if (t.stages < 1 || t.stages > 3) return "stages must be 1, 2 or 3";
    }
    if (forward_smem_bytes(e, dqk, dv, t) > 227 * 1024) return "tile needs more than 227 KiB of shared memory";
    return nullptr;
}

// The configuration used when nothing else is asked for.
ATTNJIT_HD constexpr TileConfig default_forward_tile(ElemKind e, int dqk, int dv) {
    return e == ElemKind::f32 ? TileConfig{32, 32, 4, 1}
           : (dqk > 128 || dv > 128) ? TileConfig{128, 64, 8, 1}
           : (dqk > 64 || dv > 64)   ? TileConfig{128, 64, 4, 2}
                                     : TileConfig{128, 128, 4, 2};
}

}  // namespace attnjit
