// The tuning database (runtime/tuning_db.h): results persist across instances (processes),
// the key covers each of its fields, concurrent processes adding buckets to one key lose none,
// and a damaged or foreign file is ignored with a warning and replaced by the next write.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/tuning_db.h"
#include "runtime/tuning_json.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::TempDir;

TuningKey sample_key() {
    return TuningKey{"0123456789abcdef", "forward", "NVIDIA H100 80GB HBM3", "sm_90a", "nvrtc 13.0 build x", 4,
                     "candidates-hash"};
}

TuningResult sample_result(int salt = 0) {
    TuningResult r;
    r.tile = TileConfig{128, 128 - 16 * salt, 12, 2};
    r.mainloop = MainloopKind::sm90;
    r.schedule = CtaSchedule{kOrderAuto + salt % (kOrderLast + 1), salt % 2 ? Sm90Grid::persistent : Sm90Grid::by_size};
    r.seconds = 1e-3 + salt * 1e-6;
    r.default_seconds = 1.2e-3;
    r.candidates = 17;
    r.tuning_seconds = 3.5;
    return r;
}

void expect_same(const TuningResult& a, const TuningResult& b) {
    EXPECT_EQ(a.tile, b.tile);
    EXPECT_EQ(a.mainloop, b.mainloop);
    EXPECT_EQ(a.schedule, b.schedule);
    EXPECT_DOUBLE_EQ(a.seconds, b.seconds);
    EXPECT_DOUBLE_EQ(a.default_seconds, b.default_seconds);
    EXPECT_EQ(a.candidates, b.candidates);
    EXPECT_DOUBLE_EQ(a.tuning_seconds, b.tuning_seconds);
}

TEST(TuningDb, ResultsPersistAcrossInstances) {
    TempDir tmp;
    TuningDb(tmp.path()).store(sample_key(), "q4096_k4096", sample_result());
    const TuningDb later(tmp.path());
    const auto found = later.find(sample_key(), "q4096_k4096");
    ASSERT_TRUE(found);
    expect_same(*found, sample_result());
    EXPECT_FALSE(later.find(sample_key(), "q1024_k1024"));
    TuningKey other = sample_key();
    other.device = "NVIDIA H200";
    EXPECT_FALSE(later.find(other, "q4096_k4096"));
    EXPECT_EQ(later.path(sample_key()).rfind(tmp.path() + "/v", 0), 0u);
}

TEST(TuningDb, TheKeyCoversEveryField) {
    const TuningKey base = sample_key();
    std::vector<TuningKey> changed(7, base);
    changed[0].spec += "0";
    changed[1].kind = "backward_fused";
    changed[2].device += " ";
    changed[3].arch = "sm_90";
    changed[4].toolchain += "1";
    changed[5].generator_version += 1;
    changed[6].candidates += "x";
    for (const TuningKey& k : changed) EXPECT_NE(k.id(), base.id());
    EXPECT_EQ(base.id(), sample_key().id());
    EXPECT_EQ(base.id().size(), 64u);
}

TEST(TuningDb, MemoryOnlyWithoutARoot) {
    TuningDb db("");
    db.store(sample_key(), "b", sample_result());
    ASSERT_TRUE(db.find(sample_key(), "b"));
    EXPECT_EQ(db.path(sample_key()), "");
    EXPECT_FALSE(TuningDb("").find(sample_key(), "b"));
}

// Eight processes add five buckets each to one key at once: all forty are there after.
TEST(TuningDb, ConcurrentProcessesLoseNoBucket) {
    TempDir tmp;
    const auto start = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    std::vector<pid_t> children;
    for (int p = 0; p < 8; ++p) {
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            std::this_thread::sleep_until(start);
            for (int b = 0; b < 5; ++b)
                TuningDb(tmp.path()).store(sample_key(), "p" + std::to_string(p) + "_b" + std::to_string(b),
                                           sample_result(b));
            ::_exit(0);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    const auto all = TuningDb(tmp.path()).buckets(sample_key());
    EXPECT_EQ(all.size(), 40u);
    for (int p = 0; p < 8; ++p)
        for (int b = 0; b < 5; ++b) {
            const auto it = all.find("p" + std::to_string(p) + "_b" + std::to_string(b));
            ASSERT_NE(it, all.end()) << p << " " << b;
            expect_same(it->second, sample_result(b));
        }
}

TEST(TuningDb, ADamagedOrForeignFileIsIgnoredAndReplaced) {
    TempDir tmp;
    const std::string path = [&] {
        TuningDb db(tmp.path());
        db.store(sample_key(), "kept", sample_result());
        return db.path(sample_key());
    }();
    std::ofstream(path, std::ios::trunc) << "{\"format\": \"attnjit.tuning/1\", \"buckets\": ";  // cut short
    {
        ::testing::internal::CaptureStderr();
        TuningDb db(tmp.path());
        EXPECT_FALSE(db.find(sample_key(), "kept"));
        const std::string err = ::testing::internal::GetCapturedStderr();
        EXPECT_NE(err.find("ignoring the tuning file " + path), std::string::npos) << err;
        db.store(sample_key(), "new", sample_result(1));
    }
    const TuningDb after(tmp.path());
    ASSERT_TRUE(after.find(sample_key(), "new"));
    EXPECT_FALSE(after.find(sample_key(), "kept"));
    // A whole document of another key, copied over this one's file: not this key's results.
    TuningKey other = sample_key();
    other.arch = "sm_80";
    TuningDb writer(tmp.path());
    writer.store(other, "theirs", sample_result(2));
    std::ifstream in(writer.path(other));
    std::stringstream text;
    text << in.rdbuf();
    std::ofstream(path, std::ios::trunc) << text.str();
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(TuningDb(tmp.path()).find(sample_key(), "theirs"));
    ::testing::internal::GetCapturedStderr();
}

// A result recorded before schedules were tuned (no "cta_order", no "grid") is the kernel's own
// schedule; a schedule name no release writes makes the result unreadable, not another schedule.
TEST(TuningJson, TheScheduleIsOptionalButNeverGuessed) {
    nlohmann::ordered_json j = tuning_result_json(sample_result(3));
    EXPECT_EQ(j.at("cta_order"), "chunked4");
    EXPECT_EQ(j.at("grid"), "persistent");
    ASSERT_TRUE(tuning_result_from_json(j));
    expect_same(*tuning_result_from_json(j), sample_result(3));
    nlohmann::ordered_json old = j;
    old.erase("cta_order");
    old.erase("grid");
    const auto read = tuning_result_from_json(old);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->schedule, CtaSchedule{});
    EXPECT_EQ(read->tile, sample_result(3).tile);
    nlohmann::ordered_json unknown = j;
    unknown["cta_order"] = "zigzag";
    EXPECT_FALSE(tuning_result_from_json(unknown));
    unknown = j;
    unknown["grid"] = 2;
    EXPECT_FALSE(tuning_result_from_json(unknown));
}

}  // namespace
}  // namespace attnjit::runtime
