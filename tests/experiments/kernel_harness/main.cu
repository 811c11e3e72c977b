// Standalone GPU harness for templates/attnjit/forward/kernel.cuh: correctness against
// an fp64 CPU reference (ragged lengths, GQA, strided layouts, all dtypes and head dims,
// the hand-written variants of variants.cuh), then timing of the speed shapes.
// Usage: attnjit_kernel_harness [--no-bench] [--bench-only] [--quick]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "registry.h"
#include "variants.cuh"

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                         __LINE__, #x);                                                             \
            std::exit(2);                                                                           \
        }                                                                                           \
    } while (0)

namespace harness {

std::vector<KernelEntry>& registry() {
    static std::vector<KernelEntry> r;
    return r;
}

static const char* elem_name(attnjit::ElemKind e) {
    return e == attnjit::ElemKind::f16 ? "f16" : e == attnjit::ElemKind::bf16 ? "bf16" : "f32";
}
static const char* variant_name(int v) {
    static const char* n[] = {"plain", "causal_tl", "softcap", "docmask", "causal_br", "thresh", "causal_nomask",
                              "uniform"};
    return n[v];
}

// ---- host storage conversions ------------------------------------------------------------
static uint16_t to_bits(attnjit::ElemKind e, float x) {
    if (e == attnjit::ElemKind::f16) {
        __half h = __float2half_rn(x);
        uint16_t u;
        std::memcpy(&u, &h, 2);
        return u;
    }
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
static float from_bits(attnjit::ElemKind e, uint16_t u) {
    if (e == attnjit::ElemKind::f16) {
        __half h;
        std::memcpy(&h, &u, 2);
        return __half2float(h);
    }
    __nv_bfloat16 h;
    std::memcpy(&h, &u, 2);
    return __bfloat162float(h);
}

// A device tensor [B, H, N, D] in one of three layouts, with a host copy of its values.
struct Tensor4 {
    int B, H, N, D, layout;  // 0: BHND contiguous, 1: BNHD, 2: BHND with row pitch D + 8
    long long stride[3];     // b, h, n (elements)
    size_t elems;            // allocation size (elements)
    std::vector<double> host;  // logical values [b][h][n][d]
    void* dev = nullptr;
    attnjit::ElemKind e;

    size_t off(int b, int h, int n, int d) const { return b * stride[0] + h * stride[1] + n * stride[2] + d; }

    void init(attnjit::ElemKind e_, int B_, int H_, int N_, int D_, int layout_) {
        e = e_, B = B_, H = H_, N = N_, D = D_, layout = layout_;
        if (layout == 0) {
            stride[2] = D, stride[1] = (long long)N * D, stride[0] = (long long)H * N * D;
        } else if (layout == 1) {
            stride[1] = D, stride[2] = (long long)H * D, stride[0] = (long long)N * H * D;
        } else {
            stride[2] = D + 8, stride[1] = (long long)N * (D + 8), stride[0] = (long long)H * N * (D + 8);
        }
        elems = (size_t)B * stride[0];
        host.assign((size_t)B * H * N * D, 0.0);
        CK(cudaMalloc(&dev, elems * bytes()));
    }
    int bytes() const { return e == attnjit::ElemKind::f32 ? 4 : 2; }
    void fill_random(std::mt19937_64& rng) {
        std::normal_distribution<float> nd(0.f, 1.f);
        std::vector<unsigned char> buf(elems * bytes());
        // poison the gaps of padded layouts with NaN: the kernel must never read them
        if (bytes() == 2) {
            std::fill((uint16_t*)buf.data(), (uint16_t*)buf.data() + elems, (uint16_t)0x7fff);
        } else {
            std::fill((uint32_t*)buf.data(), (uint32_t*)buf.data() + elems, 0x7fffffffu);
        }
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h)
                for (int n = 0; n < N; ++n)
                    for (int d = 0; d < D; ++d) {
                        float x = nd(rng);
                        size_t o = off(b, h, n, d);
                        double v;
                        if (bytes() == 2) {
                            uint16_t u = to_bits(e, x);
                            ((uint16_t*)buf.data())[o] = u;
                            v = from_bits(e, u);
                        } else {
                            ((float*)buf.data())[o] = x;
                            v = x;
                        }
                        host[(((size_t)b * H + h) * N + n) * D + d] = v;
                    }
        CK(cudaMemcpy(dev, buf.data(), buf.size(), cudaMemcpyHostToDevice));
    }
    void poison() { CK(cudaMemset(dev, 0xff, elems * bytes())); }  // NaN in every dtype
    std::vector<double> download() const {
        std::vector<unsigned char> buf(elems * bytes());
        CK(cudaMemcpy(buf.data(), dev, buf.size(), cudaMemcpyDeviceToHost));
        std::vector<double> out((size_t)B * H * N * D);
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < H; ++h)
                for (int n = 0; n < N; ++n)
                    for (int d = 0; d < D; ++d) {
                        size_t o = off(b, h, n, d);
                        out[(((size_t)b * H + h) * N + n) * D + d] =
                            bytes() == 2 ? from_bits(e, ((uint16_t*)buf.data())[o]) : ((float*)buf.data())[o];
                    }
        return out;
    }
    void free_() {
        if (dev) cudaFree(dev);
        dev = nullptr;
    }
};

