// Backward kernels (AttentionBackward) against the fp64 backward reference
// (reference/attention_backward.h): every ready-made modifier x fp16 / bf16 / fp32 x head
// dims x ragged GQA shapes, the [B, N, H, D] layout, Nq > Nk with fully masked rows, and
// determinism; the same matrix (fp16 / bf16, head dims up to 128) for the fast backward
// (CompileOptions.deterministic = false: dQ summed with atomics). Each case runs the attnjit forward first (its O and LSE feed the backward,
// as in training), draws a seeded random dO, poisons dQ, dK and dV on the device, and fails
// on NaN, unwritten elements or an element outside the tolerance.
//
// Tolerance: reference::gradient_tolerance (reference/tolerance.h), per dtype and relative
// to the largest reference gradient of the tensor; each case prints its margins.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include "api/attention_backward.h"
#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "tests/common/expect_error.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "reference/attention_backward.h"
#include "support/exceptions.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/head_dim_cases.h"

namespace attnjit::gputest {
namespace {

// The forward's problem plus the backward's device tensors.
struct GradProblem {
    Problem fwd;
    HostTensor d_o, dq, dk, dv;  // host mirrors (dq, dk, dv poisoned before each run)
    runtime::DeviceTensor dev_d_o, dev_dq, dev_dk, dev_dv;
    // Attention sinks (case.sinks): d sinks [Hq] in the sinks' dtype, poisoned like dq.
    HostTensor dsinks;
    runtime::DeviceTensor dev_dsinks;
    // An output gate (case.gate): d gate, in the gate's layout, poisoned like dq.
    HostTensor dgate;
    runtime::DeviceTensor dev_dgate;

    bool has_sinks() const { return fwd.c.sinks.has_value(); }
    GradArgs grads() const {
        GradArgs g{dev_d_o.view, dev_dq.view, dev_dk.view, dev_dv.view};
        if (has_sinks()) g.grads["sinks"] = dev_dsinks.view;
        if (fwd.c.gate) g.grads["gate"] = dev_dgate.view;
        return g;
    }
    void poison() {
        const std::pair<HostTensor*, runtime::DeviceTensor*> grads[] = {
            {&dq, &dev_dq}, {&dk, &dev_dk}, {&dv, &dev_dv}, {&dsinks, &dev_dsinks}, {&dgate, &dev_dgate}};
        for (const auto& [host, device] : grads) {
            if (host == &dsinks && !has_sinks()) continue;
            if (host == &dgate && !fwd.c.gate) continue;
            reference::fill_poison(*host);
            device->buffer.upload(host->storage().data(), host->storage().size());
        }
    }
    void download() {
        runtime::synchronize("cuCtxSynchronize after the backward kernels");
        runtime::from_device(dev_dq, dq);
        runtime::from_device(dev_dk, dk);
        runtime::from_device(dev_dv, dv);
        if (has_sinks()) runtime::from_device(dev_dsinks, dsinks);
        if (fwd.c.gate) runtime::from_device(dev_dgate, dgate);
    }
};

// Gradients take the layout of what they differentiate (q, k, v; d_o that of o).
HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape(), t.strides(), t.storage_offset()); }

