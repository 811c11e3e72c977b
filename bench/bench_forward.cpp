// Forward benchmark of attnjit through the product path (DSL -> codegen -> NVRTC ->
// cache -> Driver API launch), on the shapes of ANCHORS.md, plus compile and cache
// timings. One JSON object per line on stdout; bench/run_device.sh runs it beside the
// PyTorch anchors (bench/sdpa_anchor.py) on the same GPU.
//
// FLOP convention (ANCHORS.md): 4 * B * H * Nq * Nk * D, halved for causal masks; other
// masks are counted at the density of the mask (the fraction of kept (i, j) pairs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reference/host_tensor.h"
#include "api/attnjit.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/kernel_cache.h"

using namespace attnjit;
using namespace attnjit::dsl;
using runtime::cuda;
using runtime::check_cu;

namespace {

struct Case {
    std::string variant;
    AttentionSpec spec;
    int B, H, N, D;
    double density;  // fraction of (i, j) pairs the mask keeps, for the FLOP count
    std::function<void(LaunchArgs&, std::vector<runtime::DeviceTensor>&)> extras;
    std::optional<TileConfig> tile = std::nullopt;  // the default tile when unset
    std::optional<MainloopKind> mainloop = std::nullopt;  // the default loop when unset
};

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

runtime::DeviceTensor random_device(DType dt, std::vector<int64_t> shape, uint64_t seed) {
    reference::HostTensor h(dt, std::move(shape));
    reference::fill_normal(h, seed);
    return runtime::to_device(h);
}

// Median of `reps` event-timed launches after `warmup` untimed ones, in ms.
double time_ms(const std::function<void()>& launch, int warmup = 5, int reps = 30) {
    for (int i = 0; i < warmup; ++i) launch();
    CUevent a, b;
    check_cu(cuda().cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
    check_cu(cuda().cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
        check_cu(cuda().cuEventRecord(a, nullptr), "cuEventRecord");
        launch();
        check_cu(cuda().cuEventRecord(b, nullptr), "cuEventRecord");
        check_cu(cuda().cuEventSynchronize(b), "cuEventSynchronize");
        float t = 0;
        check_cu(cuda().cuEventElapsedTime(&t, a, b), "cuEventElapsedTime");
        ms.push_back(t);
    }
    cuda().cuEventDestroy(a);
    cuda().cuEventDestroy(b);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (int D : {64, 128, 256}) {
        const int H = 2048 / D;
        for (int N : {1024, 4096, 16384}) {
            const int B = 16384 / N;
            auto base = AttentionSpec().dtype(DType::bf16).head_dim(D);
            out.push_back({"plain", base, B, H, N, D, 1.0, nullptr});
            out.push_back({"causal", AttentionSpec(base).mask(mods::causal()), B, H, N, D, 0.5, nullptr});
        }
    }
    // Variants at FlexAttention's anchor shapes (D = 128, H = 16, N = 2048 and 8192).
    for (int N : {2048, 8192}) {
        const int B = 16384 / N, H = 16, D = 128;
        auto base = AttentionSpec().dtype(DType::bf16).head_dim(D).mask(mods::causal());
        Tensor slopes("slopes", DType::f32, 1);
        out.push_back({"alibi_causal", AttentionSpec(base).score_mod(mods::alibi(slopes)), B, H, N, D, 0.5,
                       [H](LaunchArgs& a, std::vector<runtime::DeviceTensor>& keep) {
                           keep.push_back(random_device(DType::f32, {H}, 7));
                           a.tensors["slopes"] = keep.back().view;
                       }});
        out.push_back({"softcap_causal", AttentionSpec(base).score_mod(mods::softcap(30.0)), B, H, N, D, 0.5, nullptr});
        const double w = 1024;
        out.push_back({"sliding_window_1024", AttentionSpec(base).mask(mods::sliding_window(Expr(1024))), B, H, N, D,
                       (w * N - w * (w - 1) / 2) / (double(N) * N), nullptr});
    }
    // Multi-Token Attention's score convolution (c 6 x 11) beside causal attention on the
    // same shapes (D 128, H 16, B * N = 16384); both counted at causal density.
    for (int N : {1024, 2048, 4096, 8192}) {
        const int B = 16384 / N, H = 16, D = 128;
        auto base = AttentionSpec().dtype(DType::bf16).head_dim(D);
        out.push_back({"causal_h16", AttentionSpec(base).mask(mods::causal()), B, H, N, D, 0.5, nullptr});
        out.push_back({"mta_conv_6x11", AttentionSpec(base).score_conv("theta", 6, 11), B, H, N, D, 0.5,
                       [H](LaunchArgs& a, std::vector<runtime::DeviceTensor>& keep) {
                           keep.push_back(random_device(DType::f32, {H, 6, 11}, 9));
                           a.tensors["theta"] = keep.back().view;
                       }});
    }
    // The reciprocal band (RA, W 64, causal) beside causal attention on the same shapes (D 128,
    // H 16, B * N = 16384); both counted at causal density.
    for (int N : {1024, 4096, 16384}) {
        const int B = 16384 / N, H = 16, D = 128;
        auto base = AttentionSpec().dtype(DType::bf16).head_dim(D);
        if (N == 16384) out.push_back({"causal_h16", AttentionSpec(base).mask(mods::causal()), B, H, N, D, 0.5, nullptr});
        out.push_back({"reciprocal_band_w64", AttentionSpec(base).reciprocal_band(64, "alpha"), B, H, N, D, 0.5,
                       [H](LaunchArgs& a, std::vector<runtime::DeviceTensor>& keep) {
                           keep.push_back(random_device(DType::f32, {H}, 11));
                           a.tensors["alpha"] = keep.back().view;
                       }});
    }
    return out;
}

void print_case(const Case& c, double ms, double compile_s, const std::string& gpu, const std::string& commit) {
    const double flops = 4.0 * c.B * c.H * double(c.N) * c.N * c.D * c.density;
    std::printf(
        "{\"impl\": \"attnjit\", \"variant\": \"%s\", \"dtype\": \"bf16\", \"B\": %d, \"H\": %d, \"Hkv\": %d, "
        "\"Nq\": %d, \"Nk\": %d, \"D\": %d, \"causal\": %s, \"mode\": \"fwd\", \"ms\": %.5f, \"tflops\": %.2f, "
        "\"compile_s\": %.3f, \"gpu\": \"%s\", \"commit\": \"%s\"}\n",
        c.variant.c_str(), c.B, c.H, c.H, c.N, c.N, c.D, c.density < 1.0 ? "true" : "false", ms,
        flops / ms / 1e9, compile_s, gpu.c_str(), commit.c_str());
    std::fflush(stdout);
}

// Cold compile, disk-cache hit and memory-cache hit of one spec, in a fresh cache.
void compile_timings(const std::string& gpu, const std::string& commit) {
    auto spec = AttentionSpec().dtype(DType::bf16).head_dim(128).score_mod(mods::softcap(scalar("cap"))).mask(mods::causal());
    auto& cache = runtime::KernelCache::global();
    double t0 = now_s();
    { Attention cold(spec); }
    double cold_s = now_s() - t0;
    cache.clear_memory();
    t0 = now_s();
    Attention disk(spec);
    double disk_s = now_s() - t0;
    const int n = 1000;
    t0 = now_s();
    for (int i = 0; i < n; ++i) Attention hit(spec);
    double mem_s = (now_s() - t0) / n;
    std::printf("{\"kind\": \"compile\", \"cold_compile_s\": %.4f, \"disk_hit_ms\": %.3f, "
                "\"memory_hit_us\": %.2f, \"gpu\": \"%s\", \"commit\": \"%s\"}\n",
                cold_s, disk_s * 1e3, mem_s * 1e6, gpu.c_str(), commit.c_str());
    std::fflush(stdout);
}

// One backward configuration of a sweep: its name, spec and options.
struct BackwardRun {
    std::string name;
    AttentionSpec spec;
    std::optional<TileConfig> tile;
    bool fused;
    std::optional<MainloopKind> mainloop = std::nullopt;
    bool deterministic = true;  // false: the fast backward (dQ added in any order)
};

// Times forward, backward alone and forward + backward of each run on one shape (random
// bf16 inputs, B H N D, Hkv = H); the reciprocal band's runs get alpha and d alpha.
// FLOPs: the forward's at `density`, the backward's 2.5 times that.
void time_backward_runs(const std::vector<BackwardRun>& runs, const char* kind, int B, int H, int N, int D,
                        double density, const std::string& only_run, const std::string& gpu, const std::string& commit) {
    auto q = random_device(DType::bf16, {B, H, N, D}, 1), k = random_device(DType::bf16, {B, H, N, D}, 2);
    auto v = random_device(DType::bf16, {B, H, N, D}, 3), d_o = random_device(DType::bf16, {B, H, N, D}, 4);
    auto alpha = random_device(DType::f32, {H}, 5);
    runtime::DeviceBuffer o(size_t(B) * H * N * D * 2), lse(size_t(B) * H * N * 4), dq(size_t(B) * H * N * D * 2),
        dk(size_t(B) * H * N * D * 2), dv(size_t(B) * H * N * D * 2), dalpha(size_t(H) * 4);
    LaunchArgs a;
    a.q = q.view;
    a.k = k.view;
    a.v = v.view;
    a.o = TensorView::contiguous(o.data(), DType::bf16, {B, H, N, D});
    a.lse = TensorView::contiguous(lse.data(), DType::f32, {B, H, N});
    GradArgs g{d_o.view, TensorView::contiguous(dq.data(), DType::bf16, {B, H, N, D}),
               TensorView::contiguous(dk.data(), DType::bf16, {B, H, N, D}),
               TensorView::contiguous(dv.data(), DType::bf16, {B, H, N, D})};
    for (const BackwardRun& r : runs) {
        if (!only_run.empty() && r.name != only_run) continue;
        LaunchArgs ra = a;
        GradArgs rg = g;
        CompileOptions bopts;
        bopts.tile = r.tile;
        bopts.fused_backward = r.fused;
        bopts.mainloop = r.mainloop;
        bopts.deterministic = r.deterministic;
        if (r.spec.has_reciprocal_band()) {
            ra.tensors["alpha"] = alpha.view;
            rg.grads["alpha"] = TensorView::contiguous(dalpha.data(), DType::f32, {H});
            bopts.grads = {"alpha"};
        }
        try {
            const Attention fwd(r.spec);
            const AttentionBackward bwd(r.spec, bopts);
            const double f = time_ms([&] { fwd(ra); });
            const double b = time_ms([&] { bwd(ra, rg); });
            const double fb = time_ms([&] {
                fwd(ra);
                bwd(ra, rg);
            });
            const double flops = 4.0 * B * H * double(N) * N * D * density;
            std::printf("{\"kind\": \"%s\", \"run\": \"%s\", \"N\": %d, \"B\": %d, \"H\": %d, \"D\": %d, "
                        "\"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwdbwd_ms\": %.4f, \"fwd_tflops\": %.1f, "
                        "\"bwd_tflops\": %.1f, \"fwdbwd_tflops\": %.1f, \"gpu\": \"%s\", \"commit\": \"%s\"}\n",
                        kind, r.name.c_str(), N, B, H, D, f, b, fb, flops / f / 1e9, 2.5 * flops / b / 1e9,
                        3.5 * flops / fb / 1e9, gpu.c_str(), commit.c_str());
            std::fflush(stdout);
        } catch (const UserError& e) {
            std::fprintf(stderr, "%s: %s\n", r.name.c_str(), e.what());
        }
    }
}

// `bench_forward COMMIT band_backward`: the reciprocal band's forward + backward (d alpha
// too) beside causal attention's (fused and two-pass backward), D 128, H 16, B * N = 16384:
// backward_fused on its default tile and on 64 x 64, and the two-pass backward.
// only_n, only_run: one N and one run (by name) of the sweep, for a profiler; 0 / empty: all.
void band_backward_sweep(const std::string& gpu, const std::string& commit, int only_n, const std::string& only_run) {
    for (int N : {1024, 4096, 16384}) {
        if (only_n && N != only_n) continue;
        const int B = 16384 / N, H = 16, D = 128;
        auto base = AttentionSpec().dtype(DType::bf16).head_dim(D).return_lse();
        const AttentionSpec causal = AttentionSpec(base).mask(mods::causal());
        const AttentionSpec band = AttentionSpec(base).reciprocal_band(64, "alpha");
        time_backward_runs({{"causal_fused", causal, std::nullopt, true},
                            {"causal_two_pass", causal, std::nullopt, false},
                            {"band_fused", band, std::nullopt, true},
                            {"band_fused_m64n64w8", band, TileConfig{64, 64, 8, 2}, true},
                            {"band_two_pass", band, std::nullopt, false}},
                           "band_backward", B, H, N, D, 0.5, only_run, gpu, commit);
    }
}

// `bench_forward COMMIT backward_loops`: plain and causal backward, D 64 and 128, H D = 2048,
// B N = 16384: the fused backward on the sm80 loop and on the sm90 loop (ordered and fast), and the two-pass
// backward with the sm90 dK/dV kernel.
void backward_loops_sweep(const std::string& gpu, const std::string& commit, int only_n, const std::string& only_run) {
    for (int D : {64, 128}) {
        for (int N : {1024, 4096, 16384}) {
            if (only_n && N != only_n) continue;
            const int B = 16384 / N, H = 2048 / D;
            const auto base = AttentionSpec().dtype(DType::bf16).head_dim(D).return_lse();
            for (const bool causal : {false, true}) {
                const AttentionSpec spec = causal ? AttentionSpec(base).mask(mods::causal()) : base;
                const std::string v = causal ? "causal" : "plain";
                time_backward_runs({{v + "_fused_sm80", spec, std::nullopt, true, MainloopKind::sm80},
                                    {v + "_fused_sm90", spec, std::nullopt, true, MainloopKind::sm90},
                                    {v + "_fast_sm90", spec, std::nullopt, true, MainloopKind::sm90, false},
                                    {v + "_two_pass_sm90", spec, std::nullopt, false, MainloopKind::sm90}},
                                   "backward_loops", B, H, N, D, causal ? 0.5 : 1.0, only_run, gpu, commit);
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::string commit = argc > 1 ? argv[1] : "unknown";
    // `bench_forward COMMIT conv_tiles` / `band_tiles`: the score convolution's (reciprocal
    // band's) cases only, on each tile of the sweep (variant names carry the tile).
    const std::string sweep = argc > 2 ? argv[2] : "";
    const bool conv_tiles = sweep == "conv_tiles" || sweep == "band_tiles";
    // `bench_forward COMMIT mainloops`: every case on the sm80 loop and on the sm90 loop (where
    // it carries the spec), side by side (variant names end in _sm80 / _sm90).
    const bool mainloops = sweep == "mainloops";
    // `bench_forward COMMIT sm90`: the cases the sm90 loop carries, on the default loop only.
    // `sm90_grids`: those cases on the sm90 loop's persistent grid and on one CTA an item
    // (ATTNJIT_SM90_GRID=items), timed one after the other (variant names end in _persistent /
    // _items).
    const bool grids = sweep == "sm90_grids";
    const bool sm90_only = sweep == "sm90" || grids;
    if (auto why = runtime::why_no_gpu()) {
        std::fprintf(stderr, "bench_forward needs a GPU: %s\n", why->c_str());
        return 77;
    }
    const std::string gpu = runtime::current_device().name;
    if (sweep == "band_backward" || sweep == "backward_loops") {
        (sweep == "band_backward" ? band_backward_sweep : backward_loops_sweep)(gpu, commit,
                                                                               argc > 3 ? std::atoi(argv[3]) : 0,
                                                                               argc > 4 ? argv[4] : "");
        return 0;
    }
    if (!conv_tiles) compile_timings(gpu, commit);
    std::vector<Case> todo;
    for (const Case& c : cases()) {
        if (sm90_only) {
            if (!c.spec.has_score_conv() && !c.spec.has_reciprocal_band()) todo.push_back(c);
            continue;
        }
        if (mainloops) {
            for (MainloopKind m : {MainloopKind::sm80, MainloopKind::sm90}) {
                Case mc = c;
                mc.mainloop = m;
                mc.variant += std::string("_") + mainloop_kind_name(m);
                todo.push_back(mc);
            }
            continue;
        }
        if (!conv_tiles) {
            todo.push_back(c);
            continue;
        }
        const bool band = sweep == "band_tiles";
        if (band ? !c.spec.has_reciprocal_band() : !c.spec.has_score_conv()) continue;
        const std::vector<TileConfig> tiles =
            band ? std::vector<TileConfig>{TileConfig{128, 64, 4, 2}, TileConfig{128, 64, 4, 1}, TileConfig{64, 64, 4, 2},
                                           TileConfig{64, 64, 4, 1}, TileConfig{128, 128, 8, 2}, TileConfig{64, 128, 4, 2}}
                 : std::vector<TileConfig>{TileConfig{128, 128, 8, 1}, TileConfig{128, 128, 8, 2},
                                           TileConfig{128, 64, 8, 1}, TileConfig{64, 128, 4, 2}, TileConfig{64, 64, 4, 2}};
        for (const TileConfig& t : tiles) {
            Case tc = c;
            tc.tile = t;
            tc.variant += "_m" + std::to_string(t.block_m) + "n" + std::to_string(t.block_n) + "w" +
                          std::to_string(t.warps) + "s" + std::to_string(t.stages);
            todo.push_back(tc);
        }
    }
    for (const Case& c : todo) {
        std::vector<runtime::DeviceTensor> keep;
        auto q = random_device(DType::bf16, {c.B, c.H, c.N, c.D}, 1);
        auto k = random_device(DType::bf16, {c.B, c.H, c.N, c.D}, 2);
        auto v = random_device(DType::bf16, {c.B, c.H, c.N, c.D}, 3);
        runtime::DeviceBuffer o(size_t(c.B) * c.H * c.N * c.D * 2);
        LaunchArgs a;
        a.q = q.view;
        a.k = k.view;
        a.v = v.view;
        a.o = TensorView::contiguous(o.data(), DType::bf16, {c.B, c.H, c.N, c.D});
        if (c.extras) c.extras(a, keep);
        CompileOptions options;
        options.tile = c.tile;
        options.mainloop = c.mainloop;
        std::optional<Attention> attn;
        try {
            attn.emplace(c.spec, options);
        } catch (const UserError& e) {  // a tile the sweep tries that does not fit
            std::fprintf(stderr, "%s: %s\n", c.variant.c_str(), e.what());
            continue;
        }
        if (grids) {
            for (const bool items : {false, true}) {
                if (items) ::setenv("ATTNJIT_SM90_GRID", "items", 1);
                Case gc = c;
                gc.variant += items ? "_items" : "_persistent";
                print_case(gc, time_ms([&] { (*attn)(a); }), attn->compile_seconds(), gpu, commit);
                ::unsetenv("ATTNJIT_SM90_GRID");
            }
            continue;
        }
        double ms = time_ms([&] { (*attn)(a); });
        print_case(c, ms, attn->compile_seconds(), gpu, commit);
    }
    return 0;
}