struct Case {
    attnjit::ElemKind e;
    int dqk, dv, variant;
    int B, Hq, Hkv, Nq, Nk, layout;
    bool bench_entry = false;
    attnjit::TileConfig tile{0, 0, 0, 0};
};

static const KernelEntry* find_entry(const Case& c) {
    for (const KernelEntry& k : registry()) {
        if (k.elem != c.e || k.dqk != c.dqk || k.dv != c.dv || k.variant != c.variant || k.bench != c.bench_entry)
            continue;
        if (c.bench_entry && (k.tile.block_m != c.tile.block_m || k.tile.block_n != c.tile.block_n ||
                              k.tile.warps != c.tile.warps || k.tile.stages != c.tile.stages))
            continue;
        return &k;
    }
    return nullptr;
}

static void set_smem(const KernelEntry& k) {
    CK(cudaFuncSetAttribute(k.func, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem_bytes));
}

// fp64 reference of one (b, h) head, rows [q_begin, q_end).
struct RefInputs {
    const Tensor4 *q, *k, *v;
    int variant;
    float cap;
    const std::vector<int>* doc;  // [B][L]
    int doc_len;
    const std::vector<float>* w;  // [B][Nk]
    double scale;
};
static bool ref_keep(const RefInputs& in, int b, int q, int k, int nq, int nk) {
    switch (in.variant) {
        case kCausalTL: return k <= q;
        case kCausalBR: return k <= q + nk - nq;
        case kDoc: return (*in.doc)[(size_t)b * in.doc_len + q] == (*in.doc)[(size_t)b * in.doc_len + k];
        case kThresh: return (*in.w)[(size_t)b * nk + k] > 0.f;
        default: return true;
    }
}
static void reference(const RefInputs& in, std::vector<double>& o, std::vector<double>& lse) {
    const Tensor4 &Q = *in.q, &K = *in.k, &V = *in.v;
    const int B = Q.B, Hq = Q.H, Nq = Q.N, Nk = K.N, Dqk = Q.D, Dv = V.D, group = Q.H / K.H;
    o.assign((size_t)B * Hq * Nq * Dv, 0.0);
    lse.assign((size_t)B * Hq * Nq, 0.0);
    std::atomic<long long> next{0};
    const long long rows = (long long)B * Hq * Nq;
    auto work = [&]() {
        std::vector<double> t(Nk);
        std::vector<char> keep(Nk);
        for (;;) {
            long long r = next.fetch_add(1);
            if (r >= rows) break;
            const int q = r % Nq, h = (r / Nq) % Hq, b = r / ((long long)Nq * Hq), kh = h / group;
            const double* qr = &Q.host[(((size_t)b * Hq + h) * Nq + q) * Dqk];
            double m = -INFINITY;
            for (int k = 0; k < Nk; ++k) {
                const double* kr = &K.host[(((size_t)b * K.H + kh) * Nk + k) * Dqk];
                double s = 0;
                for (int d = 0; d < Dqk; ++d) s += qr[d] * kr[d];
                s *= in.scale;
                if (in.variant == kSoftcap) s = in.cap * std::tanh(s / in.cap);
                keep[k] = ref_keep(in, b, q, k, Nq, Nk);
                t[k] = s;
                if (keep[k]) m = std::max(m, s);
            }
            double* orow = &o[(size_t)r * Dv];
            if (m == -INFINITY) {
                lse[r] = -INFINITY;
                continue;
            }
            double l = 0;
            for (int k = 0; k < Nk; ++k) {
                if (!keep[k]) continue;
                const double p = std::exp(t[k] - m);
                l += p;
                const double* vr = &V.host[(((size_t)b * V.H + kh) * Nk + k) * Dv];
                for (int d = 0; d < Dv; ++d) orow[d] += p * vr[d];
            }
            for (int d = 0; d < Dv; ++d) orow[d] /= l;
            lse[r] = m + std::log(l);
        }
    };
    unsigned nt = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
    std::vector<std::thread> th;
    for (unsigned i = 0; i < nt; ++i) th.emplace_back(work);
    for (auto& x : th) x.join();
}