GradProblem make_grad_problem(const Case& c) {
    GradProblem g{make_problem(c), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    g.d_o = like(g.fwd.o);
    reference::fill_normal(g.d_o, c.seed() + 17);
    g.dq = like(g.fwd.in.q);
    g.dk = like(g.fwd.in.k);
    g.dv = like(g.fwd.in.v);
    g.dev_d_o = runtime::to_device(g.d_o);
    g.dev_dq = runtime::to_device(g.dq);
    g.dev_dk = runtime::to_device(g.dk);
    g.dev_dv = runtime::to_device(g.dv);
    if (c.sinks) {
        g.dsinks = HostTensor(*c.sinks, {c.hq});
        g.dev_dsinks = runtime::to_device(g.dsinks);
    }
    if (c.gate) {
        g.dgate = like(g.fwd.in.tensors.at("gate"));
        g.dev_dgate = runtime::to_device(g.dgate);
    }
    return g;
}


// Where backward_fused runs (kernel_config.h) on the GPUs the tests run on (sm_90): fp16 /
// bf16, head dims 40 to 64, 104 to 128 and 136 to 256 (tiles of 64, 128 and 256; not Q/K's
// 64 beside V's 256, which would pad Q/K to 128).
bool fused_backward_exists(const Case& c) {
    auto dim_ok = [](int d) { return (d >= 40 && d <= 64) || (d >= 104 && d <= 128) || (d >= 136 && d <= 256); };
    return c.dtype != DType::f32 && dim_ok(c.dqk) && dim_ok(c.dv) && !(c.dqk <= 64 && c.dv > 128);
}

// The backwards: fused with dQ added in a fixed order (the default), the two-pass one
// (backward_dq, backward_dkdv), fused with dQ added in any order (fast); on the sm80 loop, and
// (the _sm90 ones: CompileOptions.mainloop = sm90, sm_90a only) with the kernel that owns the
// keys (backward_fused, or backward_dkdv) on the sm90 loop.
enum class Algo { fused_ordered, two_pass, fast, fused_ordered_sm90, two_pass_sm90, fast_sm90 };

bool is_fast(Algo algo) { return algo == Algo::fast || algo == Algo::fast_sm90; }
bool is_two_pass(Algo algo) { return algo == Algo::two_pass || algo == Algo::two_pass_sm90; }
bool on_sm90(Algo algo) {
    return algo == Algo::fused_ordered_sm90 || algo == Algo::two_pass_sm90 || algo == Algo::fast_sm90;
}

CompileOptions backward_options(Algo algo) {
    CompileOptions o;
    o.deterministic = !is_fast(algo);
    o.fused_backward = !is_two_pass(algo);
    o.mainloop = on_sm90(algo) ? MainloopKind::sm90 : MainloopKind::sm80;
    return o;
}

std::string algo_suffix(Algo algo) {
    const std::string loop = on_sm90(algo) ? ", sm90" : "";
    return is_fast(algo) ? " (fast" + loop + ")" : is_two_pass(algo) ? " (two-pass" + loop + ")" : on_sm90(algo) ? " (sm90)" : "";
}

// Forward, backward, reference; checks dQ, dK, dV.
Check run_backward_case(const Case& c, Algo algo = Algo::fused_ordered) {
    const std::string name = c.name() + algo_suffix(algo);
    try {
        GradProblem g = make_grad_problem(c);
        Problem& p = g.fwd;
        Attention forward(p.spec);
        AttentionBackward backward(p.spec, backward_options(algo));
        const bool fused_exists = fused_backward_exists(c);
        if (backward.deterministic() != (!is_fast(algo) || !fused_exists))
            return {false, name + ": AttentionBackward::deterministic() is not what was asked for"};
        p.poison_outputs();
        forward(p.args());
        p.download_outputs();  // the backward reads the device O and LSE the forward wrote
        g.poison();
        backward(p.args(), g.grads());
        g.download();
        std::set<std::string> wanted;
        if (c.sinks) wanted.insert("sinks");
        if (c.gate) wanted.insert("gate");
        const reference::BackwardResult ref = reference::backward(p.spec, p.in, g.d_o, wanted);

        // The margins, for the log: max |error| / max |reference| per gradient.
        auto rel = [](const HostTensor& a, const reference::DoubleTensor& e) {
            double g_max = 0;
            for (double x : e.data) g_max = std::max(g_max, std::fabs(x));
            return reference::max_abs_error(reference::to_double(a), e) / std::max(g_max, 1e-30);
        };
        std::printf("%s: max error / max |gradient|: dQ %.2e dK %.2e dV %.2e (tolerance %.0e)\n", name.c_str(),
                    rel(g.dq, ref.dq), rel(g.dk, ref.dk), rel(g.dv, ref.dv), reference::gradient_tolerance(c.dtype));
        std::vector<Check> checks = {check_gradient(name + " dQ", g.dq, ref.dq, c.dtype),
                                     check_gradient(name + " dK", g.dk, ref.dk, c.dtype),
                                     check_gradient(name + " dV", g.dv, ref.dv, c.dtype)};
        if (c.sinks) {
            // d sinks: a sum over B * Nq rows of the O / dO products, so its tolerance is the
            // gradients' one for the wider of the two dtypes' roundings.
            const reference::DoubleTensor& want = ref.dtensors.at("sinks");
            const DType dt = *c.sinks == DType::f32 ? c.dtype : *c.sinks;
            std::printf("%s: d sinks max error / max |gradient| %.2e\n", name.c_str(), rel(g.dsinks, want));
            checks.push_back(check_gradient(name + " d sinks", g.dsinks, want, dt));
        }
        if (c.gate) {
            const reference::DoubleTensor& want = ref.dtensors.at("gate");
            std::printf("%s: d gate max error / max |gradient| %.2e\n", name.c_str(), rel(g.dgate, want));
            checks.push_back(check_gradient(name + " d gate", g.dgate, want, c.dtype));
        }
        Check r;
        for (const Check& k : checks)
            if (!k.ok) {
                r.ok = false;
                r.message += (r.message.empty() ? "" : "\n") + k.message;
            }
        return r;
    } catch (const std::exception& e) {
        return {false, name + ": threw " + e.what()};
    }
}

std::vector<Case> backward_matrix() {
    std::vector<Case> cases;
    for (Mod m : all_mods())
        for (DType dt : {DType::bf16, DType::f16, DType::f32}) cases.push_back(make_case(m, dt, 64, {2, 4, 2, 129, 255}));
    for (Mod m : all_mods()) cases.push_back(make_case(m, DType::bf16, 128, {1, 2, 1, 77, 300}));
    for (int d : {32, 96, 256}) cases.push_back(make_case(Mod::Plain, DType::bf16, d, {1, 2, 2, 65, 100}));
    Case uneven = make_case(Mod::CausalBottomRight, DType::f16, 128, {2, 2, 1, 50, 70});
    uneven.dv = 64;
    cases.push_back(uneven);
    Case transposed = make_case(Mod::AlibiCausal, DType::bf16, 64, {2, 4, 4, 100, 100});
    transposed.layout = Layout::BNHD;
    cases.push_back(transposed);
    // Nq > Nk, bottom-right causal: the first Nq - Nk rows keep no key (zero dQ, no NaN).
    cases.push_back(make_case(Mod::CausalBottomRight, DType::bf16, 64, {1, 2, 2, 129, 17}));
    // No queries: dK and dV are zeros. The key-tile kernels still run; their step cursor must
    // end at once (f32: the simt kernels, d256: sm80 backward_fused in column halves, bf16 /
    // f16 d64 and d128: the sm90 backward_dkdv on Hopper, with tensor maps of the empty Q and
    // dO, the gated one's too; a mask that classifies and one that does not).
    cases.push_back(make_case(Mod::Plain, DType::f32, 64, {1, 2, 2, 0, 255}));
    cases.push_back(make_case(Mod::SlidingWindow, DType::bf16, 256, {1, 2, 1, 0, 255}));
    cases.push_back(make_case(Mod::Plain, DType::bf16, 128, {2, 4, 2, 0, 255}));
    cases.push_back(make_case(Mod::CausalBottomRight, DType::f16, 64, {1, 2, 1, 0, 130}));
    cases.push_back(with_gate(make_case(Mod::Plain, DType::bf16, 128, {1, 2, 2, 0, 200})));  // its dO map
    // Attention sinks (d sinks too): every dtype with ragged GQA and rows that keep no key
    // (their LSE is the sink: they still add to d sinks), a score_mod, sinks in bf16 / f16,
    // d256 (backward_fused in column halves), [B, N, H, D].
    for (DType dt : {DType::bf16, DType::f16, DType::f32})
        cases.push_back(with_sinks(make_case(Mod::CausalBottomRight, dt, 64, {2, 4, 2, 150, 129})));
    cases.push_back(with_sinks(make_case(Mod::Softcap, DType::bf16, 128, {1, 4, 2, 77, 300}), DType::bf16));
    cases.push_back(with_sinks(make_case(Mod::SlidingWindow, DType::f16, 64, {2, 4, 1, 200, 255}), DType::f16));
    cases.push_back(with_sinks(make_case(Mod::Plain, DType::bf16, 256, {1, 2, 2, 65, 100})));
    // Nq over kSinkGradChunkRows (512): d sinks sums several chunks per (batch, head).
    cases.push_back(with_sinks(make_case(Mod::CausalBottomRight, DType::bf16, 64, {2, 2, 1, 1100, 700})));
    Case sinks_bnhd = with_sinks(make_case(Mod::AlibiCausal, DType::bf16, 64, {2, 4, 4, 100, 100}));
    sinks_bnhd.layout = Layout::BNHD;
    cases.push_back(sinks_bnhd);
    // Output gate (d gate too): gpu_test_support.h's gate_cases().
    for (const Case& c : gate_cases()) cases.push_back(c);
    return cases;
}

// Needs no GPU: every sinks case of the matrix builds on the host and its reference gives
// a finite d sinks (zero for the -inf sink of the last head), with the sinks' tensor where
// the spec expects it.
TEST(BackwardMatrix, SinksCasesRunOnTheHostReference) {
    int cases = 0;
    for (const Case& c : backward_matrix()) {
        if (!c.sinks) continue;
        ++cases;
        const Problem p = make_problem(c, false);
        HostTensor d_o(c.dtype, {c.batch, c.hq, c.nq, c.dv});
        reference::fill_normal(d_o, c.seed() + 17);
        const reference::BackwardResult ref = reference::backward(p.spec, p.in, d_o, {"sinks"});
        const reference::DoubleTensor& ds = ref.dtensors.at("sinks");
        ASSERT_EQ(ds.shape, (std::vector<int64_t>{c.hq})) << c.name();
        for (double x : ds.data) EXPECT_TRUE(std::isfinite(x)) << c.name();
        if (c.hq >= 4) {
            EXPECT_EQ(ds.data.back(), 0.0) << c.name();
        }
        for (double x : ref.forward.lse.data) EXPECT_FALSE(std::isnan(x)) << c.name();
    }
    EXPECT_GE(cases, 8);
}

// Needs no GPU: the Nq == 0 cases of the matrix build on the host and their reference gives
// dK = dV = 0 (what the key-tile kernels must write), with an empty gate gradient where gated.
TEST(BackwardMatrix, EmptyQueryCasesRunOnTheHostReference) {
    int cases = 0;
    for (const Case& c : backward_matrix()) {
        if (c.nq != 0) continue;
        ++cases;
        const Problem p = make_problem(c, false);
        HostTensor d_o(c.dtype, {c.batch, c.hq, c.nq, c.dv});
        std::set<std::string> wanted;
        if (c.gate) wanted.insert("gate");
        const reference::BackwardResult ref = reference::backward(p.spec, p.in, d_o, wanted);
        ASSERT_FALSE(ref.dk.data.empty()) << c.name();
        for (double x : ref.dk.data) EXPECT_EQ(x, 0.0) << c.name();
        for (double x : ref.dv.data) EXPECT_EQ(x, 0.0) << c.name();
        if (c.gate) {
            EXPECT_TRUE(ref.dtensors.at("gate").data.empty()) << c.name();
        }
    }
    EXPECT_GE(cases, 5);
}

class Backward : public ::testing::TestWithParam<Case> {};

TEST_P(Backward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_backward_case(GetParam());
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Backward, ::testing::ValuesIn(backward_matrix()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });
// Head dims between the tile sizes (tests/gpu/head_dim_cases.cpp).
INSTANTIATE_TEST_SUITE_P(HeadDims, Backward, ::testing::ValuesIn(padded_head_dim_backward_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// The cases of `all` the fused backward exists for.
std::vector<Case> fused_backward_cases(const std::vector<Case>& all) {
    std::vector<Case> cases;
    for (const Case& c : all)
        if (fused_backward_exists(c)) cases.push_back(c);
    return cases;
}
std::vector<Case> fused_backward_matrix() { return fused_backward_cases(backward_matrix()); }

class FastBackward : public ::testing::TestWithParam<Case> {};

TEST_P(FastBackward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_backward_case(GetParam(), Algo::fast);
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FastBackward, ::testing::ValuesIn(fused_backward_matrix()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });
INSTANTIATE_TEST_SUITE_P(HeadDims, FastBackward,
                         ::testing::ValuesIn(fused_backward_cases(padded_head_dim_backward_cases())),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// Where the fused backward exists, the two-pass one still runs when asked for.
class TwoPassBackward : public ::testing::TestWithParam<Case> {};

TEST_P(TwoPassBackward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_backward_case(GetParam(), Algo::two_pass);
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, TwoPassBackward, ::testing::ValuesIn(fused_backward_matrix()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });
INSTANTIATE_TEST_SUITE_P(HeadDims, TwoPassBackward,
                         ::testing::ValuesIn(fused_backward_cases(padded_head_dim_backward_cases())),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// The backwards with the sm90 loop's kernel (sm_90a only): the fused cases at tile head dims
// 64 and 128, each with dQ added in order, in any order, and in the two-pass backward.
class Sm90Backward : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90Backward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    if (runtime::current_device().arch() != "sm_90a") GTEST_SKIP() << "the sm90 loop runs on sm_90a only";
    for (Algo algo : {Algo::fused_ordered_sm90, Algo::fast_sm90, Algo::two_pass_sm90}) {
        Check r = run_backward_case(GetParam(), algo);
        EXPECT_TRUE(r.ok) << r.message;
    }
}

std::vector<Case> sm90_backward_cases(const std::vector<Case>& all) {
    std::vector<Case> cases;
    for (const Case& c : fused_backward_cases(all))
        if (tile_head_dim(c.dqk) <= 128 && tile_head_dim(c.dv) <= 128 && sm90_head_dims(c.dqk, c.dv)) cases.push_back(c);
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Sm90Backward, ::testing::ValuesIn(sm90_backward_cases(backward_matrix())),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });
INSTANTIATE_TEST_SUITE_P(HeadDims, Sm90Backward,
                         ::testing::ValuesIn(sm90_backward_cases(padded_head_dim_backward_cases())),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// Where the fused backward does not exist (f32, head dims 32, 96, 48 x 200) the two-pass one
// runs.
TEST(FastBackward, FallsBackWhereItDoesNotExist) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Case narrow_qk = make_case(Mod::Plain, DType::bf16, 48, {1, 2, 2, 65, 100});
    narrow_qk.dv = 200;
    for (const Case& c : {make_case(Mod::Plain, DType::f32, 64, {1, 2, 2, 65, 100}), narrow_qk,
                          make_case(Mod::Plain, DType::bf16, 32, {1, 2, 2, 65, 100}),
                          make_case(Mod::Plain, DType::bf16, 96, {1, 2, 2, 65, 100})}) {
        const Problem p = make_problem(c);
        EXPECT_TRUE(AttentionBackward(p.spec, backward_options(Algo::fast)).deterministic()) << c.name();
    }
    Check r = run_backward_case(make_case(Mod::Plain, DType::f32, 64, {1, 2, 2, 65, 100}), Algo::fast);
    EXPECT_TRUE(r.ok) << r.message;
}

// Whether two backward runs on the same inputs write the same bits (dQ compared only when
// with_dq). 2000 keys: 16 key tiles add to each query tile's dQ.
bool same_bits_twice(Algo algo, bool with_dq, Mod mod = Mod::Combination, bool sinks = false) {
    Case c = make_case(mod, DType::bf16, 64, {2, 4, 2, 300, 2000});
    if (sinks) c = with_sinks(c);
    GradProblem g = make_grad_problem(c);
    Attention forward(g.fwd.spec);
    AttentionBackward backward(g.fwd.spec, backward_options(algo));
    forward(g.fwd.args());
    std::vector<std::vector<uint8_t>> runs;
    for (int run = 0; run < 2; ++run) {
        g.poison();
        backward(g.fwd.args(), g.grads());
        g.download();
        std::vector<uint8_t> bits = with_dq ? g.dq.storage() : std::vector<uint8_t>{};
        bits.insert(bits.end(), g.dk.storage().begin(), g.dk.storage().end());
        bits.insert(bits.end(), g.dv.storage().begin(), g.dv.storage().end());
        if (sinks) bits.insert(bits.end(), g.dsinks.storage().begin(), g.dsinks.storage().end());
        runs.push_back(std::move(bits));
    }
    return runs[0] == runs[1];
}

// The fast backward's dK and dV are still one thread's fixed-order sums: the same bits.
TEST(BackwardDeterminism, FastBackwardKeepsDkDvBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    EXPECT_TRUE(same_bits_twice(Algo::fast, false)) << "the fast backward's dK, dV are not deterministic";
}

// Two runs on the same inputs write the same bits.
TEST(BackwardDeterminism, SameInputsSameBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (Mod mod : {Mod::Combination, Mod::Plain, Mod::CausalBottomRight, Mod::SlidingWindow})
        EXPECT_TRUE(same_bits_twice(Algo::fused_ordered, true, mod)) << "the fused backward is not deterministic";
    EXPECT_TRUE(same_bits_twice(Algo::two_pass, true)) << "the two-pass backward is not deterministic";
    if (runtime::current_device().arch() == "sm_90a") {
        for (Mod mod : {Mod::Combination, Mod::Plain, Mod::CausalBottomRight})
            EXPECT_TRUE(same_bits_twice(Algo::fused_ordered_sm90, true, mod)) << "the sm90 backward is not deterministic";
        EXPECT_TRUE(same_bits_twice(Algo::fast_sm90, false)) << "the fast sm90 backward's dK, dV are not deterministic";
    }
}

// Autotuning the backward (api/backward_tuning.h): the first launch of a bucket times every
// candidate on scratch gradients, then the winner writes the caller's dQ, dK, dV, which match
// fp64 (the poisoned ones are all written); the tuning database then holds the bucket, and a
// second AttentionBackward asked to tune takes it from there (nothing timed) with the same bits.
// Three backwards: one the sm90 loop carries (candidates: its own and the sm80 loop's default),
// the two-pass one at head dim 32 and the fused one at 256 (sm80, FlashAttention-2's tiles).
// The fused one at 256 is tuned again adding dQ in any order: another kernel, another key.
TEST(BackwardAutotune, TheTunedBackwardMatchesTheReferenceAndIsStored) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const auto& device = runtime::current_device();
    for (const Case& c : {make_case(Mod::Softcap, DType::bf16, 128, {1, 2, 1, 77, 300}),
                           make_case(Mod::AlibiCausal, DType::bf16, 32, {2, 2, 1, 129, 255}),
                           make_case(Mod::Plain, DType::f16, 256, {1, 2, 2, 65, 100})}) {
        SCOPED_TRACE(c.name());
        GradProblem g = make_grad_problem(c);
        Problem& p = g.fwd;
        // A scale no earlier run stored in the (persistent) tuning database: this run tunes.
        p.spec = AttentionSpec(p.spec).scale(0.125 + 1e-9 * static_cast<double>(::getpid() % 1000));
        CompileOptions tune;
        tune.autotune = true;
        const api::AutotuneCounts at_start = api::autotune_counts();
        Attention forward(p.spec);
        const AttentionBackward first(p.spec, tune);
        p.poison_outputs();
        forward(p.args());
        p.download_outputs();
        g.poison();
        first(p.args(), g.grads());
        g.download();
        EXPECT_EQ(api::autotune_counts().tuned, at_start.tuned + 1) << "the first launch did not tune";
        const reference::BackwardResult ref = reference::backward(p.spec, p.in, g.d_o, {});
        for (const Check& k : {check_gradient("tuned dQ", g.dq, ref.dq, c.dtype),
                               check_gradient("tuned dK", g.dk, ref.dk, c.dtype),
                               check_gradient("tuned dV", g.dv, ref.dv, c.dtype)})
            EXPECT_TRUE(k.ok) << k.message;
        const auto dq1 = g.dq.storage(), dk1 = g.dk.storage(), dv1 = g.dv.storage();

        // What the tuner stored, under the key of the default's key-tile kernel.
        const AttentionBackward defaults(p.spec);
        const KernelKind keys = defaults.key_kind();
        EXPECT_EQ(keys, c.dqk == 32 ? KernelKind::backward_dkdv : KernelKind::backward_fused);
        const auto candidates = api::backward_candidates(p.spec, defaults.config(keys), device.arch());
        EXPECT_GE(candidates.size(), 2u);
        const auto key = api::tuning_key(p.spec, keys, device.name, device.arch(),
                                         runtime::KernelCache::global().toolchain(), candidates);
        const auto stored = api::tuning_db().find(key, api::shape_bucket(c.nq, c.nk));
        ASSERT_TRUE(stored);
        EXPECT_EQ(stored->candidates, static_cast<int>(candidates.size()));
        EXPECT_GT(stored->seconds, 0.0);
        EXPECT_LE(stored->seconds, stored->default_seconds);
        std::printf("%s: backward tuned over %zu candidates in %.2f s: %s (%.3f ms, default %.3f ms)\n",
                    c.name().c_str(), candidates.size(), stored->tuning_seconds,
                    codegen::to_string(stored->tile).c_str(), 1e3 * stored->seconds, 1e3 * stored->default_seconds);

        const AttentionBackward second(p.spec, tune);
        g.poison();
        second(p.args(), g.grads());
        g.download();
        EXPECT_EQ(api::autotune_counts().tuned, at_start.tuned + 1) << "the second AttentionBackward tuned again";
        EXPECT_EQ(api::autotune_counts().database_hits, at_start.database_hits + 1);
        EXPECT_EQ(dq1, g.dq.storage()) << "the stored choice computes other bits than the tuned one";
        EXPECT_EQ(dk1, g.dk.storage());
        EXPECT_EQ(dv1, g.dv.storage());

        // The backward that adds dQ in any order (fused sm80 here) is another kernel: tuned apart,
        // under its own key, and it too matches the reference.
        if (c.dqk != 256) continue;
        CompileOptions any_order = tune;
        any_order.deterministic = false;
        const AttentionBackward fast(p.spec, any_order);
        ASSERT_FALSE(fast.deterministic());
        g.poison();
        fast(p.args(), g.grads());
        g.download();
        EXPECT_EQ(api::autotune_counts().tuned, at_start.tuned + 2) << "the nondeterministic backward was not tuned";
        for (const Check& k : {check_gradient("tuned any-order dQ", g.dq, ref.dq, c.dtype),
                               check_gradient("tuned any-order dK", g.dk, ref.dk, c.dtype),
                               check_gradient("tuned any-order dV", g.dv, ref.dv, c.dtype)})
            EXPECT_TRUE(k.ok) << k.message;
        EXPECT_TRUE(api::tuning_db().find(api::tuning_key(p.spec, api::tuning_kind(keys, false), device.name,
                                                          device.arch(), runtime::KernelCache::global().toolchain(),
                                                          candidates),
                                          api::shape_bucket(c.nq, c.nk)))
            << "not stored under the nondeterministic backward's key";
    }
}

// d sinks (chunk sums, then per head in order) has the same bits run after run, with
// either backward (and dQ, dK, dV too with the deterministic one).
TEST(BackwardDeterminism, SinksSameBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    EXPECT_TRUE(same_bits_twice(Algo::fused_ordered, true, Mod::Combination, true))
        << "the backward with sinks is not deterministic";
    EXPECT_TRUE(same_bits_twice(Algo::fast, false, Mod::Combination, true))
        << "the fast backward's d sinks, dK, dV are not deterministic";
}

// Bad sinks gradient arguments are user errors and nothing is written; without the entry
// the sinks get no gradient and the rest runs.
TEST(BackwardErrors, BadSinksGradientLaunchesNothing) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const Case c = with_sinks(small_case(Mod::CausalTopLeft));
    GradProblem g = make_grad_problem(c);
    Attention forward(g.fwd.spec);
    AttentionBackward backward(g.fwd.spec);
    forward(g.fwd.args());
    auto expect_error = [&](GradArgs bad, const std::string& needle) {
        g.poison();
        EXPECT_USER_ERROR(backward(g.fwd.args(), bad), needle);
        g.download();
        EXPECT_TRUE(all_poison(g.dq) && all_poison(g.dk) && all_poison(g.dv) && all_poison(g.dsinks))
            << "written despite: " << needle;
    };
    GradArgs wrong_shape = g.grads();
    wrong_shape.grads["sinks"].shape[0] = c.hq - 1;
    expect_error(wrong_shape, "must be [Hq] = [4]");
    GradArgs wrong_dtype = g.grads();
    wrong_dtype.grads["sinks"].dtype = DType::bf16;
    expect_error(wrong_dtype, "has dtype bf16");
    GradArgs unknown = g.grads();
    unknown.grads["bias"] = g.dev_dsinks.view;
    expect_error(unknown, "GradArgs::grads has 'bias', which this AttentionBackward was not asked for");
    GradArgs in_place = g.grads();
    in_place.grads["sinks"] = g.fwd.args().tensors.at("sinks");
    expect_error(in_place, "same memory as captured tensor 'sinks'");
    LaunchArgs bad_sinks = g.fwd.args();
    bad_sinks.tensors["sinks"].shape[0] = 3;
    g.poison();
    EXPECT_THROW(backward(bad_sinks, g.grads()), UserError);
    // No entry: dQ, dK, dV written, d sinks untouched.
    GradArgs without = g.grads();
    without.grads.clear();
    g.poison();
    backward(g.fwd.args(), without);
    g.download();
    EXPECT_FALSE(all_poison(g.dq));
    EXPECT_TRUE(all_poison(g.dsinks));
}

// Bad gradient arguments are user errors and nothing is written.
TEST(BackwardErrors, BadGradientArgumentsLaunchNothing) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const Case c = small_case(Mod::CausalTopLeft);
    GradProblem g = make_grad_problem(c);
    Attention forward(g.fwd.spec);
    AttentionBackward backward(g.fwd.spec);
    forward(g.fwd.args());
    auto expect_error = [&](GradArgs bad, const std::string& needle) {
        g.poison();
        EXPECT_USER_ERROR(backward(g.fwd.args(), bad), needle);
        g.download();
        EXPECT_TRUE(all_poison(g.dq) && all_poison(g.dk) && all_poison(g.dv)) << "written despite: " << needle;
    };
    GradArgs wrong_shape = g.grads();
    wrong_shape.dk = g.dev_dv.view;
    wrong_shape.dk.shape[3] = 32;
    expect_error(wrong_shape, "argument 'dk' has");
    GradArgs in_place = g.grads();
    in_place.dq = g.fwd.args().q;
    expect_error(in_place, "argument 'dq' is the same memory as 'q'");
    GradArgs wrong_dtype = g.grads();
    wrong_dtype.d_o.dtype = DType::f32;
    expect_error(wrong_dtype, "argument 'd_o' has dtype f32");
    LaunchArgs no_lse = g.fwd.args();
    no_lse.lse.reset();
    g.poison();
    EXPECT_THROW(backward(no_lse, g.grads()), UserError);
}

