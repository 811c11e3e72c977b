// Compiles forward-kernel instantiations with NVRTC (dlopen'ed libnvrtc, the templates
// passed as in-memory headers, no include paths), as the runtime will: proves the
// templates are NVRTC-clean for sm_80 and sm_90a. Usage:
//   nvrtc_check <templates dir> [libnvrtc.so path]
#include <dlfcn.h>
#include <dirent.h>
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using CreateFn = nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
using CompileFn = nvrtcResult (*)(nvrtcProgram, int, const char* const*);
using LogSizeFn = nvrtcResult (*)(nvrtcProgram, size_t*);
using LogFn = nvrtcResult (*)(nvrtcProgram, char*);
using DestroyFn = nvrtcResult (*)(nvrtcProgram*);
using SizeFn = nvrtcResult (*)(nvrtcProgram, size_t*);

static const char* kSource = R"SRC(
#include "attnjit/forward/kernel.cuh"

struct Params {
    attnjit::ForwardArgs args;
    float scalar_cap;
    int scalar_win;
    attnjit::TensorArg<int, 2> tensor_doc;
    attnjit::TensorArg<long long, 2> tensor_doc64;
    attnjit::TensorArg<attnjit::bf16_t, 4> tensor_bias;
    attnjit::TensorArg<attnjit::half_t, 1> tensor_slope;
    attnjit::TensorArg<float, 1> tensor_f;
    attnjit::TensorArg<unsigned char, 2> tensor_keep;
};

// Everything generated code may use: math without headers, every to_* overload, both
// range helpers.
struct Variant : attnjit::VariantDefaults {
    static constexpr bool kHasScoreMod = true, kHasMask = true, kCanClassify = true, kClassifyReadsMemory = false;
    struct Head { int b, h, kvh; float slope; };
    struct Row { int doc_q; };
    __device__ static Head make_head(const Params& p, int b, int h, int kvh) {
        return Head{b, h, kvh, attnjit::to_float(p.tensor_slope.ptr[h * p.tensor_slope.stride[0]])};
    }
    __device__ static Row make_row(const Params& p, const Head& hd, int q) {
        return Row{attnjit::to_int(p.tensor_doc.ptr[hd.b * p.tensor_doc.stride[0] + q * p.tensor_doc.stride[1]])};
    }
    __device__ static float score_mod(const Params& p, const Head& hd, const Row&, float s, int q, int k) {
        float t = p.scalar_cap * tanhf(s / p.scalar_cap) + hd.slope * (float)(k - q);
        t += attnjit::to_float(p.tensor_bias.ptr[hd.b * p.tensor_bias.stride[0] + hd.h * p.tensor_bias.stride[1] +
                                                 q * p.tensor_bias.stride[2] + k * p.tensor_bias.stride[3]]);
        t += 1e-3f * (expf(-fabsf(s)) + exp2f(-1.f) + __expf(-2.f) + logf(2.f) + sqrtf(2.f) + fminf(s, 1.f) +
                      attnjit::to_float(p.tensor_f.ptr[k * p.tensor_f.stride[0]]));
        return t;
    }
    __device__ static bool mask(const Params& p, const Head& hd, const Row& r, int q, int k) {
        const int dk = attnjit::to_int(p.tensor_doc64.ptr[hd.b * p.tensor_doc64.stride[0] + k * p.tensor_doc64.stride[1]]);
        const int kk = attnjit::to_int(p.tensor_keep.ptr[hd.b * p.tensor_keep.stride[0] + k * p.tensor_keep.stride[1]]);
        return dk == r.doc_q && k <= q && q - k <= p.scalar_win && kk >= 0 &&
               attnjit::to_bool(p.tensor_keep.ptr[k * p.tensor_keep.stride[1]]);
    }
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params& p, const Head& hd, int q0, int q1, int k0, int k1,
                                                  Ctx& ctx) {
        if (k0 > q1) return attnjit::TileClass::kSkip;
        const attnjit::IntRange rq = ctx.int_range(p.tensor_doc.ptr + hd.b * p.tensor_doc.stride[0],
                                                   p.tensor_doc.stride[1], q0, q1);
        const attnjit::IntRange rk = ctx.int_range(p.tensor_doc64.ptr + hd.b * p.tensor_doc64.stride[0],
                                                   p.tensor_doc64.stride[1], k0, k1);
        const attnjit::FloatRange rf = ctx.float_range(p.tensor_f.ptr, p.tensor_f.stride[0], k0, k1);
        const attnjit::FloatRange rb = ctx.float_range(p.tensor_bias.ptr, p.tensor_bias.stride[3], k0, k1);
        const attnjit::FloatRange rh = ctx.float_range(p.tensor_slope.ptr, p.tensor_slope.stride[0], k0, k1);
        if (!attnjit::ranges_overlap(rq, rk) || rf.hi < -1e30f || rb.lo > 1e30f || rh.lo > 1e30f)
            return attnjit::TileClass::kSkip;
        return attnjit::TileClass::kPartial;
    }
};

