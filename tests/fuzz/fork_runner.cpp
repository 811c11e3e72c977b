#include "fork_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define ATTNJIT_HAVE_SANITIZER_INTERFACE 1
#endif
#endif

namespace attnjit::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

int child_fd = -1;                 // the child's end of the pipe; -1 elsewhere
int child_stderr = -1;             // the child: where its own stderr went before capture
size_t running_in_process = SIZE_MAX;  // no-fork mode: the document being run
const char* stage_in_process = "";     // and its stage

enum Frame : char { kStarted = 'S', kStage = 'T', kSlow = 'N', kDone = 'D' };
constexpr uint32_t kValid = 1, kCompiled = 2, kFinding = 4;  // Outcome's flags
constexpr size_t kHeader = 13;  // type, index, flags, payload length

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);  // the parent is gone: nobody to report to
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void send(Frame type, size_t index, uint32_t flags = 0, const std::string& payload = "") {
    char header[kHeader];
    const uint32_t i = static_cast<uint32_t>(index), len = static_cast<uint32_t>(payload.size());
    header[0] = type;
    std::memcpy(header + 1, &i, 4);
    std::memcpy(header + 5, &flags, 4);
    std::memcpy(header + 9, &len, 4);
    std::string frame(header, kHeader);
    frame += payload;
    write_all(child_fd, frame.data(), frame.size());
}

// An outcome as length-prefixed fields: messages quote documents, which may hold any byte.
void put(std::string& p, const std::string& field) {
    const uint32_t n = static_cast<uint32_t>(field.size());
    p.append(reinterpret_cast<const char*>(&n), 4);
    p += field;
}

std::string take(const std::string& p, size_t& at) {
    uint32_t n = 0;
    if (at + 4 > p.size()) return "";
    std::memcpy(&n, p.data() + at, 4);
    at += 4;
    std::string field = p.substr(at, n);
    at += field.size();
    return field;
}

std::string encode(const Outcome& o, uint32_t& flags) {
    flags = (o.valid ? kValid : 0) | (o.compiled ? kCompiled : 0) | (o.finding ? kFinding : 0);
    std::string p;
    put(p, o.rejection);
    if (o.finding) {
        put(p, o.finding->stage);
        put(p, o.finding->kind);
        put(p, o.finding->message);
    }
    return p;
}

Outcome decode(uint32_t flags, const std::string& payload) {
    Outcome o;
    o.valid = flags & kValid;
    o.compiled = flags & kCompiled;
    size_t at = 0;
    o.rejection = take(payload, at);
    if (flags & kFinding) {
        Finding f;
        f.stage = take(payload, at);
        f.kind = take(payload, at);
        f.message = take(payload, at);
        o.finding = f;
    }
    return o;
}

// The child's stderr (sanitizer reports included) goes to a file the parent can read, so
// a report ends up in the finding of the document it is about. Between documents the
// child passes what a document printed on to the real stderr and empties the file.
void pass_on_captured_stderr() {
    char chunk[65536];
    off_t at = 0;
    for (ssize_t n; (n = pread(2, chunk, sizeof chunk, at)) > 0; at += n) write_all(child_stderr, chunk, static_cast<size_t>(n));
    if (at > 0 && ftruncate(2, 0) == 0) lseek(2, 0, SEEK_SET);
}

// What the child wrote to stderr during the document that killed it: the head of the
// report (what went wrong, where) and its end (the sanitizer's summary line).
std::string captured_report(int fd) {
    std::string text;
    char chunk[65536];
    off_t at = 0;
    for (ssize_t n; (n = pread(fd, chunk, sizeof chunk, at)) > 0; at += n) text.append(chunk, static_cast<size_t>(n));
    constexpr size_t kHead = 8000, kTail = 1500;
    if (text.size() > kHead + kTail)
        text = text.substr(0, kHead) + "\n... [" + std::to_string(text.size() - kHead - kTail) + " bytes] ...\n" +
               text.substr(text.size() - kTail);
    return text;
}

[[noreturn]] void child_main(int fd, int capture_fd, size_t from, size_t count,
                             const std::function<Outcome(size_t)>& run_one, Clock::time_point start, double budget_s) {
    child_fd = fd;
    std::fflush(stderr);
    child_stderr = dup(2);
    set_stage_observer([](const char* stage) { send(kStage, 0, 0, stage); });
    dup2(capture_fd, 2);
    close(capture_fd);
    for (size_t i = from; i < count && seconds_since(start) < budget_s; ++i) {
        pass_on_captured_stderr();
        send(kStarted, i);
        const Outcome o = run_one(i);
        uint32_t flags = 0;
        const std::string payload = encode(o, flags);
        send(kDone, i, flags, payload);
    }
    pass_on_captured_stderr();
    close(fd);
    std::exit(0);  // exit, not _exit: LeakSanitizer checks for leaks at exit
}

Outcome died(const std::string& stage, const std::string& kind, const std::string& message) {
    Outcome o;
    o.finding = Finding{stage, kind, message};
    return o;
}

