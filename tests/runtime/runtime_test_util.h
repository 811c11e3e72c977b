// Small helpers shared by the runtime tests: a temporary directory, scoped environment
// variables, a bounded child process, a hand-written kernel that needs no templates,
// and a fake compiler.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/kernel_source.h"
#include "runtime/compiled_kernel.h"
#include "runtime/kernel_cache.h"
#include "support/error.h"

namespace attnjit::runtime::testing {

// What f() throws as an EnvironmentError; "WRONG KIND: ..." for another exception, "NO
// ERROR" when it returns.
inline std::string environment_error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const EnvironmentError& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("WRONG KIND: ") + e.what();
    }
    return "NO ERROR";
}


// A fresh directory under $TMPDIR, removed with everything in it at scope exit.
class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "attnjit-test-XXXXXX").string();
        path_ = mkdtemp(tmpl.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::add, ec);
        std::filesystem::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// Sets (or unsets, with nullopt) an environment variable for the scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* old = getenv(name)) old_ = old;
        if (value) setenv(name, value->c_str(), 1);
        else unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_) setenv(name_, old_->c_str(), 1);
        else unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

// Every regular file under `dir`, relative paths.
inline std::vector<std::string> files_under(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) break;
        if (it->is_regular_file()) out.push_back(std::filesystem::relative(it->path(), dir).string());
    }
    return out;
}

// Waits for child `pid` at most `timeout`, then kills it. Its exit code, or nullopt if
// it had to be killed or died of a signal.
inline std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0) return std::nullopt;
        if (std::chrono::steady_clock::now() >= deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!WIFEXITED(status)) return std::nullopt;
    return WEXITSTATUS(status);
}

// Runs `body` in a forked child, so that a test of something that could block forever
// or read without bound cannot hang or exhaust the machine: the child is killed after
// `timeout`, and with `extra_memory` > 0 its address space may grow only that much (a
// runaway read gets bad_alloc). Returns body's result, 255 if it threw, nullopt if the
// child was killed or crashed.
inline std::optional<int> run_in_child(const std::function<int()>& body,
                                       std::chrono::milliseconds timeout,
                                       size_t extra_memory = 0) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) return std::nullopt;
    if (pid == 0) {
        if (extra_memory > 0) {
            size_t pages = 0;
            if (FILE* f = std::fopen("/proc/self/statm", "r")) {
                if (std::fscanf(f, "%zu", &pages) != 1) pages = 0;
                std::fclose(f);
            }
            const rlim_t limit = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) + extra_memory;
            const struct rlimit rl = {limit, limit};
            ::setrlimit(RLIMIT_AS, &rl);
        }
        int code = 255;
        try {
            code = body();
        } catch (...) {
        }
        std::fflush(nullptr);
        ::_exit(code);
    }
    return wait_child(pid, timeout);
}

// A stand-in cubin: the ELF header fields the cache checks (64-bit, little-endian,
// machine EM_CUDA), then `text`.
inline std::string fake_cubin(const std::string& text) {
    std::string elf(64, '\0');
    elf.replace(0, 4, "\x7f" "ELF");
    elf[4] = 2;             // ELFCLASS64
    elf[5] = 1;             // little-endian
    elf[18] = char(190);    // e_machine = EM_CUDA
    return elf + text;
}

// The Params of tiny_source(): what the launcher would pack for a real kernel.
struct TinyParams {
    float* out;
    const float* in;
    float add;
    int n;
};

// A trivial kernel with one Params argument, so cache and loader tests need neither
// the generator nor the templates. `salt` makes distinct kernels.
inline codegen::KernelSource tiny_source(int salt = 0) {
    codegen::KernelSource s;
    s.name = "tiny_add_" + std::to_string(salt);
    s.entry = "tiny_add";
    s.source = "// salt " + std::to_string(salt) + R"(
struct Params {
    float* out;
    const float* in;
    float add;
    int n;
};

extern "C" __global__ void __launch_bounds__(128) tiny_add(const __grid_constant__ Params p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.out[i] = p.in[i] + p.add;
}
)";
    s.options = {"-lineinfo"};
    s.threads = 128;
    s.smem_bytes = 0;
    return s;
}

// Stands in for NVRTC: deterministic "cubin" text, counts calls, can be slowed down or
// made to fail.
struct FakeCompiler {
    std::atomic<int> calls{0};
    std::atomic<int> fail_next{0};
    std::chrono::milliseconds delay{0};

    CompiledKernel operator()(const codegen::KernelSource& s, const std::string& arch) {
        ++calls;
        if (delay.count()) std::this_thread::sleep_for(delay);
        if (fail_next > 0) {
            --fail_next;
            throw std::runtime_error("fake compiler failure");
        }
        CompiledKernel k;
        k.name = s.name;
        k.entry = s.entry;
        k.arch = arch;
        k.cubin = fake_cubin("fake cubin of " + s.source + " for " + arch);
        k.options = s.options;
        k.threads = s.threads;
        k.smem_bytes = s.smem_bytes;
        k.compile_seconds = 0.25;
        return k;
    }
};

// A kernel cache under `root` that compiles with `fake` (which must outlive it).
inline KernelCache::Options fake_options(FakeCompiler& fake, const std::string& root) {
    KernelCache::Options o;
    o.disk_root = root;
    o.compile = [&fake](const codegen::KernelSource& s, const std::string& a) { return fake(s, a); };
    o.toolchain = "fake-compiler 1";
    return o;
}

}  // namespace attnjit::runtime::testing
