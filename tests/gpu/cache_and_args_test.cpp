// The launch path around the kernel: a second Attention for the same spec is served from
// the memory cache (no compile, no disk read, no module load), and bad arguments are
// refused before anything reaches the GPU (UserError; O and LSE keep their poison).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "api/aot.h"
#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "runtime/device.h"
#include "runtime/kernel_bundle.h"
#include "runtime/kernel_cache.h"
#include "runtime/tuning_db.h"
#include "support/error.h"
#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {
namespace {

TEST(KernelCache, SecondAttentionForTheSameSpecHitsMemory) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Case c = small_case(Mod::Combination);
    c.mod = Mod::Softcap;
    const auto spec = make_spec(c);
    auto& cache = runtime::KernelCache::global();

    Attention first(spec);
    const runtime::CacheStats after_first = cache.stats();
    Attention second(make_spec(c));  // an equal spec built anew
    const runtime::CacheStats after_second = cache.stats();

    EXPECT_GT(after_second.memory_hits, after_first.memory_hits) << after_first << "\n" << after_second;
    EXPECT_EQ(after_second.misses, after_first.misses) << "the second Attention compiled again";
    EXPECT_EQ(after_second.disk_hits, after_first.disk_hits) << "the second Attention read the disk";
    EXPECT_EQ(after_second.loads, after_first.loads) << "the second Attention loaded another module";
    EXPECT_EQ(second.compile_seconds(), 0.0);
    EXPECT_TRUE(second.can_launch());

    // Both launch and compute the same bits on the same inputs.
    Problem p = make_problem(c);
    p.poison_outputs();
    first(p.args());
    p.download_outputs();
    const auto o1 = p.o.storage();
    const auto l1 = p.lse.storage();
    p.poison_outputs();
    second(p.args());
    p.download_outputs();
    EXPECT_EQ(o1, p.o.storage()) << "two launches of one cached kernel differ";
    EXPECT_EQ(l1, p.lse.storage());
    auto ref = reference::forward(p.spec, p.in);
    Check r = check_output(c.name() + " O", p.o, ref.o, reference::output_tolerance(c.dtype));
    EXPECT_TRUE(r.ok) << r.message;
}

// Autotuning (api/autotune.h): the first launch of a bucket times the candidates on scratch
// outputs and then runs the winner on the caller's, which matches the fp64 reference as the
// default does; the tuning database holds the bucket after, and a second Attention asked to
// tune takes it from there (no candidate compiled or loaded again) with the same bits.
TEST(Autotune, TheTunedForwardMatchesTheReferenceAndIsStored) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Case c = small_case(Mod::Combination);
    c.mod = Mod::Softcap;
    // A scale no earlier run stored in the (persistent) tuning database: this run tunes.
    const auto spec = AttentionSpec(make_spec(c)).scale(0.125 + 1e-9 * static_cast<double>(::getpid() % 1000));
    CompileOptions tune;
    tune.autotune = true;
    const api::AutotuneCounts at_start = api::autotune_counts();
    const Attention first(spec, tune);
    Problem p = make_problem(c);
    p.spec = spec;
    p.poison_outputs();
    first(p.args());
    p.download_outputs();
    EXPECT_EQ(api::autotune_counts().tuned, at_start.tuned + 1) << "the first launch did not tune";
    const auto o1 = p.o.storage();
    auto ref = reference::forward(p.spec, p.in);
    Check r = check_output(c.name() + " O (tuned)", p.o, ref.o, reference::output_tolerance(c.dtype));
    EXPECT_TRUE(r.ok) << r.message;

    const auto& device = runtime::current_device();
    const auto key = api::forward_tuning_key(spec, device.name, device.arch(), runtime::KernelCache::global().toolchain(),
                                             api::forward_candidates(spec, device.arch()));
    const auto bucket = api::shape_bucket(p.args().q.shape[2], p.args().k.shape[2]);
    const auto stored = api::tuning_db().find(key, bucket);
    ASSERT_TRUE(stored) << bucket;
    EXPECT_GT(stored->candidates, 1);
    EXPECT_GT(stored->seconds, 0.0);
    EXPECT_LE(stored->seconds, stored->default_seconds);

    const Attention second(spec, tune);
    p.poison_outputs();
    second(p.args());
    p.download_outputs();
    EXPECT_EQ(api::autotune_counts().tuned, at_start.tuned + 1) << "the second Attention tuned again";
    EXPECT_EQ(api::autotune_counts().database_hits, at_start.database_hits + 1);
    EXPECT_EQ(o1, p.o.storage()) << "the stored choice computes other bits than the tuned one";
}

