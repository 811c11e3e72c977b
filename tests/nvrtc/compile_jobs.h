// The NVRTC compile tests' shared runner: generated kernels compiled on all cores (NVRTC
// takes a second or two per kernel), failures collected with the job's name.
#pragma once

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "codegen/kernel_source.h"
#include "runtime/compiler.h"

namespace attnjit::codegen {

struct CompileJob {
    std::string what;
    KernelSource source;
    std::string arch;
};

// Compiles every job on up to 16 threads; returns the failures' messages.
inline std::vector<std::string> compile_all(const std::vector<CompileJob>& jobs) {
    std::vector<std::string> failures;
    std::mutex m;
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i; (i = next++) < jobs.size();) {
            try {
                if (runtime::compile_kernel(jobs[i].source, jobs[i].arch).cubin.empty())
                    throw std::runtime_error("empty cubin");
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> lock(m);
                failures.push_back(jobs[i].what + ": " + e.what());
            }
        }
    };
    const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 16));
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < n; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    return failures;
}

}  // namespace attnjit::codegen