std::string describe_status(int status) {
    if (WIFSIGNALED(status))
        return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    return "stopped (status " + std::to_string(status) + ")";
}

#ifdef ATTNJIT_HAVE_SANITIZER_INTERFACE
void say_which_document() {
    if (running_in_process != SIZE_MAX)
        std::fprintf(stderr, "[fuzz] the sanitizer stopped the run in document #%zu of this run, stage %s\n",
                     running_in_process, stage_in_process);
}
#endif

size_t run_in_process(size_t count, const std::function<Outcome(size_t)>& run_one,
                      const std::function<void(size_t, const Outcome&)>& on_result, const RunnerOptions& options) {
#ifdef ATTNJIT_HAVE_SANITIZER_INTERFACE
    __sanitizer_set_death_callback(say_which_document);
#endif
    set_stage_observer([](const char* stage) { stage_in_process = stage; });
    const Clock::time_point start = Clock::now();
    size_t i = 0;
    for (; i < count && seconds_since(start) < options.budget_s; ++i) {
        running_in_process = i;
        on_result(i, run_one(i));
    }
    running_in_process = SIZE_MAX;
    return i;
}

}  // namespace

void note_slow_stage() {
    if (child_fd >= 0) send(kSlow, 0);
}

size_t run_documents(size_t count, const std::function<Outcome(size_t)>& run_one,
                     const std::function<void(size_t, const Outcome&)>& on_result, const RunnerOptions& options) {
    if (!options.fork) return run_in_process(count, run_one, on_result, options);
    const Clock::time_point start = Clock::now();
    size_t next = 0, ran = 0;
    while (next < count && seconds_since(start) < options.budget_s) {
        int fds[2];
        if (pipe(fds) != 0) {
            std::perror("[fuzz] pipe");
            std::exit(2);
        }
        char capture_path[] = "/tmp/attnjit-fuzz-stderr-XXXXXX";
        const int capture = mkstemp(capture_path);
        if (capture < 0) {
            std::perror("[fuzz] mkstemp");
            std::exit(2);
        }
        unlink(capture_path);  // the two processes keep it open; nothing is left behind
        std::fflush(nullptr);  // nothing buffered may be written twice
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("[fuzz] fork");
            std::exit(2);
        }
        if (pid == 0) {
            close(fds[0]);
            child_main(fds[1], capture, next, count, run_one, start, options.budget_s);
        }
        close(fds[1]);
        const size_t first = next;
        long current = -1;  // the document the child is in, -1 between documents
        std::string stage;  // and the stage of it
        Clock::time_point deadline = Clock::now();
        bool hung = false;
        std::string buffer;
        for (;;) {
            pollfd p{fds[0], POLLIN, 0};
            const int ready = poll(&p, 1, 100);
            if (ready > 0) {
                char chunk[65536];
                const ssize_t n = read(fds[0], chunk, sizeof chunk);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;  // the child is gone
                buffer.append(chunk, static_cast<size_t>(n));
                while (buffer.size() >= kHeader) {
                    uint32_t index, flags, len;
                    std::memcpy(&index, buffer.data() + 1, 4);
                    std::memcpy(&flags, buffer.data() + 5, 4);
                    std::memcpy(&len, buffer.data() + 9, 4);
                    if (buffer.size() < kHeader + len) break;
                    const char type = buffer[0];
                    const std::string payload = buffer.substr(kHeader, len);
                    buffer.erase(0, kHeader + len);
                    if (type == kStage) {
                        stage = payload;
                    } else if (type == kStarted) {
                        current = index;
                        stage = "start";
                        deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(options.timeout_s));
                    } else if (type == kSlow) {
                        deadline += std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(options.slow_stage_s));
                    } else if (type == kDone) {
                        on_result(index, decode(flags, payload));
                        ++ran;
                        next = index + 1;
                        current = -1;
                    }
                }
            }
            if (current >= 0 && Clock::now() > deadline) {
                kill(pid, SIGKILL);
                hung = true;
                break;
            }
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        close(fds[0]);
        const std::string report = captured_report(capture);
        close(capture);
        if (current >= 0) {  // it died or hung inside a document
            on_result(static_cast<size_t>(current),
                      hung ? died(stage, "hang", "still running after the per-document limit (--timeout); killed\n" + report)
                           : died(stage, "crash or sanitizer report",
                                  "the process was " + describe_status(status) + "; what it printed:\n" + report));
            ++ran;
            next = static_cast<size_t>(current) + 1;
            continue;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            // Between documents: at exit, that is LeakSanitizer (or a static destructor).
            on_result(SIZE_MAX, died("process exit", "failure at exit (a leak report?)",
                                     "the process that ran documents #" + std::to_string(first) + " to #" +
                                         std::to_string(next == 0 ? 0 : next - 1) + " " + describe_status(status) +
                                         " after its last document; what it printed:\n" + report));
            if (next == first) return ran;  // it cannot even start: stop rather than loop
        }
    }
    return ran;
}

}  // namespace attnjit::fuzz
