// run_at_once (support/at_once.h): every index once, the calls really overlap, and the
// error a caller sees is the lowest index's, after every call has ended.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/at_once.h"

namespace attnjit {
namespace {

TEST(AtOnce, EveryIndexRunsOnce) {
    for (size_t n : {0u, 1u, 5u}) {
        std::vector<std::atomic<int>> runs(n);
        run_at_once(n, [&](size_t i) { ++runs[i]; });
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "n " << n << ", index " << i;
    }
}

TEST(AtOnce, TheCallsOverlap) {
    // Each call waits (up to 10 s) until all four have started: one after another, none would
    // see the others.
    constexpr size_t kCalls = 4;
    std::atomic<size_t> started{0};
    std::vector<char> saw_all(kCalls, 0);
    run_at_once(kCalls, [&](size_t i) {
        ++started;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (started < kCalls && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        saw_all[i] = started == kCalls;
    });
    for (size_t i = 0; i < kCalls; ++i) EXPECT_TRUE(saw_all[i]) << "call " << i << " ran alone";
}

TEST(AtOnce, TheLowestIndexErrorAfterEveryCallEnded) {
    // Index 3 fails at once, index 1 later, index 0 last: the caller sees index 0's error,
    // and index 2, still running when the first error was thrown, has finished.
    std::atomic<bool> slow_one_finished{false};
    try {
        run_at_once(4, [&](size_t i) {
            if (i == 3) throw std::runtime_error("3");
            if (i == 1) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                throw std::runtime_error("1");
            }
            if (i == 2) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                slow_one_finished = true;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            throw std::logic_error("0");
        });
        FAIL() << "no error rethrown";
    } catch (const std::logic_error& e) {
        EXPECT_EQ(std::string(e.what()), "0");
    }
    EXPECT_TRUE(slow_one_finished);
    try {
        run_at_once(3, [](size_t i) {
            if (i > 0) throw std::runtime_error(std::to_string(i));
        });
        FAIL() << "no error rethrown";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "1");
    }
}

}  // namespace
}  // namespace attnjit
