// The command-line tools' progress (attnjit-aot's compiles, attnjit-tune's cases): a bar redrawn
// in place when stderr is a terminal, one line a finished job elsewhere (a log keeps them all).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace attnjit::tools {

class Progress {
public:
    Progress(size_t total, bool quiet) : total_(total), quiet_(quiet), tty_(::isatty(2) != 0) {}

    // One more job of the total is done; `line` says which (and how it went). Thread-safe.
    void done(const std::string& line) {
        std::lock_guard<std::mutex> lock(mu_);
        ++done_;
        if (quiet_) return;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        if (tty_) {
            constexpr size_t kWidth = 30;
            const size_t filled = total_ ? kWidth * done_ / total_ : kWidth;
            std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu  %.1f s  %s", std::string(filled, '#').c_str(),
                         std::string(kWidth - filled, '.').c_str(), done_, total_, s, line.c_str());
            if (done_ == total_) std::fprintf(stderr, "\n");
        } else {
            std::fprintf(stderr, "[%zu/%zu] %.1f s  %s\n", done_, total_, s, line.c_str());
        }
        std::fflush(stderr);
    }

private:
    std::mutex mu_;
    size_t total_, done_ = 0;
    bool quiet_, tty_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace attnjit::tools