static double tolerance(attnjit::ElemKind e) {
    return e == attnjit::ElemKind::f16 ? 3e-3 : e == attnjit::ElemKind::bf16 ? 2e-2 : 1e-4;
}

struct Totals {
    int run = 0, failed = 0, missing = 0;
} g_tot;

static bool run_case(const Case& c, uint64_t seed) {
    const KernelEntry* ke = find_entry(c);
    if (!ke) {
        std::printf("MISSING kernel %s dqk=%d dv=%d %s\n", elem_name(c.e), c.dqk, c.dv, variant_name(c.variant));
        ++g_tot.missing;
        return false;
    }
    set_smem(*ke);
    std::mt19937_64 rng(seed);
    Tensor4 Q, K, V, O;
    Q.init(c.e, c.B, c.Hq, c.Nq, c.dqk, c.layout);
    K.init(c.e, c.B, c.Hkv, c.Nk, c.dqk, c.layout);
    V.init(c.e, c.B, c.Hkv, c.Nk, c.dv, (c.layout + 1) % 3);  // V in another layout than K
    O.init(c.e, c.B, c.Hq, c.Nq, c.dv, c.layout);
    Q.fill_random(rng);
    K.fill_random(rng);
    V.fill_random(rng);
    O.poison();
    // LSE [B, Hq, Nq] with a padded sequence stride.
    const long long lse_n = 1, lse_h = c.Nq + 3, lse_b = (long long)c.Hq * (c.Nq + 3);
    float* lse_dev;
    CK(cudaMalloc(&lse_dev, sizeof(float) * c.B * lse_b));
    CK(cudaMemset(lse_dev, 0xff, sizeof(float) * c.B * lse_b));

    // Captured tensors.
    const int L = std::max(c.Nq, c.Nk);
    std::vector<int> doc((size_t)c.B * L);
    for (int b = 0; b < c.B; ++b) {
        int id = 0, left = 0;
        for (int i = 0; i < L; ++i) {
            if (left == 0) {
                left = 1 + (int)(rng() % 300);
                id += 1 + (int)(rng() % 2);
            }
            doc[(size_t)b * L + i] = id;
            --left;
        }
    }
    std::vector<float> w((size_t)c.B * c.Nk);
    std::vector<uint16_t> wbits(w.size());
    for (int b = 0; b < c.B; ++b) {
        int left = 0;
        float sign = 1.f;
        for (int i = 0; i < c.Nk; ++i) {
            if (left == 0) {
                left = 1 + (int)(rng() % 200);
                sign = (rng() % 2) ? 1.f : -1.f;
            }
            float x = sign * (0.25f + (float)(rng() % 1000) / 1000.f);
            wbits[(size_t)b * c.Nk + i] = to_bits(attnjit::ElemKind::bf16, x);
            w[(size_t)b * c.Nk + i] = from_bits(attnjit::ElemKind::bf16, wbits[(size_t)b * c.Nk + i]);
            --left;
        }
    }
    int* doc_dev;
    uint16_t* w_dev;
    CK(cudaMalloc(&doc_dev, doc.size() * sizeof(int)));
    CK(cudaMemcpy(doc_dev, doc.data(), doc.size() * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&w_dev, wbits.size() * 2));
    CK(cudaMemcpy(w_dev, wbits.data(), wbits.size() * 2, cudaMemcpyHostToDevice));

    Params p{};
    attnjit::ForwardArgs& a = p.args;
    a.q = Q.dev, a.k = K.dev, a.v = V.dev, a.o = O.dev, a.lse = lse_dev;
    for (int i = 0; i < 3; ++i) {
        a.q_stride[i] = Q.stride[i], a.k_stride[i] = K.stride[i], a.v_stride[i] = V.stride[i];
        a.o_stride[i] = O.stride[i];
    }
    a.lse_stride[0] = lse_b, a.lse_stride[1] = lse_h, a.lse_stride[2] = lse_n;
    a.batch = c.B, a.q_heads = c.Hq, a.kv_heads = c.Hkv, a.q_len = c.Nq, a.kv_len = c.Nk;
    a.group = c.Hq / c.Hkv;
    const double scale = 1.0 / std::sqrt((double)c.dqk);
    a.scale = (float)scale;
    a.scale_log2 = (float)(scale * 1.4426950408889634);
    p.scalar_cap = 2.0f;
    p.tensor_doc.ptr = doc_dev, p.tensor_doc.stride[0] = L, p.tensor_doc.stride[1] = 1;
    p.tensor_w.ptr = reinterpret_cast<const attnjit::bf16_t*>(w_dev), p.tensor_w.stride[0] = c.Nk,
    p.tensor_w.stride[1] = 1;

    CK(ke->launch(p, 0));
    CK(cudaDeviceSynchronize());

    std::vector<double> ref_o, ref_lse;
    RefInputs in{&Q, &K, &V, c.variant, p.scalar_cap, &doc, L, &w, scale};
    reference(in, ref_o, ref_lse);
    std::vector<double> got = O.download();
    std::vector<float> lse_h_buf(c.B * lse_b);
    CK(cudaMemcpy(lse_h_buf.data(), lse_dev, lse_h_buf.size() * 4, cudaMemcpyDeviceToHost));

    double max_err = 0, max_lse = 0;
    long long nan_o = 0, bad_lse = 0, empty_rows = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(got[i])) {
            ++nan_o;
            continue;
        }
        max_err = std::max(max_err, std::fabs(got[i] - ref_o[i]));
    }
    for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.Hq; ++h)
            for (int q = 0; q < c.Nq; ++q) {
                const double r = ref_lse[((size_t)b * c.Hq + h) * c.Nq + q];
                const float g = lse_h_buf[b * lse_b + h * lse_h + q * lse_n];
                if (std::isinf(r)) {
                    ++empty_rows;
                    if (!(std::isinf(g) && g < 0)) ++bad_lse;
                } else if (std::isnan(g)) {
                    ++bad_lse;
                } else {
                    max_lse = std::max(max_lse, std::fabs((double)g - r));
                }
            }
    const bool ok = nan_o == 0 && bad_lse == 0 && max_err <= tolerance(c.e) && max_lse <= 1e-3;
    ++g_tot.run;
    if (!ok) ++g_tot.failed;
    std::printf("%s %-4s dqk=%3d dv=%3d %-9s tile=%dx%dx%dw%ds B=%d Hq=%d Hkv=%d Nq=%4d Nk=%4d layout=%d  "
                "max|dO|=%.2e max|dLSE|=%.2e nanO=%lld badLSE=%lld empty_rows=%lld\n",
                ok ? "PASS" : "FAIL", elem_name(c.e), c.dqk, c.dv, variant_name(c.variant), ke->tile.block_m,
                ke->tile.block_n, ke->tile.warps, ke->tile.stages, c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.layout, max_err,
                max_lse, nan_o, bad_lse, empty_rows);
    std::fflush(stdout);
    Q.free_(), K.free_(), V.free_(), O.free_();
    cudaFree(lse_dev), cudaFree(doc_dev), cudaFree(w_dev);
    return ok;
}