TEST(BackwardErrors, SpecWithoutLseIsRefused) {
    AttentionSpec spec;
    spec.dtype(DType::bf16).head_dim(64);
    CompileOptions sm90a;
    sm90a.arch = "sm_90a";
    EXPECT_USER_ERROR(AttentionBackward(spec, sm90a), ".return_lse()");
}

// ---- gradients of captured tensors and scalars (issue 8 item 4) ----------------------------
//
// Each kind of read whose gradient the backward computes (codegen/input_grads.h), against
// reference::backward's d tensor / d scalar: a full-size bias [B, Hq, Nq, Nk] (stored
// directly; with a causal mask, whose skipped tiles are zeroed), a [1, Hq, Nq, Nk] bias
// broadcast by stride 0, a bias read without the batch index (bias3[h, i, j]) and a 16-bit
// pair bias read at pair[0, h, i, j] (the tile every batch row shares: the batch-sum launch
// reads it once, kBiasTileBatchInvariant), all summed over the batch (by backward_dq's
// batch-sum launch on the tensor cores, planes in f32), ALiBi slopes [Hq], a temperature temp[0] and a runtime scalar (summed per
// CTA, then in CTA order), and all at once under a sliding window; relative-position tables
// read at clamp(j - i, -m, m) + m (summed per table element per thread, per CTA, then in CTA
// order): relative_position_bias's rel_table [Hq, 65] (both ends saturate: Nq and Nk > 32),
// under a causal mask (skipped tiles, the -m end), and a table per kv head [Hkv, 17] read
// with the softcap (summed over the query heads of a group, with a partial that depends
// on the score). Per-query biases (summed over each row's keys in backward_dq): q_bias[b,
// h, q_idx] stored directly under a causal mask, qh_bias[h, q_idx] through planes over the
// batch under a softcap (q_bias scales the score: s + s q_bias); per-key biases (summed
// over each key's queries in backward_dkdv, planes summed by its last CTA): kv_bias[h, kv_idx] under a causal mask (key tiles whose
// every query tile is skipped store zeros), k_bias[kv_idx] in the problem's dtype, summed
// over batch and heads under a softcap and a window, and kvh_bias[kv_head, kv_idx] (summed
// over the group) with q_bias and a full bias in one backward; a table gathered through an
// int tensor, seg_bias[h, clamp(seg[j], 0, 6)] (the table-site sum, its index computed from
// a tensor), under a causal mask. The gradient buffers are poisoned first: every element
// must be written. (A per-query bias added to every key of a
// row does not change the softmax, and its gradient is 0: the per-query reads here scale the
// score, or sit under a softcap.)