// A kernel bundle's recorded choice (attnjit-aot --tuning; api/aot.h makes the bundle here as the
// tool does): an Attention asked to tune takes the bucket's configuration from the bundle (nothing
// timed, no database asked), launches it, and matches the fp64 reference.
TEST(Autotune, ABundledChoiceIsTakenWithoutTiming) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    struct Cleanup {
        std::string dir;
        ~Cleanup() {
            runtime::BundleRegistry::global().clear();  // later tests see no bundle
            if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
        }
    } cleanup;
    char tmpl[] = "/tmp/attnjit-bundled-choice-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    cleanup.dir = tmpl;

    const Case c = small_case(Mod::Softcap);
    // A scale no earlier run stored in the (persistent) tuning database.
    const auto spec = AttentionSpec(make_spec(c)).scale(0.25 + 1e-9 * static_cast<double>(::getpid() % 1000));
    Problem p = make_problem(c);
    p.spec = spec;
    const auto& device = runtime::current_device();
    const std::string arch = device.arch();
    const std::string bucket = api::shape_bucket(p.args().q.shape[2], p.args().k.shape[2]);
    const std::vector<KernelConfig> candidates = api::forward_candidates(spec, arch);
    ASSERT_GT(candidates.size(), 1u);
    // Not the default (on sm_90a, the sm80 loop's), with a CTA order of its own.
    const KernelConfig pick = api::schedule_variants(candidates.back()).back();
    ASSERT_NE(pick.schedule, CtaSchedule{}) << pick;
    runtime::TuningDb db(cleanup.dir);
    runtime::TuningResult recorded;
    recorded.tile = pick.tile;
    recorded.mainloop = pick.mainloop;
    recorded.schedule = pick.schedule;
    recorded.seconds = 1e-3;
    recorded.default_seconds = 2e-3;
    recorded.candidates = static_cast<int>(candidates.size());
    recorded.tuning_seconds = 1.0;
    db.store(api::forward_tuning_key(spec, device.name, arch, "the tuning process's compiler", candidates), bucket,
             recorded);
    api::AotOptions forward_only;
    forward_only.backward = false;
    (void)api::compile_for_bundle(spec, arch, forward_only);
    const auto choices = api::compile_tuned_for_bundle(spec, arch, db.entries(), "");
    ASSERT_EQ(choices.size(), 1u);
    EXPECT_EQ(choices[0].result.schedule, pick.schedule) << "the bundle does not record the chosen schedule";
    api::write_bundle_of_compiled(cleanup.dir + "/bundle", {{spec, "spec.json"}}, choices);
    ASSERT_GT(runtime::load_bundle(cleanup.dir + "/bundle"), 0u);

    CompileOptions tune;
    tune.autotune = true;
    const api::AutotuneCounts at_start = api::autotune_counts();
    const Attention attn(spec, tune);
    p.poison_outputs();
    attn(p.args());
    p.download_outputs();
    const api::AutotuneCounts now = api::autotune_counts();
    EXPECT_EQ(now.bundle_hits, at_start.bundle_hits + 1) << "the bundle's choice was not taken";
    EXPECT_EQ(now.tuned, at_start.tuned) << "the bucket was timed";
    EXPECT_EQ(now.database_hits, at_start.database_hits);
    const auto ref = reference::forward(p.spec, p.in);
    const Check r = check_output(c.name() + " O (bundled choice)", p.o, ref.o, reference::output_tolerance(c.dtype));
    EXPECT_TRUE(r.ok) << r.message;
}

// Every configuration the autotuner times for a spec (api::forward_candidates on this GPU)
// computes the reference's output, not only the default: the tuner may pick any of them. Ragged
// lengths (not multiples of any tile), head dims 64 and 128 (and 256 for the bias), the mods
// whose reads differ by loop (a padded per-batch bias, the sm90 bias tile's reads; a document
// mask; softcap; causal). One test a (mod, head dim), so that the shards run them side by side.
class EveryForwardCandidate : public ::testing::TestWithParam<std::pair<Mod, int>> {};