// ---- timing ------------------------------------------------------------------------------
struct BenchRow {
    int d, n, causal, variant;
    attnjit::TileConfig t;
    double ms, tflops;
};

static double time_entry(const KernelEntry& k, int D, int N, int H, std::vector<BenchRow>& rows, int causal) {
    const int B = 16384 / N;
    set_smem(k);
    const size_t elems = (size_t)B * H * N * D;
    static void* bufs[4] = {nullptr, nullptr, nullptr, nullptr};
    static size_t cap = 0;
    if (cap < elems) {
        for (auto& b : bufs)
            if (b) cudaFree(b);
        for (auto& b : bufs) CK(cudaMalloc(&b, elems * 2));
        cap = elems;
        std::vector<uint16_t> h(elems);
        std::mt19937_64 rng(1234);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (int i = 0; i < 3; ++i) {
            for (auto& x : h) x = to_bits(attnjit::ElemKind::bf16, nd(rng));
            CK(cudaMemcpy(bufs[i], h.data(), elems * 2, cudaMemcpyHostToDevice));
        }
    }
    Params p{};
    attnjit::ForwardArgs& a = p.args;
    a.q = bufs[0], a.k = bufs[1], a.v = bufs[2], a.o = bufs[3], a.lse = nullptr;
    const long long st[3] = {(long long)H * N * D, (long long)N * D, D};
    for (int i = 0; i < 3; ++i) a.q_stride[i] = a.k_stride[i] = a.v_stride[i] = a.o_stride[i] = st[i];
    a.batch = B, a.q_heads = H, a.kv_heads = H, a.q_len = N, a.kv_len = N, a.group = 1;
    a.scale = 1.f / std::sqrt((float)D);
    a.scale_log2 = a.scale * 1.4426950408889634f;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 5; ++i) CK(k.launch(p, 0));
    CK(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < 30; ++i) {
        CK(cudaEventRecord(e0));
        CK(k.launch(p, 0));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    const double ms = ts[ts.size() / 2];
    double flop = 4.0 * B * H * (double)N * N * D;
    if (causal) flop /= 2;
    const double tf = flop / (ms * 1e-3) / 1e12;
    rows.push_back(BenchRow{D, N, causal, k.variant, k.tile, ms, tf});
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return tf;
}

}  // namespace harness

