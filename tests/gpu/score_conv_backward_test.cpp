// The score convolution's backward (sm80/score_conv_backward.cuh inside backward_fused)
// against the fp64 reference (reference/score_conv.h's conv_backward): dQ, dK, dV and
// dtheta for kernel sizes 1x1, 3x3, 6x11 and 8x15, f16 and bf16, head dims 64, 128 and 256
// (padded ones from 8 to 192, Dqk != Dv), ragged lengths (not multiples of the 64-row tiles, halos across tile
// edges), GQA, Nq != Nk, a score_mod after the convolution, an output gate and sinks on
// top (their gradients too), masks that gate the taps (packed documents, a window, a
// scattered mask); both dQ orders (fixed, any). Gradients are poisoned before
// the launch; NaN and unwritten elements fail. The identity kernel's backward is attnjit's
// causal backward; the fixed-order backward gives the same bits twice, and dtheta is the
// same bits in both orders.
//
// Tolerances: dQ, dK, dV as every backward (reference::gradient_tolerance, relative to the
// largest gradient); dtheta, a sum over every score element, as the other summed
// gradients (reference::summed_gradient_tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "api/attention_backward.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "reference/attention_backward.h"
#include "reference/tolerance.h"
#include "tests/gpu/score_conv_cases.h"

namespace attnjit::gputest {
namespace {

HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape()); }

// The gradients of one backward run, downloaded.
struct ConvGrads {
    HostTensor dq, dk, dv, dtheta, dgate, dsinks;
};

// attnjit's forward, then its backward with dO (and the structural gradients the case has).
ConvGrads run_backward_on_gpu(const ConvCase& c, const dsl::AttentionSpec& spec, const reference::ForwardInputs& in,
                              const HostTensor& d_o, bool deterministic) {
    const auto& q = in.q.shape();
    HostTensor o(in.q.dtype(), {q[0], q[1], q[2], in.v.shape()[3]}), lse(DType::f32, {q[0], q[1], q[2]});
    ConvGrads g{like(in.q), like(in.k), like(in.v), like(in.tensors.at("theta")), {}, {}};
    if (c.gate) g.dgate = like(in.tensors.at("gate"));
    if (c.sinks) g.dsinks = like(in.tensors.at("sinks"));
    for (HostTensor* t : {&o, &lse, &g.dq, &g.dk, &g.dv, &g.dtheta}) reference::fill_poison(*t);
    if (c.gate) reference::fill_poison(g.dgate);
    if (c.sinks) reference::fill_poison(g.dsinks);

    const ConvDeviceArgs d = to_device_args(in, o, lse);
    const LaunchArgs& a = d.args;
    const auto dev_do = runtime::to_device(d_o);
    const Attention forward(spec);
    forward(a);

    auto dev_dq = runtime::to_device(g.dq), dev_dk = runtime::to_device(g.dk), dev_dv = runtime::to_device(g.dv);
    auto dev_dtheta = runtime::to_device(g.dtheta);
    std::optional<runtime::DeviceTensor> dev_dgate, dev_dsinks;
    GradArgs ga{dev_do.view, dev_dq.view, dev_dk.view, dev_dv.view};
    ga.grads["theta"] = dev_dtheta.view;
    CompileOptions opts;
    opts.deterministic = deterministic;
    opts.grads = {"theta"};
    if (c.gate) {
        dev_dgate = runtime::to_device(g.dgate);
        ga.grads["gate"] = dev_dgate->view;
        opts.grads.insert("gate");
    }
    if (c.sinks) {
        dev_dsinks = runtime::to_device(g.dsinks);
        ga.grads["sinks"] = dev_dsinks->view;
        opts.grads.insert("sinks");
    }
    const AttentionBackward backward(spec, opts);
    backward(a, ga);
    runtime::synchronize("cuCtxSynchronize after the score convolution backward");
    runtime::from_device(dev_dq, g.dq);
    runtime::from_device(dev_dk, g.dk);
    runtime::from_device(dev_dv, g.dv);
    runtime::from_device(dev_dtheta, g.dtheta);
    if (c.gate) runtime::from_device(*dev_dgate, g.dgate);
    if (c.sinks) runtime::from_device(*dev_dsinks, g.dsinks);
    return g;
}


HostTensor random_d_o(const ConvCase& c) {
    HostTensor d_o(c.dtype, {c.batch, c.hq, c.nq, c.dv()});
    reference::fill_normal(d_o, c.seed() + 17);
    return d_o;
}

std::vector<ConvCase> backward_cases() {
    std::vector<ConvCase> cases = shared_conv_cases();
    auto add = [&](ConvCase c) { cases.push_back(c); };
    add({DType::bf16, 40, 6, 11, 1, 2, 2, 200, 200});   // padded head dims: 40 -> 64, ...
    add({DType::bf16, 8, 6, 11, 1, 2, 2, 130, 130});    // 8 -> 64 (AlphaFold's head dims 8, 16, 32)
    add({DType::f16, 16, 3, 3, 2, 2, 1, 77, 77});       // 16 -> 64, GQA
    add({DType::bf16, 32, 8, 15, 1, 4, 2, 200, 200});   // 32 -> 64
    add({DType::bf16, 96, 6, 11, 1, 2, 2, 150, 150});   // 96 -> 128
    add({DType::bf16, 128, 6, 11, 1, 2, 2, 3, 3});  // (one row and one key: every gradient is 0 up to rounding)
    add({DType::bf16, 64, 6, 11, 1, 4, 1, 700, 700});   // GQA 4:1, several query tiles per head
    // Head dims over 128: two CTAs a key tile, each with half of the columns (tile 256).
    add({DType::bf16, 256, 6, 11, 2, 4, 2, 200, 200});
    add({DType::f16, 136, 3, 3, 1, 2, 2, 150, 150});    // 136 -> 256: the second half holds 8 real columns
    add({DType::bf16, 192, 8, 15, 1, 2, 1, 100, 300});  // Nq < Nk, GQA
    ConvCase wide_qk{DType::bf16, 256, 6, 11, 1, 2, 2, 130, 130};
    wide_qk.d_v = 64;  // dV: halves of 32 columns
    add(wide_qk);
    ConvCase wide_v{DType::f16, 40, 1, 1, 1, 2, 2, 99, 99};
    wide_v.d_v = 200;  // dK and dQ: halves of 32 columns, the second with 8 real ones
    add(wide_v);
    ConvCase big_docs{DType::bf16, 256, 6, 11, 1, 2, 2, 300, 300};
    big_docs.mask = ConvMask::document;
    big_docs.gate = big_docs.sinks = big_docs.softcap = true;
    add(big_docs);
    for (const ConvCase& c : masked_conv_cases()) add(c);  // documents, a window, a scattered mask
    return cases;
}