TEST_P(EveryForwardCandidate, MatchesTheReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const auto [mod, d] = GetParam();
    const Case c = make_case(mod, DType::bf16, d, {2, 4, 2, 300, 555});
    Problem p = make_problem(c);
    const auto ref = reference::forward(p.spec, p.in);
    const auto candidates = api::forward_candidates(p.spec, runtime::current_device().arch());
    EXPECT_GT(candidates.size(), 1u);
    for (const KernelConfig& k : candidates) {
        std::ostringstream config;
        config << k;
        CompileOptions forced;
        forced.tile = k.tile;
        forced.mainloop = k.mainloop;
        try {
            const Attention attn(p.spec, forced);
            p.poison_outputs();
            attn(p.args());
            p.download_outputs();
        } catch (const std::exception& e) {
            ADD_FAILURE() << c.name() << " " << config.str() << ": " << e.what();
            continue;
        }
        const Check o = check_output(c.name() + " O " + config.str(), p.o, ref.o, reference::output_tolerance(c.dtype));
        EXPECT_TRUE(o.ok) << o.message;
        const Check l = check_output(c.name() + " LSE " + config.str(), p.lse, ref.lse, reference::kLseTolerance);
        EXPECT_TRUE(l.ok) << l.message;
    }
}

INSTANTIATE_TEST_SUITE_P(Autotune, EveryForwardCandidate,
                         ::testing::Values(std::pair{Mod::BiasPadded, 128}, std::pair{Mod::BiasPadded, 64},
                                           std::pair{Mod::BiasPadded, 256},
                                           std::pair{Mod::DocumentMask, 128}, std::pair{Mod::DocumentMask, 64},
                                           std::pair{Mod::Softcap, 128}, std::pair{Mod::Softcap, 64},
                                           std::pair{Mod::CausalTopLeft, 128}, std::pair{Mod::CausalTopLeft, 64}),
                         [](const auto& info) {
                             return std::string(mod_name(info.param.first)) + "_d" + std::to_string(info.param.second);
                         });

// Every schedule the tuner may launch the default kernel with (api::schedule_variants: each CTA
// order, and on sm_90a each grid) computes the reference's output, and the same bits as the
// kernel's own schedule: a work item is computed alike whichever CTA takes it, in whatever order.
// More work items (query tiles x heads x batch) than the GPU has SMs, so that a persistent CTA
// takes several; ragged lengths; a mask that skips tiles (the chunked orders' case) and one that
// does not.
class EverySchedule : public ::testing::TestWithParam<std::pair<Mod, int>> {};

TEST_P(EverySchedule, ComputesTheKernelsOwnBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const auto [mod, d] = GetParam();
    const int sms = runtime::current_device().sm_count;
    const Case c = make_case(mod, DType::bf16, d, {1, (sms / 6 + 2) / 2 * 2, 2, 777, 901});  // 7 tiles of 128 rows a head
    Problem p = make_problem(c);
    const auto ref = reference::forward(p.spec, p.in);
    const Attention own(p.spec);
    const auto variants = api::schedule_variants(own.config());
    EXPECT_GE(variants.size(), static_cast<size_t>(kOrderLast + 1)) << own.config();
    p.poison_outputs();
    own(p.args());
    p.download_outputs();
    const auto o_own = p.o.storage();
    const auto lse_own = p.lse.storage();
    for (const KernelConfig& k : variants) {
        std::ostringstream config;
        config << k;
        CompileOptions pinned;
        pinned.schedule = k.schedule;
        const Attention attn(p.spec, pinned);
        EXPECT_EQ(attn.config(), k);
        p.poison_outputs();
        attn(p.args());
        p.download_outputs();
        const Check o = check_output(c.name() + " O " + config.str(), p.o, ref.o, reference::output_tolerance(c.dtype));
        EXPECT_TRUE(o.ok) << o.message;
        const Check l = check_output(c.name() + " LSE " + config.str(), p.lse, ref.lse, reference::kLseTolerance);
        EXPECT_TRUE(l.ok) << l.message;
        EXPECT_TRUE(p.o.storage() == o_own && p.lse.storage() == lse_own)
            << config.str() << ": other bits than the kernel's own schedule";
    }
}

INSTANTIATE_TEST_SUITE_P(Autotune, EverySchedule,
                         ::testing::Values(std::pair{Mod::CausalTopLeft, 128}, std::pair{Mod::DocumentMask, 64},
                                           std::pair{Mod::Softcap, 128}, std::pair{Mod::BiasPadded, 128}),
                         [](const auto& info) {
                             return std::string(mod_name(info.param.first)) + "_d" + std::to_string(info.param.second);
                         });