enum class GradKind {
    FullBias,
    FullBiasCausal,
    BroadcastBias,
    HeadBias,
    PairBias,
    Alibi,
    Temperature,
    SoftcapScalar,
    Combined,
    RelTable,
    RelTableCausal,
    RelTableKvHead,
    QueryBias,
    QueryHeadBias,
    KeyBias,
    KeyBiasAll,
    RowColMix,
    GatherSegment
};

const char* grad_kind_name(GradKind k) {
    switch (k) {
    case GradKind::FullBias: return "full_bias";
    case GradKind::FullBiasCausal: return "full_bias_causal";
    case GradKind::BroadcastBias: return "broadcast_bias";
    case GradKind::HeadBias: return "head_bias";
    case GradKind::PairBias: return "pair_bias";
    case GradKind::Alibi: return "alibi_slopes";
    case GradKind::Temperature: return "temperature";
    case GradKind::SoftcapScalar: return "softcap_scalar";
    case GradKind::Combined: return "combined";
    case GradKind::RelTable: return "rel_table";
    case GradKind::RelTableCausal: return "rel_table_causal";
    case GradKind::RelTableKvHead: return "rel_table_kv_head";
    case GradKind::QueryBias: return "query_bias";
    case GradKind::QueryHeadBias: return "query_head_bias";
    case GradKind::KeyBias: return "key_bias";
    case GradKind::KeyBiasAll: return "key_bias_all";
    case GradKind::RowColMix: return "row_col_mix";
    case GradKind::GatherSegment: return "gather_segment";
    }
    return "?";
}

