// The fuzz harness must be able to fail: the runner turns a crash, a sanitizer report, a
// hang and a finding into findings against the right document and goes on with the next;
// the oracle tells a user error from a valid spec; the corpus is deterministic and most of
// its valid documents really are valid.
#include <csignal>
#include <cstdlib>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "corpus.h"
#include "dsl/spec_json.h"
#include "fork_runner.h"
#include "spec_target.h"

namespace attnjit::fuzz {
namespace {

Outcome fine() { return Outcome{}; }

TEST(FuzzRunner, CrashesHangsAndFindingsAreReportedAgainstTheirDocument) {
    RunnerOptions options;
    options.timeout_s = 1;
    auto run_one = [](size_t i) -> Outcome {
        switch (i) {
        case 1: std::abort();
        case 3: {
            volatile int* null = nullptr;
            *null = 1;  // a SEGV: the sanitizer's report and exit, or the signal
            return fine();
        }
        case 5:
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        case 6: {
            Outcome o;
            o.finding = Finding{"generate", "internal error", std::string("made\0up", 7)};  // any byte travels
            return o;
        }
        default: return fine();
        }
    };
    std::map<size_t, std::string> kinds, stages, messages;
    size_t clean = 0;
    const size_t ran = run_documents(
        8, run_one,
        [&](size_t i, const Outcome& o) {
            if (!o.finding) {
                ++clean;
                return;
            }
            kinds[i] = o.finding->kind;
            stages[i] = o.finding->stage;
            messages[i] = o.finding->message;
        },
        options);
    EXPECT_EQ(ran, 8u);
    EXPECT_EQ(clean, 4u) << "documents 0, 2, 4 and 7 ran, also after the crashes";
    EXPECT_EQ(kinds[1], "crash or sanitizer report");
    EXPECT_EQ(kinds[3], "crash or sanitizer report");
    EXPECT_EQ(kinds[5], "hang");
    EXPECT_EQ(kinds[6], "internal error");
    EXPECT_EQ(stages[6], "generate");
    EXPECT_EQ(messages[6], std::string("made\0up", 7));
    EXPECT_EQ(kinds.size(), 4u);
    EXPECT_NE(messages[3].find("harness_test.cpp"), std::string::npos) << "the child's report is in the finding: " << messages[3];
}

TEST(FuzzRunner, StopsAtTheTimeBudget) {
    RunnerOptions options;
    options.budget_s = 0.5;
    const size_t ran = run_documents(
        1000,
        [](size_t) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            return fine();
        },
        [](size_t, const Outcome&) {}, options);
    EXPECT_GE(ran, 2u);
    EXPECT_LE(ran, 10u);
}

TEST(FuzzTarget, ValidAndInvalidDocuments) {
    int asked = 0;
    auto never = [&] {
        ++asked;
        return false;
    };
    const Outcome valid = check_document(
        R"json({"format": "attnjit.spec/1", "dtype": "bf16", "head_dim": 64, "scalars": {"cap": "float"},
            "score_mod": "cap * tanh(score / cap)", "mask": "kv_idx <= q_idx"})json",
        never);
    EXPECT_TRUE(valid.valid);
    EXPECT_FALSE(valid.finding) << valid.finding->message;
    EXPECT_EQ(asked, 1) << "a valid spec reaches the NVRTC decision";

    const Outcome invalid = check_document(R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 0})", never);
    EXPECT_FALSE(invalid.valid);
    EXPECT_FALSE(invalid.finding) << invalid.finding->message;
    EXPECT_NE(invalid.rejection.find("head dim 0 is not positive"), std::string::npos) << invalid.rejection;
    EXPECT_EQ(asked, 1) << "an invalid one does not";

    const Outcome garbage = check_document(std::string("\0\xff{", 3), never);
    EXPECT_FALSE(garbage.valid);
    EXPECT_FALSE(garbage.finding);
}

TEST(FuzzCorpus, DeterministicAndMostlyReachingCodegen) {
    const std::vector<Document> seeds = {{"seed", R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64})"}};
    const auto a = generate_corpus(5, 600, seeds), b = generate_corpus(5, 600, seeds);
    ASSERT_EQ(a.size(), 600u);
    ASSERT_EQ(b.size(), a.size());
    int valid = 0, generated_valid = 0, mutants = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].text, b[i].text) << a[i].name;
        ASSERT_EQ(a[i].name, b[i].name);
        if (a[i].name.rfind("valid#", 0) == 0 || a[i].name.rfind("example ", 0) == 0) {
            ++generated_valid;
            try {
                dsl::spec_from_json(a[i].text);
                ++valid;
            } catch (const UserError& e) {
                ADD_FAILURE() << a[i].name << " is not valid: " << e.what();
            }
        }
        mutants += a[i].name.rfind("mutant#", 0) == 0;
    }
    EXPECT_EQ(generated_valid, 150) << "a quarter of the corpus is valid specs";
    EXPECT_EQ(valid, generated_valid);
    EXPECT_GT(mutants, 350);
    EXPECT_NE(generate_corpus(6, 600, seeds)[300].text, a[300].text) << "the seed matters";
}

}  // namespace
}  // namespace attnjit::fuzz