struct BadArgs {
    std::string name;
    std::function<void(LaunchArgs&)> spoil;
};

std::vector<BadArgs> bad_args_cases(const Problem& p) {
    const int64_t B = p.c.batch, Nq = p.c.nq;
    return {
        {"q of the wrong dtype", [](LaunchArgs& a) { a.q.dtype = DType::f16; }},
        {"k with the wrong head dim", [](LaunchArgs& a) { a.k.shape[3] = 64; }},
        {"v shorter than k", [](LaunchArgs& a) { a.v.shape[2] -= 1; }},
        {"o of the wrong length", [](LaunchArgs& a) { a.o.shape[2] -= 1; }},
        {"q heads not a multiple of kv heads",
         [](LaunchArgs& a) {
             a.q.shape[1] = 3;
             a.o.shape[1] = 3;
             a.lse->shape[1] = 3;
         }},
        {"null q", [](LaunchArgs& a) { a.q.data = nullptr; }},
        {"misaligned q", [](LaunchArgs& a) { a.q.data = static_cast<char*>(a.q.data) + 2; }},
        {"o with a non-unit head-dim stride", [](LaunchArgs& a) { a.o.strides[3] = 2; }},
        {"o with a stride that breaks 16-byte rows", [](LaunchArgs& a) { a.o.strides[2] += 1; }},
        {"o overlapping itself (stride 0)", [](LaunchArgs& a) { a.o.strides[2] = 0; }},
        {"missing lse", [](LaunchArgs& a) { a.lse.reset(); }},
        {"lse of the wrong dtype", [](LaunchArgs& a) { a.lse->dtype = DType::bf16; }},
        {"missing captured tensor", [](LaunchArgs& a) { a.tensors.erase("rel_table"); }},
        {"extra captured tensor", [](LaunchArgs& a) { a.tensors["unused"] = a.tensors.at("q_doc"); }},
        {"captured tensor of the wrong dtype", [](LaunchArgs& a) { a.tensors.at("q_doc").dtype = DType::f32; }},
        {"captured tensor too small",
         [B, Nq](LaunchArgs& a) { a.tensors.at("q_doc").shape = {B, Nq - 1}; }},
        {"missing scalar", [](LaunchArgs& a) { a.scalars.erase("cap"); }},
        {"extra scalar", [](LaunchArgs& a) { a.scalars["window"] = 3; }},
        {"NaN scalar", [](LaunchArgs& a) { a.scalars["cap"] = std::nan(""); }},
    };
}

TEST(LaunchArgs, BadArgumentsLaunchNothingAndLeaveOutputsPoisoned) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const Case c = small_case(Mod::Combination);
    Problem p = make_problem(c);
    Attention attn(p.spec);
    const auto loads_before = runtime::KernelCache::global().stats().loads;
    for (const BadArgs& bad : bad_args_cases(p)) {
        SCOPED_TRACE(bad.name);
        p.poison_outputs();
        LaunchArgs a = p.args();
        bad.spoil(a);
        EXPECT_THROW(check_launch_args(p.spec, a), UserError) << bad.name;
        try {
            attn(a);
            ADD_FAILURE() << bad.name << ": the launch was not refused";
        } catch (const UserError& e) {
            EXPECT_FALSE(std::string(e.what()).empty());
        } catch (const std::exception& e) {
            ADD_FAILURE() << bad.name << ": expected a UserError, got " << e.what();
        }
        p.download_outputs();  // synchronises: a stray launch would have finished
        EXPECT_TRUE(all_poison(p.o)) << bad.name << ": O was written";
        EXPECT_TRUE(all_poison(p.lse)) << bad.name << ": LSE was written";
    }
    EXPECT_EQ(runtime::KernelCache::global().stats().loads, loads_before);

    // The same problem with its good arguments is written everywhere and correct, so the
    // checks above are not vacuous.
    p.poison_outputs();
    attn(p.args());
    p.download_outputs();
    auto ref = reference::forward(p.spec, p.in);
    Check o = check_output(c.name() + " O", p.o, ref.o, reference::output_tolerance(c.dtype));
    EXPECT_TRUE(o.ok) << o.message;
    Check l = check_output(c.name() + " LSE", p.lse, ref.lse, reference::kLseTolerance);
    EXPECT_TRUE(l.ok) << l.message;
}

}  // namespace
}  // namespace attnjit::gputest