struct TensorGradCase {
    GradKind kind = GradKind::FullBias;
    Case c;
    std::string name() const { return std::string(grad_kind_name(kind)) + "_" + c.name(); }
};

// Whether the tensor's gradient is a sum over many score elements (summed_gradient_tolerance).
bool summed(GradKind k) { return k != GradKind::FullBias && k != GradKind::FullBiasCausal; }

// The problem of a case, with its spec, captured tensors and the names of the gradients.
Problem make_tensor_grad_problem(const TensorGradCase& tc, std::set<std::string>& wanted) {
    Case c = tc.c;
    switch (tc.kind) {
    case GradKind::BroadcastBias: c.mod = Mod::BiasBroadcast; break;
    case GradKind::Alibi: c.mod = Mod::AlibiCausal; break;
    case GradKind::SoftcapScalar: c.mod = Mod::Softcap; break;
    case GradKind::RelTable:
    case GradKind::RelTableCausal: c.mod = Mod::RelativePosition; break;
    default: c.mod = Mod::Plain; break;
    }
    Problem p = make_problem(c);
    const int64_t B = c.batch, Hq = c.hq, Nq = c.nq, Nk = c.nk;
    auto add = [&](const std::string& name, HostTensor t) {
        p.d_tensors.emplace(name, runtime::to_device(t));
        p.in.tensors.emplace(name, std::move(t));
    };
    auto base = [&] { return AttentionSpec().dtype(c.dtype).head_dims(c.dqk, c.dv).return_lse(); };
    const dsl::Tensor bias("bias", c.dtype, 4), bias3("bias3", DType::f32, 3), temp("temp", DType::f32, 1),
        slopes("slopes", DType::f32, 1);
    using namespace dsl;
    switch (tc.kind) {
    case GradKind::FullBias:
    case GradKind::FullBiasCausal: {
        HostTensor t(c.dtype, {B, Hq, Nq, Nk});
        reference::fill_normal(t, c.seed() + 31);
        add("bias", std::move(t));
        p.spec = base().score_mod(mods::bias(bias));
        if (tc.kind == GradKind::FullBiasCausal) p.spec.mask(mods::causal());
        wanted = {"bias"};
        break;
    }
    case GradKind::BroadcastBias: wanted = {"bias"}; break;
    case GradKind::HeadBias: {
        HostTensor t(DType::f32, {Hq, Nq, Nk});
        reference::fill_normal(t, c.seed() + 32);
        add("bias3", std::move(t));
        p.spec = base().score_mod(score() + bias3(head(), q_idx(), kv_idx())).mask(mods::causal());
        wanted = {"bias3"};
        break;
    }
    case GradKind::PairBias: {
        HostTensor t(c.dtype, {1, Hq, Nq, Nk});
        reference::fill_normal(t, c.seed() + 33);
        add("pair", std::move(t));
        const dsl::Tensor pair("pair", c.dtype, 4);
        p.spec = base().score_mod(score() + pair(Expr(0), head(), q_idx(), kv_idx()));
        wanted = {"pair"};
        break;
    }
    case GradKind::Alibi: wanted = {"slopes"}; break;
    case GradKind::Temperature: {
        HostTensor t(DType::f32, {1});
        t.set({0}, 0.7);
        add("temp", std::move(t));
        p.spec = base().score_mod(score() * temp(0));
        wanted = {"temp"};
        break;
    }
    case GradKind::SoftcapScalar: wanted = {"cap"}; break;
    case GradKind::RelTable: wanted = {"rel_table"}; break;
    case GradKind::RelTableCausal:
        p.spec.mask(mods::causal());
        wanted = {"rel_table"};
        break;
    case GradKind::RelTableKvHead: {
        const int64_t Hkv = c.hkv;
        HostTensor t(DType::f32, {Hkv, 17});
        reference::fill_normal(t, c.seed() + 34);
        add("kv_table", std::move(t));
        p.in.scalars["cap"] = 4.0;
        const dsl::Tensor kv_table("kv_table", DType::f32, 2);
        p.spec = base().score_mod(mods::compose(
            mods::softcap(scalar("cap")), score() + kv_table(kv_head(), clamp(kv_idx() - q_idx(), -8, 8) + 8)));
        wanted = {"kv_table"};
        break;
    }
    case GradKind::GatherSegment: {
        // Keys in 7 segments of uneven length; segment 6 (last element) is read by no key.
        constexpr int64_t kSegments = 7;
        HostTensor seg(DType::i32, {Nk}), table(DType::f32, {Hq, kSegments});
        for (int64_t j = 0; j < Nk; ++j) seg.set({j}, static_cast<double>((j * j / 7 + j) % (kSegments - 1)));
        reference::fill_normal(table, c.seed() + 41);
        add("seg", std::move(seg));
        add("seg_bias", std::move(table));
        const dsl::Tensor seg_t("seg", DType::i32, 1), seg_bias("seg_bias", DType::f32, 2);
        // Bounded in the expression: the forward refuses reads whose index it cannot bound.
        p.spec = base()
                     .score_mod(score() + seg_bias(head(), clamp(seg_t(kv_idx()), 0, static_cast<int>(kSegments) - 1)))
                     .mask(mods::causal());
        wanted = {"seg_bias"};
        break;
    }
    case GradKind::QueryBias: {
        // A per-row temperature (a per-query bias added to every key of a row would not
        // change the softmax: its gradient is 0).
        HostTensor t(DType::f32, {B, Hq, Nq});
        reference::fill_normal(t, c.seed() + 35, 0.0, 0.5);
        add("q_bias", std::move(t));
        p.spec = base()
                     .score_mod(score() + score() * dsl::Tensor("q_bias", DType::f32, 3)(batch(), head(), q_idx()))
                     .mask(mods::causal());
        wanted = {"q_bias"};
        break;
    }
    case GradKind::QueryHeadBias: {
        HostTensor t(DType::f32, {Hq, Nq});
        reference::fill_normal(t, c.seed() + 36);
        add("qh_bias", std::move(t));
        p.in.scalars["cap"] = 4.0;
        p.spec = base().score_mod(mods::compose(mods::softcap(scalar("cap")),
                                                score() + dsl::Tensor("qh_bias", DType::f32, 2)(head(), q_idx())));
        wanted = {"qh_bias"};
        break;
    }
    case GradKind::KeyBias: {
        HostTensor t(DType::f32, {Hq, Nk});
        reference::fill_normal(t, c.seed() + 37);
        add("kv_bias", std::move(t));
        p.spec = base().score_mod(score() + dsl::Tensor("kv_bias", DType::f32, 2)(head(), kv_idx())).mask(mods::causal());
        wanted = {"kv_bias"};
        break;
    }
    case GradKind::KeyBiasAll: {
        HostTensor t(c.dtype, {Nk});
        reference::fill_normal(t, c.seed() + 38);
        add("k_bias", std::move(t));
        p.in.scalars["cap"] = 4.0;
        p.spec = base()
                     .score_mod(mods::compose(mods::softcap(scalar("cap")),
                                              score() + dsl::Tensor("k_bias", c.dtype, 1)(kv_idx())))
                     .mask(mods::sliding_window(48));
        wanted = {"k_bias"};
        break;
    }
    case GradKind::RowColMix: {
        HostTensor qb(DType::f32, {B, Hq, Nq}), kb(DType::f32, {c.hkv, Nk}), t(c.dtype, {B, Hq, Nq, Nk});
        reference::fill_normal(qb, c.seed() + 39, 0.0, 0.5);
        reference::fill_normal(kb, c.seed() + 40);
        reference::fill_normal(t, c.seed() + 41);
        add("q_bias", std::move(qb));
        add("kvh_bias", std::move(kb));
        add("bias", std::move(t));
        p.spec = base()
                     .score_mod(score() + score() * dsl::Tensor("q_bias", DType::f32, 3)(batch(), head(), q_idx()) +
                                dsl::Tensor("kvh_bias", DType::f32, 2)(kv_head(), kv_idx()) +
                                bias(batch(), head(), q_idx(), kv_idx()))
                     .mask(mods::causal());
        wanted = {"q_bias", "kvh_bias", "bias"};
        break;
    }
    case GradKind::Combined: {
        HostTensor t(c.dtype, {B, Hq, Nq, Nk}), sl(DType::f32, {Hq});
        reference::fill_normal(t, c.seed() + 33);
        for (int64_t h = 0; h < Hq; ++h) sl.set({h}, 0.1 * static_cast<double>(h + 1));
        add("bias", std::move(t));
        add("slopes", std::move(sl));
        p.in.scalars["cap"] = 3.0;
        p.spec = base()
                     .score_mod(mods::compose(mods::softcap(scalar("cap")),
                                              score() + bias(batch(), head(), q_idx(), kv_idx()) +
                                                  slopes(head()) * (kv_idx() - q_idx())))
                     .mask(mods::sliding_window(48));
        wanted = {"bias", "slopes", "cap"};
        break;
    }
    }
    return p;
}

