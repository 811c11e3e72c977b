// attnjit-tune --report (tools/attnjit_tune.cpp) prints every case of the tuning database with
// its default and tuned times, the speed-up and the configuration; without a GPU, tuning is an
// environment error that says so. (Tuning itself needs the GPU: docs/autotune.md.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "runtime/tuning_db.h"

#ifndef ATTNJIT_TUNE_PATH
#error "tests/tools/CMakeLists.txt defines ATTNJIT_TUNE_PATH"
#endif

namespace attnjit::tools {
namespace {

// The tool's output (stdout and stderr) and exit status, run with `env` before it.
std::pair<std::string, int> run_tool(const std::string& env, const std::string& args) {
    const std::string cmd = env + " " + ATTNJIT_TUNE_PATH + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = p ? ::pclose(p) : -1;
    return {out, WEXITSTATUS(status)};
}

TEST(TuneReport, PrintsEveryCaseWithItsSpeedUp) {
    char tmpl[] = "/tmp/attnjit-tune-report-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string root = tmpl;
    {
        runtime::TuningDb db(root);
        runtime::TuningKey key{"aaaabbbbccccdddd", "forward", "NVIDIA H100 80GB HBM3", "sm_90a", "nvrtc", 4, "c"};
        runtime::TuningResult r;
        r.tile = TileConfig{128, 176, 12, 2};
        r.mainloop = MainloopKind::sm90;
        r.seconds = 1.0e-3;
        r.default_seconds = 1.25e-3;
        r.candidates = 183;
        r.tuning_seconds = 14.5;
        db.store(key, "q4096_k4096", r);
        r.tile = TileConfig{128, 128, 12, 2};
        r.schedule = CtaSchedule{kOrderChunked4, Sm90Grid::persistent};
        r.default_seconds = r.seconds = 2e-3;
        db.store(key, "q16384_k16384", r);
    }
    const auto [out, status] = run_tool("ATTNJIT_CACHE_DIR=" + root, "--report");
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("| aaaabbbbcccc | forward | NVIDIA H100 80GB HBM3 (sm_90a) | q4096_k4096 | 1.250 | 1.000 | "
                       "1.25x | sm90 block_m=128 block_n=176 warps=12 stages=2 | 183 | 14.5 |"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("| q16384_k16384 | 2.000 | 2.000 | 1.00x | sm90 block_m=128 block_n=128 warps=12 stages=2 "
                       "cta_order=chunked4 grid=persistent |"),
              std::string::npos)
        << out;
    std::system(("rm -rf " + root).c_str());
}

TEST(TuneReport, AnEmptyDatabaseAndMistakesSaySo) {
    auto [out, status] = run_tool("ATTNJIT_CACHE_DIR=/tmp/attnjit-tune-report-none-$$", "--report");
    EXPECT_EQ(status, 0);
    EXPECT_NE(out.find("holds no results"), std::string::npos) << out;
    std::tie(out, status) = run_tool("", "--specs x.json --shapes 4x16");
    EXPECT_EQ(status, 2);
    EXPECT_NE(out.find("write BxHxNqxNk"), std::string::npos) << out;
    std::tie(out, status) = run_tool("", "");
    EXPECT_EQ(status, 2);
    EXPECT_NE(out.find("or --report to see the database"), std::string::npos) << out;
}

// The specs are read and checked before any GPU work: a spec's missing runtime scalar is told
// (for --backward too) on any machine.
TEST(TuneReport, ASpecsMissingScalarIsToldBeforeAnyGpuWork) {
    char path[] = "/tmp/attnjit-tune-spec-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string spec = R"json({"format": "attnjit.spec/1", "dtype": "bf16", "head_dim_qk": 64, "head_dim_v": 64,
        "q_heads": 0, "kv_heads": 0, "scale": null, "return_lse": false, "scalars": {"cap": "float"},
        "tensors": {}, "score_mod": "cap * tanh(score / cap)", "mask": null})json";
    ASSERT_EQ(::write(fd, spec.data(), spec.size()), static_cast<ssize_t>(spec.size()));
    ::close(fd);
    for (const std::string extra : {"", " --backward"}) {
        const auto [out, status] = run_tool("", std::string("--specs ") + path + " --shapes 1x2x100x100" + extra);
        EXPECT_EQ(status, 2) << extra;
        EXPECT_NE(out.find("reads runtime scalar 'cap': give --scalar cap=VALUE"), std::string::npos) << out;
    }
    ::unlink(path);
}

}  // namespace
}  // namespace attnjit::tools