#define ATTNJIT_INST(NAME, E, DQK, DV)                                                                 \
    constexpr attnjit::MainloopKind NAME##_m = attnjit::default_mainloop(attnjit::KernelKind::forward, attnjit::ElemKindOf<E>::value, DQK, DV, 90);      \
    constexpr attnjit::TileConfig NAME##_t =                                                          \
        attnjit::default_tile(attnjit::KernelKind::forward, NAME##_m, DQK, DV, 90);                   \
    using NAME##_traits = attnjit::ForwardTraits<NAME##_m, E, DQK, DV, NAME##_t.block_m, NAME##_t.block_n, NAME##_t.warps, \
                                                 NAME##_t.stages>;                                    \
    extern "C" __global__ void __launch_bounds__(NAME##_traits::kThreads)                              \
        NAME(const __grid_constant__ Params p) { attnjit::forward_kernel<NAME##_traits, Variant>(p); }

ATTNJIT_INST_LIST
)SRC";

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "templates";
    const char* lib = argc > 2 ? argv[2] : "/usr/local/cuda/lib64/libnvrtc.so";
    void* h = dlopen(lib, RTLD_NOW);
    if (!h) {
        std::fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
        return 2;
    }
    auto create = (CreateFn)dlsym(h, "nvrtcCreateProgram");
    auto compile = (CompileFn)dlsym(h, "nvrtcCompileProgram");
    auto logsize = (LogSizeFn)dlsym(h, "nvrtcGetProgramLogSize");
    auto getlog = (LogFn)dlsym(h, "nvrtcGetProgramLog");
    auto destroy = (DestroyFn)dlsym(h, "nvrtcDestroyProgram");
    auto ptxsize = (SizeFn)dlsym(h, "nvrtcGetPTXSize");

    std::vector<std::string> names, texts;
    DIR* d = opendir((dir + "/attnjit").c_str());
    if (!d) {
        std::fprintf(stderr, "no %s/attnjit\n", dir.c_str());
        return 2;
    }
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        std::ifstream f(dir + "/attnjit/" + n);
        std::stringstream ss;
        ss << f.rdbuf();
        names.push_back("attnjit/" + n);
        texts.push_back(ss.str());
    }
    closedir(d);
    std::vector<const char*> hn, ht;
    for (size_t i = 0; i < names.size(); ++i) hn.push_back(names[i].c_str()), ht.push_back(texts[i].c_str());

    const char* etypes[3] = {"attnjit::half_t", "attnjit::bf16_t", "float"};
    const int dims[8][2] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {256, 256}, {64, 128}, {256, 64}, {32, 256}};
    std::string list;
    int n_inst = 0;
    for (int e = 0; e < 3; ++e)
        for (auto& dd : dims) {
            char buf[256];
            std::snprintf(buf, sizeof buf, "ATTNJIT_INST(k_%d_%d_%d, %s, %d, %d)\n", e, dd[0], dd[1], etypes[e], dd[0],
                          dd[1]);
            list += buf;
            ++n_inst;
        }
    std::string src = kSource;
    src.replace(src.find("ATTNJIT_INST_LIST"), 17, list);

    int failures = 0;
    for (const char* arch : {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90a"}) {
        nvrtcProgram prog;
        create(&prog, src.c_str(), "attnjit_check.cu", (int)hn.size(), ht.data(), hn.data());
        const char* opts[] = {arch, "-std=c++17"};
        nvrtcResult r = compile(prog, 2, opts);
        size_t ls = 0;
        logsize(prog, &ls);
        std::string log(ls, '\0');
        if (ls) getlog(prog, &log[0]);
        size_t ps = 0;
        if (r == NVRTC_SUCCESS) ptxsize(prog, &ps);
        std::printf("%s: %s, %d instantiations, PTX %zu bytes\n", arch, r == NVRTC_SUCCESS ? "OK" : "FAILED", n_inst,
                    ps);
        if (log.size() > 1) std::printf("%s\n", log.c_str());
        if (r != NVRTC_SUCCESS) ++failures;
        destroy(&prog);
    }
    return failures ? 1 : 0;
}