class ScoreConvBackward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ScoreConvBackward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const ConvCase& c = GetParam();
    const dsl::AttentionSpec spec = conv_spec(c);
    const reference::ForwardInputs in = conv_inputs(c);
    const HostTensor d_o = random_d_o(c);
    std::set<std::string> wanted{"theta"};
    if (c.gate) wanted.insert("gate");
    if (c.sinks) wanted.insert("sinks");
    const reference::BackwardResult ref = reference::backward(spec, in, d_o, wanted);
    for (bool deterministic : {true, false}) {
        const std::string name = c.name() + (deterministic ? "" : " (fast)");
        const ConvGrads g = run_backward_on_gpu(c, spec, in, d_o, deterministic);
        std::vector<Check> checks = {check_gradient(name + " dQ", g.dq, ref.dq, c.dtype),
                                     check_gradient(name + " dK", g.dk, ref.dk, c.dtype),
                                     check_gradient(name + " dV", g.dv, ref.dv, c.dtype),
                                     check_summed_gradient(name + " dtheta", g.dtheta, ref.dtensors.at("theta"), c.dtype)};
        if (c.gate) checks.push_back(check_gradient(name + " d gate", g.dgate, ref.dtensors.at("gate"), c.dtype));
        if (c.sinks) checks.push_back(check_gradient(name + " d sinks", g.dsinks, ref.dtensors.at("sinks"), c.dtype));
        for (const Check& ch : checks) EXPECT_TRUE(ch.ok) << ch.message;
    }
}

INSTANTIATE_TEST_SUITE_P(Matrix, ScoreConvBackward, ::testing::ValuesIn(backward_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name(); });

// The identity kernel's dQ, dK, dV are those of attnjit's causal backward on the same
// inputs (at the dtype's gradient tolerance), and its dtheta matches the reference.
TEST(ScoreConvBackward, IdentityKernelIsCausalAttention) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const ConvCase c{DType::bf16, 128, 6, 11, 2, 4, 2, 333, 333};
    reference::ForwardInputs in = conv_inputs(c);
    set_identity_kernel(in, c);
    const HostTensor d_o = random_d_o(c);
    const ConvGrads conv = run_backward_on_gpu(c, conv_spec(c), in, d_o, true);

    const dsl::AttentionSpec causal =
        dsl::AttentionSpec().dtype(c.dtype).head_dim(c.d).return_lse().mask(dsl::mods::causal());
    const reference::BackwardResult plain = reference::backward(causal, reference::ForwardInputs{in.q, in.k, in.v, {}, {}}, d_o);
    const reference::BackwardResult ref = reference::backward(conv_spec(c), in, d_o, {"theta"});
    for (const Check& ch : {check_gradient("identity dQ vs causal", conv.dq, plain.dq, c.dtype),
                            check_gradient("identity dK vs causal", conv.dk, plain.dk, c.dtype),
                            check_gradient("identity dV vs causal", conv.dv, plain.dv, c.dtype),
                            check_summed_gradient("identity dtheta", conv.dtheta, ref.dtensors.at("theta"), c.dtype)})
        EXPECT_TRUE(ch.ok) << ch.message;
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
    return a.storage().size() == b.storage().size() &&
           std::memcmp(a.storage().data(), b.storage().data(), a.storage().size()) == 0;
}

// The fixed-order backward gives the same bits twice; dtheta (summed in a fixed order in
// both backwards) is the same bits in the fast one too.
TEST(ScoreConvBackward, Deterministic) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    for (auto [mask, d] : {std::pair{ConvMask::none, 128}, {ConvMask::document, 128}, {ConvMask::none, 256}}) {
        // with a mask: dtheta's corrections too; at d 256: the halves' own turns
        ConvCase c{DType::bf16, d, 6, 11, 2, 4, 2, 1000, 1000};
        c.mask = mask;
        SCOPED_TRACE(c.name());
        const reference::ForwardInputs in = conv_inputs(c);
        const HostTensor d_o = random_d_o(c);
        const ConvGrads a = run_backward_on_gpu(c, conv_spec(c), in, d_o, true);
        const ConvGrads b = run_backward_on_gpu(c, conv_spec(c), in, d_o, true);
        const ConvGrads fast = run_backward_on_gpu(c, conv_spec(c), in, d_o, false);
        EXPECT_TRUE(same_bits(a.dq, b.dq));
        EXPECT_TRUE(same_bits(a.dk, b.dk));
        EXPECT_TRUE(same_bits(a.dv, b.dv));
        EXPECT_TRUE(same_bits(a.dtheta, b.dtheta));
        EXPECT_TRUE(same_bits(a.dtheta, fast.dtheta));
    }
}

}  // namespace
}  // namespace attnjit::gputest
