// ATTNJIT_DUMP_DIR without NVRTC: dump names are predictable, so a link planted at one
// must be replaced, never written through; a write that fails (here: over the file size
// limit, as on a full disk) must warn once and leave no truncated dump behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/compile_dump.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::files_under;
using testing::ScopedEnv;
using testing::TempDir;
using testing::tiny_source;
using namespace std::chrono_literals;

const std::vector<std::string> kOptions = {"-std=c++17", "--gpu-architecture=sm_80"};

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void dump(const std::string& dir) {
    ScopedEnv env("ATTNJIT_DUMP_DIR", dir);
    dump_compile_if_requested(tiny_source(), "tiny_add_0.cu", "sm_80", kOptions, "a log");
}

TEST(CompileDump, WritesSourceOptionsAndLog) {
    TempDir tmp;
    const std::string dir = tmp.path() + "/dumps";
    dump(dir);
    const std::string stem = compile_dump_stem(dir, tiny_source(), "tiny_add_0.cu", "sm_80");
    EXPECT_EQ(stem, dir + "/tiny_add_0." + tiny_source().content_hash().substr(0, 16) + ".sm_80");
    EXPECT_EQ(read(stem + ".cu"), tiny_source().source);
    EXPECT_EQ(read(stem + ".options.txt"), "-std=c++17\n--gpu-architecture=sm_80\n");
    EXPECT_EQ(read(stem + ".log.txt"), "a log");
    EXPECT_EQ(files_under(dir).size(), 3u);
    dump(dir);  // again: replaced, not duplicated
    EXPECT_EQ(files_under(dir).size(), 3u);
}

TEST(CompileDump, LinkAtADumpNameIsReplacedNotWrittenThrough) {
    TempDir tmp;
    const std::string dir = tmp.path() + "/dumps";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    const std::string stem = compile_dump_stem(dir, tiny_source(), "tiny_add_0.cu", "sm_80");
    const std::string precious = tmp.path() + "/precious", nowhere = tmp.path() + "/created";
    std::ofstream(precious) << "keep me";
    ASSERT_EQ(::symlink(precious.c_str(), (stem + ".cu").c_str()), 0);
    ASSERT_EQ(::symlink(nowhere.c_str(), (stem + ".log.txt").c_str()), 0);

    dump(dir);
    EXPECT_EQ(read(precious), "keep me") << "the dump wrote through a link";
    EXPECT_NE(::access(nowhere.c_str(), F_OK), 0) << "the dump created a file through a link";
    struct stat st {};
    ASSERT_EQ(::lstat((stem + ".cu").c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link should have been replaced by the dump";
    EXPECT_EQ(read(stem + ".cu"), tiny_source().source);
    EXPECT_EQ(read(stem + ".log.txt"), "a log");
}

// Each write over 16 bytes fails (EFBIG, SIGXFSZ ignored), like ENOSPC on a full disk.
// Runs in a child: the limit and the once-per-process warning stay there; its stderr
// goes to a pipe (a file would be under the limit too).
TEST(CompileDump, FailedWriteWarnsOnceAndLeavesNoTruncatedDump) {
    TempDir tmp;
    const std::string dir = tmp.path() + "/dumps";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    int err_pipe[2];
    ASSERT_EQ(::pipe(err_pipe), 0);
    auto result = testing::run_in_child(
        [&] {
            if (::dup2(err_pipe[1], STDERR_FILENO) < 0) return 1;
            ::signal(SIGXFSZ, SIG_IGN);
            const struct rlimit small = {16, 16};
            if (::setrlimit(RLIMIT_FSIZE, &small) != 0) return 2;
            dump(dir);
            dump(dir);
            return 0;
        },
        20s);
    ::close(err_pipe[1]);
    std::string err;
    char buf[4096];
    for (ssize_t n; (n = ::read(err_pipe[0], buf, sizeof(buf))) > 0;) err.append(buf, size_t(n));
    ::close(err_pipe[0]);
    ASSERT_EQ(result, 0);
    EXPECT_NE(err.find("warning"), std::string::npos) << "a failed dump was silent";
    EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once: " << err;
    EXPECT_NE(err.find("ATTNJIT_DUMP_DIR"), std::string::npos) << err;
    EXPECT_NE(err.find(std::strerror(EFBIG)), std::string::npos) << err;
    EXPECT_TRUE(files_under(dir).empty()) << ::testing::PrintToString(files_under(dir));
}

}  // namespace
}  // namespace attnjit::runtime