int main(int argc, char** argv) {
    using namespace harness;
    bool bench = true, check = true, quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--no-bench")) bench = false;
        if (!std::strcmp(argv[i], "--bench-only")) check = false;
        if (!std::strcmp(argv[i], "--quick")) quick = true;
    }
    register_f16();
    register_bf16();
    register_f32();
    register_bench();
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, %d registered kernels\n", prop.name, prop.multiProcessorCount,
                (int)registry().size());
    // Per-kernel resources.
    for (const KernelEntry& k : registry()) {
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, k.func));
        int blocks = 0;
        set_smem(k);
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.func, k.tile.warps * 32, k.smem_bytes));
        std::printf("kernel %-4s dqk=%3d dv=%3d %-9s tile=%dx%dx%dw%ds%s regs=%d local=%zu smem=%d ctas/SM=%d\n",
                    elem_name(k.elem), k.dqk, k.dv, variant_name(k.variant), k.tile.block_m, k.tile.block_n,
                    k.tile.warps, k.tile.stages, k.bench ? " (bench)" : "", fa.numRegs, fa.localSizeBytes,
                    k.smem_bytes, blocks);
    }

    if (check) {
        uint64_t seed = 1;
        const attnjit::ElemKind elems[3] = {attnjit::ElemKind::f16, attnjit::ElemKind::bf16, attnjit::ElemKind::f32};
        const int nqs[4] = {1, 17, 129, 1000}, nks[3] = {1, 255, 4097};
        const int dpairs[8][2] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {256, 256}, {64, 128}, {256, 64}, {32, 256}};
        for (attnjit::ElemKind e : elems) {
            // Full ragged sweep at D = 64 and 128 (plain and causal), GQA, three layouts.
            for (int di = 0; di < 8; ++di) {
                const int dqk = dpairs[di][0], dv = dpairs[di][1];
                const bool full = (dqk == 64 && dv == 64) || (dqk == 128 && dv == 128);
                for (int v = 0; v < 2; ++v)
                    for (int iq = 0; iq < 4; ++iq)
                        for (int ik = 0; ik < 3; ++ik) {
                            if (!full && !((iq == 1 && ik == 1) || (iq == 3 && ik == 2) || (iq == 2 && ik == 0)))
                                continue;
                            if (quick && !(iq == 3 && ik == 2)) continue;
                            Case c{e, dqk, dv, v, 2, 4, (int)((seed % 3 == 0) ? 1 : 2), nqs[iq], nks[ik],
                                   (int)(seed % 3)};
                            run_case(c, seed++);
                        }
            }
            // The other variants at D = 64 and 128.
            for (int d : {64, 128})
                for (int v = 2; v < kNumVariants; ++v)
                    for (auto nn : {std::pair<int, int>{1000, 4097}, {1000, 255}, {129, 129}, {17, 1}}) {
                        if (quick && nn.first != 1000) continue;
                        Case c{e, d, d, v, 2, 4, 2, nn.first, nn.second, (int)(seed % 3)};
                        run_case(c, seed++);
                    }
        }
        // Each timing configuration once.
        for (const KernelEntry& k : registry()) {
            if (!k.bench || k.variant >= kNumVariants) continue;  // timing-only variants
            Case c{k.elem, k.dqk, k.dv, k.variant, 1, 2, 1, 1000, 1000, 0, true, k.tile};
            run_case(c, seed++);
        }
        std::printf("correctness: %d run, %d failed, %d missing\n", g_tot.run, g_tot.failed, g_tot.missing);
    }

    if (bench) {
        std::vector<BenchRow> rows;
        for (const KernelEntry& k : registry()) {
            if (!k.bench) continue;
            const int H = 2048 / k.dqk;
            for (int N : {1024, 4096, 16384}) time_entry(k, k.dqk, N, H, rows, k.variant == kCausalTL);
        }
        std::printf("\nbf16 forward, B*N=16384, H*D=2048, median of 30 (TFLOP/s, causal counts half)\n");
        std::printf("%4s %-14s %6s %10s %10s %10s  %s\n", "D", "tile", "N", "plain", "causal", "speedup", "");
        for (const BenchRow& r : rows) {
            if (r.causal) continue;
            for (const BenchRow& c : rows) {
                if (!c.causal || c.d != r.d || c.n != r.n || c.t.block_m != r.t.block_m ||
                    c.t.block_n != r.t.block_n || c.t.warps != r.t.warps || c.t.stages != r.t.stages)
                    continue;
                char tile[32];
                std::snprintf(tile, sizeof tile, "%dx%dx%dw%ds", r.t.block_m, r.t.block_n, r.t.warps, r.t.stages);
                std::printf("%4d %-14s %6d %10.1f %10.1f %9.2fx  (%.3f ms / %.3f ms)\n", r.d, tile, r.n, r.tflops,
                            c.tflops, r.ms / c.ms, r.ms, c.ms);
            }
        }
    }
    if (bench) {
        // Every timed row with the KV tiles it visits: ns per visited (query tile, KV tile).
        std::vector<BenchRow> rows2;
        std::printf("\n%4s %-14s %-13s %6s %9s %8s %10s\n", "D", "tile", "variant", "N", "ms", "tiles", "ns/tile");
        for (const KernelEntry& k : registry()) {
            if (!k.bench) continue;
            const int H = 2048 / k.dqk;
            for (int N : {1024, 4096, 16384}) {
                time_entry(k, k.dqk, N, H, rows2, 0);
                const BenchRow& r = rows2.back();
                const int bm = k.tile.block_m, bn = k.tile.block_n, gx = (N + bm - 1) / bm, nt = (N + bn - 1) / bn;
                long long visited = 0;
                for (int m = 0; m < gx; ++m) {
                    const int q1 = std::min((m + 1) * bm, N) - 1;
                    const int causal_tiles = q1 / bn + 1;
                    visited += k.variant == kPlain ? nt : k.variant == kUniform ? (N / 2 + bn - 1) / bn + 1 : causal_tiles;
                }
                visited *= (long long)(16384 / N) * H;
                char tile[32];
                std::snprintf(tile, sizeof tile, "%dx%dx%dw%ds", bm, bn, k.tile.warps, k.tile.stages);
                std::printf("%4d %-14s %-13s %6d %9.3f %8lld %10.2f\n", k.dqk, tile, variant_name(k.variant), N, r.ms,
                            visited, r.ms * 1e6 / visited);
            }
        }
    }
    return (check && (g_tot.failed || g_tot.missing)) ? 1 : 0;
}
