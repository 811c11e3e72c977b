// The latent projection's backward (MLA; api/latent_backward.h) against the fp64 reference:
// dq, dk_lat, dv_lat, d w_qlat, d w_vup (and d alpha, d sinks, d gate where the case has
// them) after attnjit's own forward. L 128, 200 (padded), 256 and 512; Q head dims 64 and 128,
// Dv 64, 96 (padded) and 128, Dqk != Dv; f16 and bf16; ragged lengths, Nq != Nk, one row,
// several batches and heads; causal and not; softcap, a window, sinks, a gate; RA + MLA
// (band widths 0, 1, 64 and wider than N). Gradients are poisoned before the launch; NaN and
// unwritten elements fail; the tolerance is the dtype's gradient tolerance (relative to the
// largest element). Also: the same bits twice, the weights' gradients optional, and bad
// gradient arguments refused before anything runs.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <tuple>

#include "api/attention_backward.h"
#include "reference/attention_backward.h"
#include "runtime/device_buffer.h"
#include "tests/common/expect_error.h"
#include "tests/gpu/latent_cases.h"
#include "tests/gpu/score_conv_cases.h"

namespace attnjit::gputest {
namespace {

HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape()); }

// The structural tensors whose gradients a case asks for (the weights' unless told not to).
std::set<std::string> wanted_grads(const LatentCase& c, bool weights = true) {
    std::set<std::string> w;
    if (weights) w = {"w_qlat", "w_vup"};
    if (c.band >= 0) w.insert("alpha");
    if (c.sinks) w.insert("sinks");
    if (c.gate) w.insert("gate");
    return w;
}

struct LatentGrads {
    HostTensor dq, dk, dv;
    std::map<std::string, HostTensor> dtensors;  // by name
};

// attnjit's forward, then its backward with dO and the gradients of `wanted`, all poisoned.
LatentGrads run_latent_backward(const LatentCase& c, const dsl::AttentionSpec& spec, const reference::ForwardInputs& in,
                                const HostTensor& d_o, const std::set<std::string>& wanted) {
    const auto& q = in.q.shape();
    HostTensor o(in.q.dtype(), {q[0], q[1], q[2], c.dv}), lse(DType::f32, {q[0], q[1], q[2]});
    LatentGrads g{like(in.q), like(in.k), like(in.v), {}};
    for (const auto& name : wanted) g.dtensors.emplace(name, like(in.tensors.at(name)));
    for (HostTensor* t : {&o, &lse, &g.dq, &g.dk, &g.dv}) reference::fill_poison(*t);
    for (auto& [name, t] : g.dtensors) reference::fill_poison(t);
    const ConvDeviceArgs d = to_device_args(in, o, lse);
    CompileOptions fopts;
    fopts.tile = c.tile;
    Attention(spec, fopts)(d.args);
    const auto dev_do = runtime::to_device(d_o);
    auto dev_dq = runtime::to_device(g.dq), dev_dk = runtime::to_device(g.dk), dev_dv = runtime::to_device(g.dv);
    std::map<std::string, runtime::DeviceTensor> dev;
    GradArgs ga{dev_do.view, dev_dq.view, dev_dk.view, dev_dv.view};
    for (auto& [name, t] : g.dtensors) ga.grads[name] = dev.emplace(name, runtime::to_device(t)).first->second.view;
    CompileOptions opts;
    opts.grads = wanted;
    AttentionBackward(spec, opts)(d.args, ga);
    runtime::synchronize("cuCtxSynchronize after the latent backward");
    runtime::from_device(dev_dq, g.dq);
    runtime::from_device(dev_dk, g.dk);
    runtime::from_device(dev_dv, g.dv);
    for (auto& [name, t] : g.dtensors) runtime::from_device(dev.at(name), t);
    return g;
}

// A case's spec, inputs and dO (~ N(0, 1), seeded).
struct Problem {
    dsl::AttentionSpec spec;
    reference::ForwardInputs in;
    HostTensor d_o;
};
Problem problem(const LatentCase& c, uint64_t seed) {
    Problem p{latent_spec(c), latent_inputs(c), HostTensor(c.dtype, {c.batch, c.hq, c.nq, c.dv})};
    reference::fill_normal(p.d_o, seed);
    return p;
}

std::vector<LatentCase> backward_cases() {
    std::vector<LatentCase> cases;
    for (int l : {128, 256, 512})
        for (bool causal : {true, false}) cases.push_back({DType::bf16, 128, 128, l, causal, 1, 4, 333, 333});
    cases.push_back({DType::f16, 64, 96, 200, true, 2, 3, 200, 200});    // padded L and Dv, Dqk != Dv
    cases.push_back({DType::bf16, 128, 64, 512, false, 1, 2, 257, 100});  // Nq != Nk
    cases.push_back({DType::f16, 128, 128, 128, false, 1, 2, 1, 5});      // one row (5 keys: gradients not 0)
    cases.push_back({DType::bf16, 64, 64, 256, true, 3, 16, 300, 300});   // many heads, several batches
    LatentCase mods{DType::bf16, 128, 128, 512, true, 2, 2, 400, 400};
    mods.softcap = mods.window = mods.gate = mods.sinks = true;
    cases.push_back(mods);
    // RA + MLA: band widths 0, 1, 64 and wider than N, causal and not.
    for (int w : {0, 1, 64, 5000})
        for (bool causal : {true, false}) {
            LatentCase c{DType::bf16, 64, 64, 64, causal, 2, 3, 333, 333};
            c.band = w;
            cases.push_back(c);
        }
    for (bool causal : {true, false}) {  // over L 256: the forward in Q's space too
        LatentCase c{DType::bf16, 128, 128, 512, causal, 1, 2, 300, 300};
        c.band = 64;
        cases.push_back(c);
    }
    LatentCase band{DType::f16, 128, 96, 256, true, 1, 2, 300, 300};
    band.band = 64;
    band.softcap = true;
    cases.push_back(band);
    return cases;
}

