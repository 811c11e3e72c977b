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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "api/attention_backward.h"
#include "reference/attention_backward.h"
#include "support/exceptions.h"
#include "tests/gpu/gpu_test_support.h"

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

    bool has_sinks() const { return fwd.c.sinks.has_value(); }
    GradArgs grads() const {
        GradArgs g{dev_d_o.view, dev_dq.view, dev_dk.view, dev_dv.view};
        if (has_sinks()) g.tensors["sinks"] = dev_dsinks.view;
        return g;
    }
    void poison() {
        const std::pair<HostTensor*, runtime::DeviceTensor*> grads[] = {
            {&dq, &dev_dq}, {&dk, &dev_dk}, {&dv, &dev_dv}, {&dsinks, &dev_dsinks}};
        for (const auto& [host, device] : grads) {
            if (host == &dsinks && !has_sinks()) continue;
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
    }
};

// Gradients take the layout of what they differentiate (q, k, v; d_o that of o).
HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape(), t.strides(), t.storage_offset()); }

GradProblem make_grad_problem(const Case& c) {
    GradProblem g{make_problem(c), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
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
    return g;
}

Check check_gradient(const std::string& what, const HostTensor& actual, const reference::DoubleTensor& expected,
                     DType dt) {
    double g_max = 0;
    for (double x : expected.data) g_max = std::max(g_max, std::fabs(x));
    return check_output(what, actual, expected, reference::gradient_tolerance(dt, g_max));
}

CompileOptions backward_options(bool deterministic) {
    CompileOptions o;
    o.deterministic = deterministic;
    return o;
}

// Forward, backward, reference; checks dQ, dK, dV.
Check run_backward_case(const Case& c, bool deterministic = true) {
    const std::string name = c.name() + (deterministic ? "" : " (fast)");
    try {
        GradProblem g = make_grad_problem(c);
        Problem& p = g.fwd;
        Attention forward(p.spec);
        AttentionBackward backward(p.spec, backward_options(deterministic));
        const bool fast_exists = c.dtype != DType::f32 && c.dqk <= 128 && c.dv <= 128;
        if (backward.deterministic() != (deterministic || !fast_exists))
            return {false, name + ": AttentionBackward::deterministic() is not what was asked for"};
        p.poison_outputs();
        forward(p.args());
        p.download_outputs();  // the backward reads the device O and LSE the forward wrote
        g.poison();
        backward(p.args(), g.grads());
        g.download();
        const reference::BackwardResult ref =
            c.sinks ? reference::backward(p.spec, p.in, g.d_o, {"sinks"}) : reference::backward(p.spec, p.in, g.d_o);

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
    // Attention sinks (d sinks too): every dtype with ragged GQA and rows that keep no key
    // (their LSE is the sink: they still add to d sinks), a score_mod, sinks in bf16 / f16,
    // d256 (simt), [B, N, H, D].
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
        if (c.hq >= 4) EXPECT_EQ(ds.data.back(), 0.0) << c.name();
        for (double x : ref.forward.lse.data) EXPECT_FALSE(std::isnan(x)) << c.name();
    }
    EXPECT_GE(cases, 8);
}

class Backward : public ::testing::TestWithParam<Case> {};

TEST_P(Backward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_backward_case(GetParam());
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Backward, ::testing::ValuesIn(backward_matrix()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// The cases the fast backward exists for.
std::vector<Case> fast_backward_matrix() {
    std::vector<Case> cases;
    for (const Case& c : backward_matrix())
        if (c.dtype != DType::f32 && c.dqk <= 128 && c.dv <= 128) cases.push_back(c);
    return cases;
}

class FastBackward : public ::testing::TestWithParam<Case> {};

TEST_P(FastBackward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Check r = run_backward_case(GetParam(), false);
    EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FastBackward, ::testing::ValuesIn(fast_backward_matrix()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// Where the fast backward does not exist (f32, head dim 256) the deterministic one runs.
TEST(FastBackward, FallsBackWhereItDoesNotExist) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (const Case& c : {make_case(Mod::Plain, DType::f32, 64, {1, 2, 2, 65, 100}),
                          make_case(Mod::Plain, DType::bf16, 256, {1, 2, 2, 65, 100})}) {
        const Problem p = make_problem(c);
        EXPECT_TRUE(AttentionBackward(p.spec, backward_options(false)).deterministic()) << c.name();
    }
    Check r = run_backward_case(make_case(Mod::Plain, DType::f32, 64, {1, 2, 2, 65, 100}), false);
    EXPECT_TRUE(r.ok) << r.message;
}

// Whether two backward runs on the same inputs write the same bits (dQ compared only when
// with_dq).
bool same_bits_twice(bool deterministic, bool with_dq, bool sinks = false) {
    Case c = make_case(Mod::Combination, DType::bf16, 64, {2, 4, 2, 300, 500});
    if (sinks) c = with_sinks(c);
    GradProblem g = make_grad_problem(c);
    Attention forward(g.fwd.spec);
    AttentionBackward backward(g.fwd.spec, backward_options(deterministic));
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
    EXPECT_TRUE(same_bits_twice(false, false)) << "the fast backward's dK, dV are not deterministic";
}

// Two runs on the same inputs write the same bits.
TEST(BackwardDeterminism, SameInputsSameBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    EXPECT_TRUE(same_bits_twice(true, true)) << "the backward is not deterministic";
}

// d sinks (chunk sums, then per head in order) has the same bits run after run, with
// either backward (and dQ, dK, dV too with the deterministic one).
TEST(BackwardDeterminism, SinksSameBits) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    EXPECT_TRUE(same_bits_twice(true, true, true)) << "the backward with sinks is not deterministic";
    EXPECT_TRUE(same_bits_twice(false, false, true)) << "the fast backward's d sinks, dK, dV are not deterministic";
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
        try {
            backward(g.fwd.args(), bad);
            ADD_FAILURE() << "no error for " << needle;
        } catch (const UserError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
        g.download();
        EXPECT_TRUE(all_poison(g.dq) && all_poison(g.dk) && all_poison(g.dv) && all_poison(g.dsinks))
            << "written despite: " << needle;
    };
    GradArgs wrong_shape = g.grads();
    wrong_shape.tensors["sinks"].shape[0] = c.hq - 1;
    expect_error(wrong_shape, "must be [Hq] = [4]");
    GradArgs wrong_dtype = g.grads();
    wrong_dtype.tensors["sinks"].dtype = DType::bf16;
    expect_error(wrong_dtype, "has dtype bf16");
    GradArgs unknown = g.grads();
    unknown.tensors["bias"] = g.dev_dsinks.view;
    expect_error(unknown, "only the sinks tensor 'sinks' has a gradient today");
    GradArgs in_place = g.grads();
    in_place.tensors["sinks"] = g.fwd.args().tensors.at("sinks");
    expect_error(in_place, "same memory as captured tensor 'sinks'");
    LaunchArgs bad_sinks = g.fwd.args();
    bad_sinks.tensors["sinks"].shape[0] = 3;
    g.poison();
    EXPECT_THROW(backward(bad_sinks, g.grads()), UserError);
    // No entry: dQ, dK, dV written, d sinks untouched.
    GradArgs without = g.grads();
    without.tensors.clear();
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
        try {
            backward(g.fwd.args(), bad);
            ADD_FAILURE() << "no error for " << needle;
        } catch (const UserError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
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
    try {
        AttentionBackward backward(spec, CompileOptions{std::string("sm_90a"), std::nullopt});
        ADD_FAILURE() << "no error";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find(".return_lse()"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace attnjit::gputest
