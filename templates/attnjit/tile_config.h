// Tile configurations of the forward kernel: the one source of truth for which tiles
// exist and how much shared memory they take. Plain constexpr C++ with no includes:
// the host includes it to choose and prune configurations, NVRTC includes it to
// static_assert the same rules inside the kernel.
#pragma once

namespace attnjit {

enum class ElemKind : int { f16 = 0, bf16 = 1, f32 = 2 };

constexpr int elem_bytes(ElemKind e) { return e == ElemKind::f32 ? 4 : 2; }

struct TileConfig {
    int block_m;  // query rows per CTA
    int block_n;  // keys per inner-loop step
    int warps;    // warps per CTA
    int stages;   // shared-memory stages for K/V
};

constexpr bool head_dim_supported(int d) {
    return d == 32 || d == 64 || d == 96 || d == 128 || d == 256;
}

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Dynamic shared memory the forward kernel needs for this tile (bytes).
constexpr int forward_smem_bytes(ElemKind e, int dqk, int dv, TileConfig t) {
    return elem_bytes(e) * (t.block_m * dqk + t.stages * t.block_n * (dqk + dv));
}

// Null when the configuration is valid; otherwise the reason, in English.
constexpr const char* why_tile_invalid(ElemKind e, int dqk, int dv, TileConfig t) {
    if (!head_dim_supported(dqk) || !head_dim_supported(dv)) return "unsupported head dim";
    if (t.warps <= 0 || t.warps > 16) return "warps must be in [1, 16]";
    if (t.block_m % (16 * t.warps) != 0 && e != ElemKind::f32)
        return "block_m must be a multiple of 16 rows per warp";
    if (t.block_n % 16 != 0) return "block_n must be a multiple of 16";
    if (t.stages < 1 || t.stages > 3) return "stages must be 1, 2 or 3";
    if (forward_smem_bytes(e, dqk, dv, t) > 227 * 1024) return "tile needs more than 227 KiB of shared memory";
    return nullptr;
}

// The configuration used when nothing else is asked for.
constexpr TileConfig default_forward_tile(ElemKind e, int dqk, int dv) {
    return TileConfig{128, (dqk > 128 || dv > 128) ? 32 : 64, 4, 2};
}

}  // namespace attnjit