// The device gradient outputs: the layout of each captured tensor (stride 0 where it
// broadcasts), a 0-dim f32 per scalar; poisoned.
struct InputGradBuffers {
    std::map<std::string, HostTensor> host;
    std::map<std::string, runtime::DeviceTensor> dev;
    void poison() {
        for (auto& [name, h] : host) {
            reference::fill_poison(h);
            dev.at(name).buffer.upload(h.storage().data(), h.storage().size());
        }
    }
    void download() {
        for (auto& [name, h] : host) runtime::from_device(dev.at(name), h);
    }
};

InputGradBuffers make_input_grad_buffers(const Problem& p, const std::set<std::string>& wanted) {
    InputGradBuffers b;
    for (const auto& name : wanted) {
        auto t = p.in.tensors.find(name);
        HostTensor h = t != p.in.tensors.end() ? like(t->second) : HostTensor(DType::f32, {});
        b.dev.emplace(name, runtime::to_device(h));
        b.host.emplace(name, std::move(h));
    }
    return b;
}

// The reference gradient seen through `actual`'s layout: the reference gives every logical
// element of the captured tensor its own gradient (a dimension of extent 1 and stride 0 holds
// the sum of every index read through it); where `actual` has stride 0 those logical
// elements are one memory element, which holds their sum.
reference::DoubleTensor expected_through(const HostTensor& actual, const reference::DoubleTensor& ref) {
    const std::vector<int64_t>& shape = actual.shape();
    const int rank = static_cast<int>(shape.size());
    reference::DoubleTensor sums(shape), e(shape);
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0), dst(static_cast<size_t>(rank), 0);
    auto decompose = [&](int64_t n) {
        for (int d = rank - 1; d >= 0; --d) {
            idx[d] = n % shape[d];
            n /= shape[d];
            dst[d] = actual.strides()[d] == 0 ? 0 : idx[d];
        }
    };
    for (int64_t n = 0; n < e.numel(); ++n) {
        decompose(n);
        sums.data[static_cast<size_t>(sums.offset_of(dst.data()))] += ref.data[static_cast<size_t>(ref.offset_of(idx.data()))];
    }
    for (int64_t n = 0; n < e.numel(); ++n) {
        decompose(n);
        e.data[static_cast<size_t>(n)] = sums.data[static_cast<size_t>(sums.offset_of(dst.data()))];
    }
    return e;
}

