// Start-up: what a process does before its first kernel, for bench/startup.py, which times the
// whole process from its start (exec and dynamic loading included) and runs it with a kernel
// bundle, a cold and a warm disk cache (issue 12: a process whose kernels come from a bundle
// launches its first kernel within 50 ms of its start, and never loads NVRTC). It builds the
// Attention of one spec file and, on a GPU (no --arch), launches it once on [1, 16, 1024, D]
// tensors and waits for it; with --arch it only compiles. Then it prints one line: where the
// kernel came from (the kernel cache's counters), whether libnvrtc is mapped, and where the time
// inside main went: the driver's cuInit and its context (before attnjit is asked for anything),
// the kernel made ready (attnjit: bundle, disk or NVRTC, and the module load), the buffers and
// the launch, waited for. It also prints the monotonic clock (CLOCK_MONOTONIC, the clock
// startup.py reads before it starts the process) at main's entry and when the kernel was done,
// so that the time from process start to the first kernel leaves out the exit's teardown.
// Built twice: bench_startup, and bench_startup_bundled with the spec's bundle linked in.
//
//   build/bench/bench_startup_bundled bench/specs/startup_causal_bf16_d128.json [--arch sm_90a]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "support/read_file.h"

#include "api/attnjit.h"
#include "codegen/kernel_config.h"
#include "dsl/spec_json.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/kernel_cache.h"

using namespace attnjit;

int main(int argc, char** argv) {
    if (argc != 2 && !(argc == 4 && std::strcmp(argv[2], "--arch") == 0)) {
        std::fprintf(stderr, "usage: %s SPEC.json [--arch sm_XX]\n", argv[0]);
        return 2;
    }
    using Clock = std::chrono::steady_clock;
    const auto t_main = Clock::now();
    auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
    try {
        const bool on_gpu = argc == 2;
        if (on_gpu) runtime::cuda_init();  // the driver's cuInit, then its context, timed apart
        const double init_ms = ms_since(t_main);
        const auto t_init = Clock::now();
        if (on_gpu) (void)runtime::current_device();
        const double context_ms = ms_since(t_init);
        const auto t_context = Clock::now();
        const AttentionSpec spec = dsl::spec_from_json(attnjit::read_file(argv[1]).value_or(""), argv[1]);
        CompileOptions options;
        if (argc == 4) options.arch = argv[3];
        const Attention attn(spec, options);
        const double kernel_ms = ms_since(t_context);
        const auto t_kernel = Clock::now();
        const char* did = "compiled";
        if (attn.can_launch()) {
            const int64_t B = 1, H = 16, N = 1024, Dqk = spec.head_dim_qk(), Dv = spec.head_dim_v();
            const size_t elem = dtype_size(spec.dtype());
            runtime::DeviceBuffer q(B * H * N * Dqk * elem), k(B * H * N * Dqk * elem), v(B * H * N * Dv * elem),
                o(B * H * N * Dv * elem);
            for (auto* b : {&q, &k, &v}) b->fill_bytes(0x3c);  // 0x3c3c: a small positive f16 / bf16
            LaunchArgs a;
            a.q = TensorView::contiguous(q.data(), spec.dtype(), {B, H, N, Dqk});
            a.k = TensorView::contiguous(k.data(), spec.dtype(), {B, H, N, Dqk});
            a.v = TensorView::contiguous(v.data(), spec.dtype(), {B, H, N, Dv});
            a.o = TensorView::contiguous(o.data(), spec.dtype(), {B, H, N, Dv});
            attn(a);
            runtime::synchronize();
            did = "launched";
        }
        const auto t_done = Clock::now();
        const double launch_ms = ms_since(t_kernel);
        std::ostringstream line;
        char times[256];
        auto ns = [](Clock::time_point t) {
            return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
        };
        std::snprintf(times, sizeof times,
                      "in main: cuInit %.1f ms, CUDA context %.1f ms, kernel ready %.1f ms, buffers and launch %.1f ms; "
                      "monotonic ns: main %lld, done %lld; ",
                      init_ms, context_ms, kernel_ms, launch_ms, ns(t_main), ns(t_done));
        line << times << did << " " << attn.config() << "; libnvrtc "
             << (attnjit::read_file("/proc/self/maps").value_or("").find("libnvrtc") != std::string::npos ? "mapped" : "not mapped") << "; "
             << runtime::KernelCache::global().stats();
        std::printf("%s\n", line.str().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_startup: %s\n", e.what());
        return 1;
    }
    return 0;
}
