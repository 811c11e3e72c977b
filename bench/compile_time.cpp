// Cold compile times, no GPU needed: for each example spec (dsl/example_specs.h), the forward
// kernel, and the backward's kernels one after another (api::prepare_kernel each, as before
// d527967) against at once (api::prepare_kernels, what AttentionBackward does). Compile only,
// for --arch (default sm_90a); the disk cache is off and the memory cache cleared before each
// measurement, so every figure is NVRTC's (plus generating the source). Each figure is the
// mean of --reps runs.
//
//   build/bench/bench_compile_time [--arch sm_90a] [--head-dim 128] [--reps 2] causal document ...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "api/attnjit.h"
#include "api/prepared_kernel.h"
#include "dsl/example_specs.h"
#include "runtime/kernel_cache.h"

using namespace attnjit;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The mean seconds of `reps` calls of f, each on an empty memory cache.
template <class F>
double cold_seconds(int reps, F&& f) {
    double total = 0;
    for (int r = 0; r < reps; ++r) {
        runtime::KernelCache::global().clear_memory();
        const auto start = std::chrono::steady_clock::now();
        f();
        total += seconds_since(start);
    }
    return total / reps;
}

}  // namespace

int main(int argc, char** argv) {
    // Before the cache reads the environment (at its first use).
    setenv("ATTNJIT_DISABLE_DISK_CACHE", "1", 1);
    std::string arch = "sm_90a";
    int head_dim = 128, reps = 2;
    std::vector<std::string> names;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--arch" && i + 1 < argc) arch = argv[++i];
        else if (a == "--head-dim" && i + 1 < argc) head_dim = std::atoi(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else names.push_back(a);
    }
    if (names.empty() || reps < 1) {
        std::fprintf(stderr, "usage: %s [--arch A] [--head-dim D] [--reps R] example_spec...\n", argv[0]);
        return 2;
    }
    try {
        CompileOptions options;
        options.arch = arch;
        const api::Target target = api::resolve_target(options);
        std::printf("%-24s %4s %8s %8s %14s %9s\n", "spec", "D", "kernels", "forward", "backward 1by1", "at once");
        for (const std::string& name : names) {
            const AttentionSpec spec = dsl::example_spec(name, DType::bf16, head_dim).return_lse();
            const SpecInputs inputs = spec_inputs(spec);
            std::vector<api::KernelRequest> requests;  // the backward's kernels, on the loops it picks
            {
                const AttentionBackward probe(spec, options);
                for (KernelKind kind : probe.kernel_kinds())
                    requests.push_back({kind, std::nullopt, {}, probe.config(kind).mainloop});
            }
            const double forward = cold_seconds(reps, [&] { Attention(spec, options); });
            const double one_by_one = cold_seconds(reps, [&] {
                for (const auto& r : requests) api::prepare_kernel(spec, inputs, r.kind, target, r.tile, r.grads, r.mainloop);
            });
            const double at_once = cold_seconds(reps, [&] { api::prepare_kernels(spec, inputs, target, requests); });
            std::printf("%-24s %4d %8zu %7.2fs %13.2fs %8.2fs\n", name.c_str(), head_dim, requests.size(), forward,
                        one_by_one, at_once);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