class LatentBackward : public ::testing::TestWithParam<LatentCase> {};

TEST_P(LatentBackward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const LatentCase& c = GetParam();
    const Problem p = problem(c, c.seed() + 17);
    const std::set<std::string> wanted = wanted_grads(c);
    const LatentGrads g = run_latent_backward(c, p.spec, p.in, p.d_o, wanted);
    const reference::BackwardResult ref = reference::backward(p.spec, p.in, p.d_o, wanted);
    for (const Check& ch : {check_gradient(c.name() + " dq", g.dq, ref.dq, c.dtype),
                            check_gradient(c.name() + " dk_lat", g.dk, ref.dk, c.dtype),
                            check_gradient(c.name() + " dv_lat", g.dv, ref.dv, c.dtype)})
        EXPECT_TRUE(ch.ok) << ch.message;
    for (const auto& [name, t] : g.dtensors) {
        // alpha and sinks are sums over every score of a head; the rest per element.
        const bool summed = name == "alpha" || name == "sinks";
        const Check ch = summed ? check_summed_gradient(c.name() + " d " + name, t, ref.dtensors.at(name), c.dtype)
                                : check_gradient(c.name() + " d " + name, t, ref.dtensors.at(name), c.dtype);
        EXPECT_TRUE(ch.ok) << ch.message;
    }
}

INSTANTIATE_TEST_SUITE_P(Matrix, LatentBackward, ::testing::ValuesIn(backward_cases()),
                         [](const ::testing::TestParamInfo<LatentCase>& info) { return info.param.name(); });

// Every gradient element is one CTA's sum in a fixed order: the same bits twice.
TEST(LatentBackwardRuns, Deterministic) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const LatentCase c{DType::bf16, 128, 128, 512, true, 2, 4, 500, 500};
    const Problem p = problem(c, 5);
    const LatentGrads a = run_latent_backward(c, p.spec, p.in, p.d_o, wanted_grads(c)),
                      b = run_latent_backward(c, p.spec, p.in, p.d_o, wanted_grads(c));
    for (auto [x, y, what] : {std::tuple{&a.dq, &b.dq, "dq"}, std::tuple{&a.dk, &b.dk, "dk"},
                              std::tuple{&a.dv, &b.dv, "dv"},
                              std::tuple{&a.dtensors.at("w_qlat"), &b.dtensors.at("w_qlat"), "d w_qlat"},
                              std::tuple{&a.dtensors.at("w_vup"), &b.dtensors.at("w_vup"), "d w_vup"}})
        EXPECT_TRUE(x->storage() == y->storage()) << what << " differs between two runs";
}

// Without the weights' gradients (frozen projections) dq, dk and dv are unchanged.
TEST(LatentBackwardRuns, WeightsGradientsAreOptional) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const LatentCase c{DType::bf16, 64, 64, 128, true, 1, 2, 200, 200};
    const Problem p = problem(c, 9);
    const LatentGrads with = run_latent_backward(c, p.spec, p.in, p.d_o, wanted_grads(c)),
                      without = run_latent_backward(c, p.spec, p.in, p.d_o, wanted_grads(c, false));
    EXPECT_TRUE(with.dq.storage() == without.dq.storage());
    EXPECT_TRUE(with.dk.storage() == without.dk.storage());
    EXPECT_TRUE(with.dv.storage() == without.dv.storage());
}

// Bad gradient arguments are refused before anything is launched, saying what to pass.
TEST(LatentBackwardRuns, BadGradientsAreRefused) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const LatentCase c{DType::bf16, 64, 64, 128, true, 1, 2, 40, 40};
    const dsl::AttentionSpec spec = latent_spec(c);
    const reference::ForwardInputs in = latent_inputs(c);
    HostTensor o(c.dtype, {1, 2, 40, 64}), lse(DType::f32, {1, 2, 40});
    const ConvDeviceArgs d = to_device_args(in, o, lse);
    HostTensor d_o(c.dtype, {1, 2, 40, 64});
    reference::fill_normal(d_o, 1);
    const auto dev_do = runtime::to_device(d_o);
    auto dq = runtime::to_device(like(in.q)), dk = runtime::to_device(like(in.k)), dv = runtime::to_device(like(in.v));
    auto dwq = runtime::to_device(like(in.tensors.at("w_qlat")));
    auto wrong = runtime::to_device(HostTensor(c.dtype, {2, 64, 64}));
    CompileOptions opts;
    opts.grads = {"w_qlat", "w_vup"};
    const AttentionBackward bwd(spec, opts);
    GradArgs ga{dev_do.view, dq.view, dk.view, dv.view};
    ga.grads["w_qlat"] = dwq.view;
    EXPECT_USER_ERROR(bwd(d.args, ga), "'w_vup' is missing");
    ga.grads["w_vup"] = wrong.view;  // [Hq, Dqk, Dqk], not [Hq, L, Dv]
    EXPECT_USER_ERROR(bwd(d.args, ga), "[Hq, L, Dv]");
    GradArgs per_head{dev_do.view, dq.view, dq.view, dv.view};  // dk of q's shape, not [B, 1, Nk, L]
    EXPECT_USER_ERROR(bwd(d.args, per_head), "dk");
}

}  // namespace
}  // namespace attnjit::gputest