struct TensorGradRun {
    GradProblem g;
    std::set<std::string> wanted;
    InputGradBuffers grads;
};

GradProblem grad_problem_from(Problem p) {
    GradProblem g{std::move(p), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    g.d_o = like(g.fwd.o);
    reference::fill_normal(g.d_o, g.fwd.c.seed() + 17);
    g.dq = like(g.fwd.in.q);
    g.dk = like(g.fwd.in.k);
    g.dv = like(g.fwd.in.v);
    g.dev_d_o = runtime::to_device(g.d_o);
    g.dev_dq = runtime::to_device(g.dq);
    g.dev_dk = runtime::to_device(g.dk);
    g.dev_dv = runtime::to_device(g.dv);
    return g;
}

// Forward, then the backward asked for the case's gradients `runs` times (poisoned before
// each); returns the bits of every gradient of each run.
std::vector<std::vector<uint8_t>> run_tensor_grads(TensorGradRun& r, int runs) {
    Problem& p = r.g.fwd;
    Attention forward(p.spec);
    CompileOptions o;
    o.grads = r.wanted;
    o.deterministic = false;  // asking for gradients runs the deterministic backward anyway
    AttentionBackward backward(p.spec, o);
    if (!backward.deterministic()) throw std::runtime_error("a backward with tensor gradients is not deterministic");
    p.poison_outputs();
    forward(p.args());
    p.download_outputs();
    std::vector<std::vector<uint8_t>> bits;
    for (int i = 0; i < runs; ++i) {
        r.g.poison();
        r.grads.poison();
        GradArgs ga = r.g.grads();
        for (const auto& [name, d] : r.grads.dev) ga.grads[name] = d.view;
        backward(p.args(), ga);
        r.g.download();
        r.grads.download();
        std::vector<uint8_t> b = r.g.dq.storage();
        for (const auto& [name, h] : r.grads.host) b.insert(b.end(), h.storage().begin(), h.storage().end());
        bits.push_back(std::move(b));
    }
    return bits;
}

Check run_tensor_grad_case(const TensorGradCase& tc) {
    const std::string name = tc.name();
    try {
        TensorGradRun r;
        r.g = grad_problem_from(make_tensor_grad_problem(tc, r.wanted));
        r.grads = make_input_grad_buffers(r.g.fwd, r.wanted);
        run_tensor_grads(r, 1);
        const reference::BackwardResult ref = reference::backward(r.g.fwd.spec, r.g.fwd.in, r.g.d_o, r.wanted);
        const DType dt = tc.c.dtype;
        Check out;
        auto fold = [&](const Check& k) {
            if (!k.ok) {
                out.ok = false;
                out.message += (out.message.empty() ? "" : "\n") + k.message;
            }
        };
        fold(check_gradient(name + " dQ", r.g.dq, ref.dq, dt));
        fold(check_gradient(name + " dK", r.g.dk, ref.dk, dt));
        fold(check_gradient(name + " dV", r.g.dv, ref.dv, dt));
        for (const auto& [gname, h] : r.grads.host) {
            // The full bias of a mix is one element per score element too.
            const bool one = !summed(tc.kind) || (tc.kind == GradKind::RowColMix && gname == "bias");
            const double t = one ? reference::gradient_tolerance(dt) : reference::summed_gradient_tolerance(dt);
            if (h.shape().empty()) {  // a runtime scalar
                const double a = h.get(static_cast<const int64_t*>(nullptr)), e = ref.dscalars.at(gname);
                const double tol = t * std::max(std::fabs(e), 1e-6) + t * std::fabs(e);
                std::printf("%s: d%s = %.8g, reference %.8g\n", name.c_str(), gname.c_str(), a, e);
                if (!(std::fabs(a - e) <= tol))
                    fold({false, name + " d" + gname + " = " + std::to_string(a) + ", reference " + std::to_string(e)});
                continue;
            }
            const reference::DoubleTensor e = expected_through(h, ref.dtensors.at(gname));
            double g_max = 0;
            for (double x : e.data) g_max = std::max(g_max, std::fabs(x));
            std::printf("%s: d%s max error / max |gradient| %.2e (tolerance %.0e)\n", name.c_str(), gname.c_str(),
                        reference::max_abs_error(reference::to_double(h), e) / std::max(g_max, 1e-30), t);
            fold(check_output(name + " d" + gname, h, e, reference::Tolerance{t * std::max(g_max, 1e-6), t}));
        }
        return out;
    } catch (const std::exception& e) {
        return {false, name + ": threw " + e.what()};
    }
}

std::vector<TensorGradCase> tensor_grad_matrix() {
    std::vector<TensorGradCase> cases;
    const GradKind kinds[] = {GradKind::FullBias,      GradKind::FullBiasCausal, GradKind::BroadcastBias,
                              GradKind::HeadBias,      GradKind::Alibi,          GradKind::Temperature,
                              GradKind::SoftcapScalar, GradKind::Combined,       GradKind::RelTable,
                              GradKind::RelTableCausal, GradKind::RelTableKvHead, GradKind::GatherSegment};
    for (GradKind k : kinds)
        for (DType dt : {DType::bf16, DType::f16, DType::f32})
            cases.push_back({k, make_case(Mod::Plain, dt, 64, {2, 4, 2, 129, 255})});  // ragged GQA
    for (GradKind k : {GradKind::FullBiasCausal, GradKind::BroadcastBias, GradKind::Combined, GradKind::RelTable,
                       GradKind::RelTableKvHead, GradKind::GatherSegment})
        cases.push_back({k, make_case(Mod::Plain, DType::bf16, 128, {1, 2, 1, 77, 300})});
    // Biases whose gradient is summed over the batch by backward_dq's batch-sum launch (no
    // planes: bias [1, Hq, N, N] broadcast by stride 0, bias3[h, i, j] under a causal mask):
    // more batches than CTA rows, small head dims, ragged tiles.
    for (GradKind k : {GradKind::BroadcastBias, GradKind::HeadBias, GradKind::PairBias}) {
        cases.push_back({k, make_case(Mod::Plain, DType::bf16, 32, {5, 4, 4, 100, 77})});
        cases.push_back({k, make_case(Mod::Plain, DType::f16, 16, {3, 2, 1, 63, 130})});
        // Grids too small for the GPU: the batch in chunks (4 of 8, 2 of 10) whose f32
        // partials the tile's last CTA adds (api/backward_launch.h batch_sum_chunks).
        cases.push_back({k, make_case(Mod::Plain, DType::bf16, 32, {32, 2, 2, 70, 90})});
        cases.push_back({k, make_case(Mod::Plain, DType::bf16, 64, {20, 2, 1, 130, 60})});
    }
    // Relative-position tables: a query-heavy ragged shape (j - i down to -299) and a table
    // wider than the score matrix's diagonals (elements no score element reads: zero).
    for (GradKind k : {GradKind::RelTable, GradKind::RelTableCausal, GradKind::RelTableKvHead})
        cases.push_back({k, make_case(Mod::Plain, DType::f16, 64, {2, 6, 3, 300, 70})});
    cases.push_back({GradKind::RelTable, make_case(Mod::Plain, DType::f32, 32, {1, 2, 2, 9, 20})});
    // Per-query and per-key sums: every dtype on ragged GQA (f32 runs the simt loop), d128,
    // d256 (simt for every dtype), a query-heavy and a key-heavy shape, and one tile.
    const GradKind rows[] = {GradKind::QueryBias, GradKind::QueryHeadBias, GradKind::KeyBias, GradKind::KeyBiasAll,
                             GradKind::RowColMix};
    for (GradKind k : rows) {
        for (DType dt : {DType::bf16, DType::f16, DType::f32})
            cases.push_back({k, make_case(Mod::Plain, dt, 64, {2, 4, 2, 129, 255})});
        cases.push_back({k, make_case(Mod::Plain, DType::bf16, 128, {2, 4, 2, 77, 300})});
        cases.push_back({k, make_case(Mod::Plain, DType::f16, 64, {2, 6, 3, 300, 70})});
    }
    for (GradKind k : {GradKind::QueryBias, GradKind::KeyBias, GradKind::RowColMix})
        cases.push_back({k, make_case(Mod::Plain, DType::bf16, 256, {2, 4, 2, 70, 90})});
    for (GradKind k : {GradKind::QueryHeadBias, GradKind::KeyBiasAll})
        cases.push_back({k, make_case(Mod::Plain, DType::f32, 128, {1, 4, 1, 33, 17})});
    Case transposed = make_case(Mod::Plain, DType::bf16, 64, {2, 4, 4, 100, 100});
    transposed.layout = Layout::BNHD;
    cases.push_back({GradKind::Combined, transposed});
    return cases;
}

class TensorGradients : public ::testing::TestWithParam<TensorGradCase> {};

TEST_P(TensorGradients, MatchReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_tensor_grad_case(GetParam());
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, TensorGradients, ::testing::ValuesIn(tensor_grad_matrix()),
                         [](const ::testing::TestParamInfo<TensorGradCase>& info) { return info.param.name(); });

// Two runs on the same inputs write the same bits, per gradient kind (dQ and the tensor's
// or scalar's gradient), on a grid of many CTAs.
class TensorGradDeterminism : public ::testing::TestWithParam<GradKind> {};

TEST_P(TensorGradDeterminism, SameInputsSameBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    TensorGradCase tc{GetParam(), make_case(Mod::Plain, DType::bf16, 64, {3, 8, 2, 700, 900})};
    TensorGradRun r;
    r.g = grad_problem_from(make_tensor_grad_problem(tc, r.wanted));
    r.grads = make_input_grad_buffers(r.g.fwd, r.wanted);
    const auto bits = run_tensor_grads(r, 3);
    EXPECT_TRUE(bits[0] == bits[1] && bits[1] == bits[2]) << tc.name() << ": gradients differ between runs";
}

// The batch-sum launch with the batch in chunks (the tile's last CTA adds their partials,
// whichever finishes last): the same bits every run.
TEST(TensorGradDeterminismChunks, BatchSumChunksSameBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (GradKind k : {GradKind::BroadcastBias, GradKind::HeadBias, GradKind::PairBias}) {
        TensorGradCase tc{k, make_case(Mod::Plain, DType::bf16, 32, {64, 2, 2, 100, 130})};
        TensorGradRun r;
        r.g = grad_problem_from(make_tensor_grad_problem(tc, r.wanted));
        r.grads = make_input_grad_buffers(r.g.fwd, r.wanted);
        const auto bits = run_tensor_grads(r, 3);
        EXPECT_TRUE(bits[0] == bits[1] && bits[1] == bits[2]) << tc.name() << ": gradients differ between runs";
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, TensorGradDeterminism,
                         ::testing::Values(GradKind::FullBiasCausal, GradKind::BroadcastBias, GradKind::HeadBias,
                                           GradKind::Alibi, GradKind::Temperature, GradKind::SoftcapScalar,
                                           GradKind::Combined, GradKind::RelTable, GradKind::RelTableCausal,
                                           GradKind::RelTableKvHead, GradKind::QueryBias, GradKind::QueryHeadBias,
                                           GradKind::KeyBias, GradKind::KeyBiasAll, GradKind::RowColMix,
                                           GradKind::GatherSegment),
                         [](const ::testing::TestParamInfo<GradKind>& info) { return grad_kind_name(info.param); });

// Bad gradient outputs are user errors and nothing is written.
TEST(TensorGradErrors, BadOutputsLaunchNothing) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    TensorGradCase tc{GradKind::Combined, make_case(Mod::Plain, DType::bf16, 64, {2, 4, 2, 65, 80})};
    TensorGradRun r;
    r.g = grad_problem_from(make_tensor_grad_problem(tc, r.wanted));
    r.grads = make_input_grad_buffers(r.g.fwd, r.wanted);
    Problem& p = r.g.fwd;
    Attention forward(p.spec);
    CompileOptions o;
    o.grads = r.wanted;
    AttentionBackward backward(p.spec, o);
    forward(p.args());
    auto good = [&] {
        GradArgs ga = r.g.grads();
        for (const auto& [name, d] : r.grads.dev) ga.grads[name] = d.view;
        return ga;
    };
    auto expect_error = [&](const GradArgs& bad, const std::string& needle) {
        r.g.poison();
        r.grads.poison();
        EXPECT_USER_ERROR(backward(p.args(), bad), needle);
        r.g.download();
        r.grads.download();
        bool poisoned = all_poison(r.g.dq) && all_poison(r.g.dk) && all_poison(r.g.dv);
        for (const auto& [name, h] : r.grads.host) poisoned = poisoned && all_poison(h);
        EXPECT_TRUE(poisoned) << "written despite: " << needle;
    };
    GradArgs missing = good();
    missing.grads.erase("slopes");
    expect_error(missing, "the gradient of tensor 'slopes' is missing");
    GradArgs wrong_dtype = good();
    wrong_dtype.grads["bias"].dtype = DType::f32;
    expect_error(wrong_dtype, "GradArgs::grads[\"bias\"] has dtype f32");
    GradArgs wrong_shape = good();
    wrong_shape.grads["bias"].shape[2] -= 1;
    expect_error(wrong_shape, "must have the shape of captured tensor 'bias'");
    GradArgs scalar_rank = good();
    scalar_rank.grads["cap"] = r.grads.dev.at("slopes").view;
    expect_error(scalar_rank, "must be a 0-dim f32 tensor");
    GradArgs extra = good();
    extra.grads["other"] = r.grads.dev.at("slopes").view;
    expect_error(extra, "GradArgs::grads has 'other'");
    GradArgs broadcast_mismatch = good();
    broadcast_mismatch.grads["bias"].strides[0] = 0;
    expect_error(broadcast_mismatch, "a gradient may have stride 0 only where its tensor broadcasts");
    GradArgs in_place = good();
    in_place.grads["bias"] = p.args().tensors.at("bias");
    expect_error(in_place, "is the same memory as captured tensor 'bias'");
}

// Asking for a gradient that does not exist, or one whose sum is not implemented, is
// refused when the backward is built.
TEST(TensorGradErrors, RefusedAtConstruction) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    CompileOptions o;
    {
        // A read with two varying indices (kv_bias[q_idx + kv_idx, kv_idx - q_idx]) is not
        // summed yet, nor a per-key tensor read twice.
        Problem kvb = make_problem(make_case(Mod::Plain, DType::bf16, 64, {1, 2, 2, 33, 33}));
        const dsl::Tensor kv_bias("kv_bias", DType::f32, 2);
        kvb.spec.score_mod(dsl::score() +
                           kv_bias(dsl::q_idx() + dsl::kv_idx(), dsl::kv_idx() - dsl::q_idx() + 40));
        o.grads = {"kv_bias"};
        EXPECT_USER_ERROR(AttentionBackward(kvb.spec, o), "in more than one dimension");
        kvb.spec.score_mod(dsl::score() * kv_bias(dsl::head(), dsl::kv_idx()) + kv_bias(dsl::head(), dsl::kv_idx() + 1));
        EXPECT_USER_ERROR(AttentionBackward(kvb.spec, o), "is read per key at");
    }
    const Problem doc = make_problem(make_case(Mod::DocumentMask, DType::bf16, 64, {1, 2, 2, 33, 33}));
    o.grads = {"q_doc"};
    EXPECT_USER_ERROR(AttentionBackward(doc.spec, o), "only float tensors");
}

}  // namespace
}  // namespace attnjit::gputest
