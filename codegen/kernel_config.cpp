#include "codegen/kernel_config.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

#include "codegen/bias_tile.h"
#include "codegen/kernel_kinds.h"
#include "support/error.h"

namespace attnjit::codegen {

ElemKind elem_kind(DType d) {
    switch (d) {
    case DType::f16: return ElemKind::f16;
    case DType::bf16: return ElemKind::bf16;
    case DType::f32: return ElemKind::f32;
    default: break;
    }
    user_error << "Q, K, V dtype " << dtype_name(d) << " is not supported; use f16, bf16 or f32";
    return ElemKind::f16;
}

int sm_version(const std::string& arch) {
    static const std::regex shape("sm_([0-9]{2,3})[af]?");
    std::smatch m;
    user_check(std::regex_match(arch, m, shape))
        << "'" << arch << "' is not a GPU architecture attnjit can compile for; use a real "
        << "architecture such as sm_80, sm_89 or sm_90a (virtual compute_XX targets give no "
        << "cubin)";
    return std::stoi(m[1].str());
}

std::string known_archs_text() {
    std::vector<std::string> names;
    for (int sm = kOldestSupportedSm; sm < 200; ++sm)
        if (max_dynamic_smem_bytes(sm) != 0)
            names.push_back("sm_" + std::to_string(sm) + (sm == 90 ? " (sm_90a)" : ""));
    std::string out;
    for (size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return out;
}

namespace {

// A score convolution's kernel: its tile, and the sm80 loop, the only one with the
// convolution (f32 keeps its loop and is refused by check_config).
void use_score_conv_defaults(KernelConfig& c, int sm) {
    c.tile = default_score_conv_tile(sm, c.head_dim_qk, c.head_dim_v, c.kind);
    if (c.elem != ElemKind::f32) c.mainloop = MainloopKind::sm80;
}

}  // namespace

int supported_sm_version(const std::string& arch) {
    const int sm = sm_version(arch);
    user_check(sm >= kOldestSupportedSm)
        << "cannot build kernels for " << arch << ": attnjit supports sm_" << kOldestSupportedSm
        << " (Ampere) and newer GPUs (" << known_archs_text()
        << "); compile for one of them, or use another attention implementation on this GPU";
    return sm;
}

void check_schedule(const KernelConfig& c, const std::string& what) {
    if (const char* why = why_config_invalid(c)) {
        std::ostringstream chosen;
        chosen << c.schedule;  // " cta_order=... grid=..."
        std::string text = chosen.str();
        if (!text.empty()) text.erase(0, 1);
        KernelConfig kernel = c;
        kernel.schedule = CtaSchedule{};
        user_check(false) << what << " (" << text << ") for " << kernel << ": " << why
                          << "; leave it unset for the kernel's own schedule";
    }
}

void check_config(const KernelConfig& c, const std::string& arch) {
    const int sm = supported_sm_version(arch);
    user_check(c.mainloop != MainloopKind::sm90 || arch_has_wgmma(arch))
        << "kernel " << c << " is not valid on " << arch << ": the sm90 main loop's wgmma needs the sm_90a target "
        << "(the H100 and H200); compile for sm_90a or use the sm80 loop";
    if (const char* why = why_config_invalid_on(c, sm)) {
        KernelConfig d = default_config(c.kind, c.elem, c.head_dim_qk, c.head_dim_v, sm);
        d.score_conv = c.score_conv;
        d.bias_tile = c.bias_tile && bias_tile_fits(d.mainloop, d.tile.block_n);
        d.recip_band = c.recip_band;
        if (c.score_conv) use_score_conv_defaults(d, sm);
        if (c.recip_band && d.mainloop == MainloopKind::sm80) d.tile = default_recip_band_tile(d, sm);
        d.latent = c.latent;
        if (c.latent > 0) d.tile = default_latent_tile(d, sm);
        if (c.mainloop == MainloopKind::sm90) {
            d.mainloop = MainloopKind::sm90;
            d.tile = default_sm90_tile(d);
        }
        std::ostringstream fix;
        if (why_config_invalid_on(d, sm) == nullptr && d.tile != c.tile)
            fix << "; pick another tile (templates/attnjit/common/kernel_config.h lists the rules) or leave it unset to "
                   "get the default, "
                << d.tile;
        std::ostringstream smem;
        if (max_dynamic_smem_bytes(sm) != 0 && smem_bytes(c) > max_dynamic_smem_bytes(sm))
            smem << " (it needs " << smem_bytes(c) << " bytes of shared memory; " << arch << " allows "
                 << max_dynamic_smem_bytes(sm) << ")";
        user_error << "kernel " << c << " is not valid on " << arch << ": " << why << smem.str() << fix.str();
    }
}

bool arch_has_wgmma(const std::string& arch) { return arch == "sm_90a"; }

KernelConfig make_config(const dsl::AttentionSpec& spec, KernelKind kind, const std::string& arch,
                         const std::optional<TileConfig>& tile, const std::optional<MainloopKind>& mainloop) {
    const int sm = supported_sm_version(arch);
    // Other head dims than 32, 64, 96, 128, 256 run those kernels' tiles padded (kernel_config.h).
    for (int d : {spec.head_dim_qk(), spec.head_dim_v()})
        user_check(head_dim_supported(d))
            << "AttentionSpec.head_dims(" << spec.head_dim_qk() << ", " << spec.head_dim_v() << "): head dim " << d
            << " is not supported; supported head dims are the multiples of " << kHeadDimStep << " from "
            << kMinHeadDim << " to " << kMaxHeadDim << " (pad the head dimension up to the next one)";
    KernelConfig c = default_config(kind, elem_kind(spec.dtype()), spec.head_dim_qk(), spec.head_dim_v(), sm);
    c.score_conv = spec.has_score_conv() && (kind == KernelKind::forward || kind == KernelKind::backward_fused ||
                                             kind == KernelKind::backward_dq);
    if (c.score_conv) use_score_conv_defaults(c, sm);
    // The sm80 forward stages score_mod's bias tile (codegen/bias_tile.h) when its tile's
    // rows are whole 16-byte chunk groups; otherwise the bias is read element by element.
    const bool stages_bias = kind == KernelKind::forward && c.mainloop == MainloopKind::sm80 && !c.score_conv &&
                             bias_tile_of(spec).has_value();
    if (stages_bias) c.tile = default_bias_tile_tile(c.head_dim_qk, c.head_dim_v, c.tile);
    c.bias_tile = stages_bias && bias_tile_fits(c.mainloop, c.tile.block_n);
    c.recip_band = spec.has_reciprocal_band() && (kind == KernelKind::forward || kind == KernelKind::backward_dq ||
                                                  kind == KernelKind::backward_dkdv || kind == KernelKind::backward_fused);
    if (c.recip_band && c.mainloop == MainloopKind::sm80) c.tile = default_recip_band_tile(c, sm);
    if (spec.has_latent() && kind == KernelKind::forward) {
        const std::string call = "AttentionSpec.latent(" + std::to_string(spec.latent_dim()) + ", ...)";
        user_check(c.mainloop == MainloopKind::sm80)
            << call << ": the latent projection runs on the sm80 main loop, which takes f16 or bf16; use one of them";
        user_check(latent_dim_supported(spec.latent_dim()))
            << call << ": the latent dim L must be a multiple of " << kHeadDimStep << " from " << kMinHeadDim << " to "
            << kMaxLatentTileDim;
        user_check(latent_col_split(spec.latent_dim()) == 1 || !spec.has_reciprocal_band())
            << call << " with a reciprocal band: the fused RA + MLA kernel runs up to L = 256 (over it the latent columns are "
            << "split across warps, which the band's product does not follow); attnjit::Attention runs it over L 256 in Q's "
            << "space instead (api/latent_projection.h)";
        user_check(latent_col_split(spec.latent_dim()) == 1 || tile_head_dim(spec.head_dim_v()) <= 128)
            << call << " with Dv = " << spec.head_dim_v() << ": over L = 256 the kernel stages W_vup[h] [L x Dv] whole, "
            << "which fits shared memory up to Dv = 128; use Dv <= 128 or L <= 256";
        c.latent = spec.latent_dim();
        c.tile = default_latent_tile(c, sm);
    }
    // The Hopper loop: the forward on sm_90a where it carries the spec (no structural modifier
    // but the bias tile, whole 64-column head-dim tiles); `mainloop` forces either loop.
    // The sm90 forward stages the bias tile by bulk copies (KernelConfig::bias_tile).
    KernelConfig sm90 = c;
    sm90.mainloop = MainloopKind::sm90;
    sm90.bias_tile = stages_bias;
    sm90.tile = default_sm90_tile(sm90);
    if (sm90.bias_tile && why_config_invalid_on(sm90, 90) != nullptr) {
        // No staged tile fits (over head dim 128 only a 128-row tile of 80 keys does, and the
        // bias tile takes 128 keys): the bias read element by element.
        sm90.bias_tile = false;
        sm90.tile = default_sm90_tile(sm90);
    }
    // backward_dkdv and backward_fused have an sm90 kernel too (sm90/backward_dkdv.cuh), taken
    // only when asked for (AttentionBackward asks on sm_90a where it carries the spec).
    const bool sm90_kind = kind == KernelKind::forward || owns_keys(kind);
    const bool sm90_fits = sm90_kind && arch_has_wgmma(arch) && c.elem != ElemKind::f32 && !c.score_conv &&
                           !c.recip_band && c.latent == 0 &&
                           sm90_head_dims(c.head_dim_qk, c.head_dim_v) && why_config_invalid_on(sm90, 90) == nullptr;
    if (mainloop) {
        user_check(*mainloop != MainloopKind::sm90 || sm90_fits)
            << "CompileOptions.mainloop = sm90 for " << spec << " (" << kernel_kind_name(kind) << " on " << arch
            << "): the sm90 main loop runs the forward on sm_90a, for f16 / bf16, head dims 33-64, 97-128 or "
            << "129-256, and no score convolution, reciprocal band or latent projection (and "
            << "backward_dkdv / backward_fused at head dims up to 128); leave CompileOptions.mainloop unset to get the "
            << "loop that runs it";
        user_check(*mainloop != MainloopKind::simt || c.mainloop == MainloopKind::simt)
            << "CompileOptions.mainloop = simt: the simt loop runs f32 (and the backward over head dim 128); leave it "
               "unset or pick sm80";
        user_check(*mainloop != MainloopKind::sm80 || c.mainloop == MainloopKind::sm80)
            << "CompileOptions.mainloop = sm80 for " << spec << ": the sm80 loop takes f16 or bf16 (f32 runs on the "
            << "simt loop); leave CompileOptions.mainloop unset";
    }
    // Unforced, a tile of another loop's shape (not 128 rows with 12 warps or 192 with 16) keeps the
    // sm80 loop it was made for.
    const bool use_sm90 = mainloop ? *mainloop == MainloopKind::sm90
                                   : kind == KernelKind::forward && sm90_fits &&
                                         (!tile || is_sm90_forward_tile(tile->block_m, tile->warps));
    if (use_sm90) c = sm90;
    if (tile) c.tile = *tile;
    // A tile the bias tile does not fit (kernel_config.h) reads the bias element by element.
    c.bias_tile = stages_bias && c.latent == 0 && bias_tile_fits(c.mainloop, c.tile.block_n);
    check_config(c, arch);
    return c;
}

std::vector<KernelConfig> candidate_configs(const dsl::AttentionSpec& spec, KernelKind kind, const std::string& arch,
                                            const std::optional<MainloopKind>& mainloop) {
    std::vector<KernelConfig> out{make_config(spec, kind, arch, std::nullopt, mainloop)};
    for (int block_m : {16, 32, 64, 128, 192, 256})
        for (int block_n : {32, 64, 80, 96, 128, 176, 192, 256})
            for (int warps : {1, 2, 4, 8, 12, 16})
                for (int stages : {1, 2, 3, 4}) {
                    const TileConfig t{block_m, block_n, warps, stages};
                    std::optional<KernelConfig> c;
                    try {
                        c = make_config(spec, kind, arch, t, mainloop);
                    } catch (const UserError&) {  // this tile does not fit the spec here
                        continue;
                    }
                    // 192 query rows and 80 or 176 keys are the sm90 forward's tiles; the sm80
                    // loop's tests run neither.
                    const bool sm90_only = block_m == 192 || block_n == 80 || block_n == 176;
                    if (sm90_only && c->mainloop != MainloopKind::sm90) continue;
                    if (std::find(out.begin(), out.end(), *c) == out.end()) out.push_back(*c);
                }
    return out;
}

}  // namespace attnjit::codegen

namespace attnjit {

std::ostream& operator<<(std::ostream& os, const TileConfig& t) {
    return os << "block_m=" << t.block_m << " block_n=" << t.block_n << " warps=" << t.warps
              << " stages=" << t.stages;
}

std::ostream& operator<<(std::ostream& os, const KernelConfig& c) {
    os << kernel_kind_name(c.kind) << " " << mainloop_kind_name(c.mainloop) << " " << elem_kind_name(c.elem) << " d"
       << c.head_dim_qk << "x" << c.head_dim_v << " ";
    const int tq = tile_head_dim(c.head_dim_qk), tv = tile_head_dim(c.head_dim_v);
    if (head_dims_padded(c)) os << "(tiles d" << tq << "x" << tv << ") ";
    return os << c.tile << (c.score_conv ? " score_conv" : "") << (c.bias_tile ? " bias_tile" : "")
              << (c.recip_band ? " recip_band" : "") << (c.latent ? " latent=" + std::to_string(c.latent) : "")
              << c.schedule;
}

std::ostream& operator<<(std::ostream& os, const CtaSchedule& s) {  // nothing for the kernel's own
    if (s.order != kOrderAuto) os << " cta_order=" << cta_order_name(s.order);
    if (s.grid != Sm90Grid::by_size) os << " grid=" << sm90_grid_name(s.grid);
    return os;
}

}  // namespace attnjit

namespace attnjit::codegen {

std::string to_string(const TileConfig& t) {
    std::ostringstream s;
    s << t;
    return s.str();
}

std::string config_id(const KernelConfig& c) {
    std::ostringstream s;
    const TileConfig& t = c.tile;
    s << kernel_kind_info(c.kind).name_prefix << "_" << mainloop_kind_name(c.mainloop)
      << "_" << elem_kind_name(c.elem) << "_d" << c.head_dim_qk << "x" << c.head_dim_v << "_m" << t.block_m << "n"
      << t.block_n << "w" << t.warps << "s" << t.stages << (c.score_conv ? "_conv" : "")
      << (c.bias_tile ? "_bias" : "") << (c.recip_band ? "_band" : "")
      << (c.latent ? "_lat" + std::to_string(c.latent) : "");
    return s.str();
}

}  // namespace attnjit::codegen
