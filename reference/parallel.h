// Splits [0, n) into contiguous ranges over threads for the fp64 references, and rethrows
// the first worker's exception (by worker order, so the error is deterministic).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace attnjit::reference {

// Workers parallel_ranges uses: `threads` (0: the hardware's), at most one per
// `min_chunk` items, at least 1.
inline int worker_count(int64_t n, int threads, int64_t min_chunk) {
    int w = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(w, n / std::max<int64_t>(min_chunk, 1))));
}

// fn(worker, begin, end) for each of `workers` ranges (worker_count), worker 0 first.
template <class Fn>
void parallel_ranges(int64_t n, int workers, Fn fn) {
    if (workers <= 1) {
        fn(0, int64_t(0), n);
        return;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
    for (int w = 0; w < workers; ++w) {
        const int64_t begin = n * w / workers, end = n * (w + 1) / workers;
        pool.emplace_back([&, w, begin, end] {
            try {
                fn(w, begin, end);
            } catch (...) {
                errors[static_cast<size_t>(w)] = std::current_exception();
            }
        });
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace attnjit::reference
