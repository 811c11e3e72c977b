// run_at_once(n, f): f(0) ... f(n - 1) at the same time, f(0) on the calling thread and each
// other call on a thread of its own; returns when every call has ended. If calls threw, the
// exception of the lowest index is rethrown (after all have ended), so which error a caller
// sees does not depend on which thread finished first. For a few long, independent jobs
// (the NVRTC compiles of a backward's kernels), not for fine-grained work.
#pragma once

#include <cstddef>
#include <exception>
#include <future>
#include <system_error>
#include <vector>

namespace attnjit {

template <class F>
void run_at_once(std::size_t n, F&& f) {
    std::vector<std::future<void>> others;
    others.reserve(n > 0 ? n - 1 : 0);
    // A thread that cannot be started leaves its call to this thread (below), in order.
    std::size_t started = 1;
    try {
        for (; started < n; ++started) others.push_back(std::async(std::launch::async, [&f, i = started] { f(i); }));
    } catch (const std::system_error&) {
    }
    std::vector<std::exception_ptr> errors(n);
    auto call = [&](std::size_t i) {
        try {
            f(i);
        } catch (...) {
            errors[i] = std::current_exception();
        }
    };
    if (n > 0) call(0);
    for (std::size_t i = started; i < n; ++i) call(i);
    for (std::size_t i = 1; i < started; ++i) {
        try {
            others[i - 1].get();
        } catch (...) {
            errors[i] = std::current_exception();
        }
    }
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace attnjit
