// The reciprocal band (RA, SEMANTICS.md section 4) in the sm80 forward and the two-pass
// backward (dQ, dK, dV, d alpha; with sinks and a gate theirs too) against the fp64 reference,
// and the backward's determinism. Forward: band widths 0, 1, 63, 64, 200 and wider than the sequence, causal and not,
// head dims 32, 40 (padded), 64, 128 and 256, f16 and bf16, ragged lengths (1, and lengths
// that are not multiples of the tile), GQA, per-head alpha of both signs, a score_mod and a
// mask on top, a pair bias (the staged bias tile), sinks and a gate, and tiles other than the
// default. Outputs are poisoned
// before the launch; NaN and unwritten elements fail. O at the dtype's tolerance, LSE at 1e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "api/attention_backward.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "reference/attention_backward.h"
#include "tests/common/expect_error.h"
#include "tests/gpu/score_conv_cases.h"

namespace attnjit::gputest {
namespace {

constexpr reference::Tolerance kLseTolerance{1e-3, 1e-4};

struct BandCase {
    BandCase(DType dt, int d_, int w, bool c, int b = 1, int h = 4, int hk = 4, int n_ = 333)
        : dtype(dt), d(d_), width(w), causal(c), batch(b), hq(h), hkv(hk), n(n_) {}
    DType dtype = DType::bf16;
    int d = 128;
    int width = 64;
    bool causal = true;
    int batch = 1, hq = 4, hkv = 4, n = 333;
    bool softcap = false, window = false, gate = false, sinks = false;
    bool pair_bias = false;  // score_mod adds bias[0][h][q_idx][kv_idx] (the staged bias tile)
    std::optional<TileConfig> tile;
    // The backward: two_pass (backward_dq, backward_dkdv) where backward_fused would run, or
    // fast (backward_fused adding in any order) instead of the deterministic default.
    bool two_pass = false, fast = false;

    std::string name() const {
        std::ostringstream s;
        s << dtype_name(dtype) << "_d" << d << "_W" << width << (causal ? "_causal" : "_noncausal") << "_b" << batch
          << "_h" << hq << "x" << hkv << "_n" << n << (softcap ? "_softcap" : "") << (window ? "_window" : "")
          << (gate ? "_gate" : "") << (sinks ? "_sinks" : "") << (pair_bias ? "_pairbias" : "")
          << (two_pass ? "_twopass" : "") << (fast ? "_fast" : "");
        if (tile) s << "_m" << tile->block_m << "n" << tile->block_n << "w" << tile->warps << "s" << tile->stages;
        return s.str();
    }
    uint64_t seed() const { return 7919u * d + 131u * width + 17u * n + 3u * hq + (causal ? 1 : 2) + (tile ? 5 : 0); }
};

dsl::AttentionSpec band_spec(const BandCase& c) {
    dsl::AttentionSpec s;
    s.dtype(c.dtype).head_dim(c.d).return_lse().reciprocal_band(c.width, "alpha", c.causal);
    if (c.softcap) s.score_mod(dsl::mods::softcap(dsl::scalar("cap")));
    if (c.pair_bias)
        s.score_mod(dsl::score() + dsl::Tensor("bias", c.dtype, 4)(dsl::Expr(0), dsl::head(), dsl::q_idx(), dsl::kv_idx()));
    // A window on the other side of the band (non-causal: keys up to 90 ahead), so that the
    // mask cuts through band tiles.
    if (c.window) s.mask(dsl::kv_idx() - dsl::q_idx() < dsl::Expr(90));
    if (c.gate) s.gate("gate");
    if (c.sinks) s.sinks("sinks");
    return s;
}

// N(0, 1) Q, K, V; alpha per head from N(0, 0.7) (both signs), so the band term is as large
// as the score itself.
reference::ForwardInputs band_inputs(const BandCase& c) {
    const uint64_t seed = c.seed();
    reference::ForwardInputs in{HostTensor(c.dtype, {c.batch, c.hq, c.n, c.d}),
                                HostTensor(c.dtype, {c.batch, c.hkv, c.n, c.d}),
                                HostTensor(c.dtype, {c.batch, c.hkv, c.n, c.d}), {}, {}};
    reference::fill_normal(in.q, seed + 1);
    reference::fill_normal(in.k, seed + 2);
    reference::fill_normal(in.v, seed + 3);
    HostTensor alpha(DType::f32, {c.hq});
    reference::fill_normal(alpha, seed + 4, 0.0, 0.7);
    in.tensors.emplace("alpha", std::move(alpha));
    if (c.softcap) in.scalars["cap"] = 5.0;
    if (c.pair_bias) {
        HostTensor bias(c.dtype, {1, c.hq, c.n, c.n});
        reference::fill_normal(bias, seed + 7);
        in.tensors.emplace("bias", std::move(bias));
    }
    if (c.gate) {
        HostTensor g(c.dtype, {c.batch, c.hq, c.n, c.d});
        reference::fill_normal(g, seed + 5);
        in.tensors.emplace("gate", std::move(g));
    }
    if (c.sinks) {
        HostTensor s(DType::f32, {c.hq});
        reference::fill_normal(s, seed + 6, 2.0, 1.0);
        in.tensors.emplace("sinks", std::move(s));
    }
    return in;
}

std::vector<BandCase> band_cases() {
    std::vector<BandCase> cases;
    auto add = [&](BandCase c) { cases.push_back(c); };
    for (int w : {0, 1, 63, 64, 200, 5000})
        for (bool causal : {true, false}) add({DType::bf16, 128, w, causal});
    for (int d : {32, 40, 64, 256}) {
        add({DType::bf16, d, 64, true, 2, 2, 2, 200});
        add({DType::f16, d, 17, false, 1, 2, 2, 200});
    }
    add({DType::f16, 128, 64, true, 1, 2, 2, 1});
    add({DType::bf16, 64, 64, true, 1, 4, 1, 1000});  // MQA, many tiles
    add({DType::bf16, 128, 96, false, 2, 4, 2, 777});  // GQA
    BandCase mods{DType::bf16, 128, 64, true, 1, 4, 2, 500};
    mods.softcap = mods.window = true;
    add(mods);
    mods.causal = false;
    add(mods);
    BandCase gated{DType::f16, 64, 48, true, 2, 2, 2, 300};
    gated.gate = gated.sinks = true;
    add(gated);
    for (int d : {32, 128}) {  // the band beside the staged bias tile
        BandCase pb{DType::bf16, d, 64, true, 1, 2, 2, 300};
        pb.pair_bias = true;
        add(pb);
    }
    // Tiles other than the default: one stage, three stages, square and wide.
    for (TileConfig t : {TileConfig{64, 64, 4, 1}, TileConfig{128, 128, 8, 2}, TileConfig{64, 128, 4, 3},
                         TileConfig{128, 32, 4, 2}}) {
        BandCase c{DType::bf16, 64, 70, true, 1, 2, 2, 450};
        c.tile = t;
        add(c);
        c.causal = false;
        add(c);
    }
    return cases;
}

class ReciprocalBandForward : public ::testing::TestWithParam<BandCase> {};

TEST_P(ReciprocalBandForward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const BandCase& c = GetParam();
    const dsl::AttentionSpec spec = band_spec(c);
    const reference::ForwardInputs in = band_inputs(c);
    const ConvRun r = run_on_gpu(spec, in, c.tile);
    const reference::ForwardResult ref = reference::forward(spec, in);
    const Check o = check_output(c.name() + " O", r.o, ref.o, reference::output_tolerance(c.dtype));
    const Check lse = check_output(c.name() + " LSE", r.lse, ref.lse, kLseTolerance);
    EXPECT_TRUE(o.ok) << o.message;
    EXPECT_TRUE(lse.ok) << lse.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, ReciprocalBandForward, ::testing::ValuesIn(band_cases()),
                         [](const ::testing::TestParamInfo<BandCase>& info) { return info.param.name(); });

// alpha = 0 is plain causal attention: against attnjit's own causal kernel, the same bits
// are not required (other tiles), the dtype's tolerance is.
TEST(ReciprocalBandForward, ZeroAlphaIsCausalAttention) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    BandCase c{DType::bf16, 128, 64, true, 2, 4, 4, 333};
    reference::ForwardInputs in = band_inputs(c);
    for (int64_t h = 0; h < c.hq; ++h) in.tensors.at("alpha").set({h}, 0.0);
    const ConvRun band = run_on_gpu(band_spec(c), in, std::nullopt);
    reference::ForwardInputs plain_in{in.q, in.k, in.v, {}, {}};
    const auto causal = dsl::AttentionSpec().dtype(c.dtype).head_dim(c.d).return_lse().mask(dsl::mods::causal());
    const ConvRun plain = run_on_gpu(causal, plain_in, std::nullopt);
    const Check o = check_output("alpha 0 O vs causal", band.o, reference::to_double(plain.o),
                                 reference::output_tolerance(c.dtype));
    const Check lse = check_output("alpha 0 LSE vs causal", band.lse, reference::to_double(plain.lse), kLseTolerance);
    EXPECT_TRUE(o.ok) << o.message;
    EXPECT_TRUE(lse.ok) << lse.message;
}

// ---- backward --------------------------------------------------------------------------

HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape()); }

struct BandGrads {
    HostTensor dq, dk, dv, dalpha, dsinks, dgate;
};

// attnjit's forward, then its backward with dO (and d alpha; with sinks and a gate theirs).
BandGrads run_band_backward(const BandCase& c, const dsl::AttentionSpec& spec, const reference::ForwardInputs& in,
                            const HostTensor& d_o) {
    const auto& q = in.q.shape();
    HostTensor o(in.q.dtype(), {q[0], q[1], q[2], in.v.shape()[3]}), lse(DType::f32, {q[0], q[1], q[2]});
    BandGrads g{like(in.q), like(in.k), like(in.v), like(in.tensors.at("alpha")), {}, {}};
    if (c.sinks) g.dsinks = like(in.tensors.at("sinks"));
    if (c.gate) g.dgate = like(in.tensors.at("gate"));
    for (HostTensor* t : {&o, &lse, &g.dq, &g.dk, &g.dv, &g.dalpha}) reference::fill_poison(*t);
    if (c.sinks) reference::fill_poison(g.dsinks);
    if (c.gate) reference::fill_poison(g.dgate);
    const ConvDeviceArgs d = to_device_args(in, o, lse);
    CompileOptions fopts;
    fopts.tile = c.tile;
    Attention(spec, fopts)(d.args);
    const auto dev_do = runtime::to_device(d_o);
    auto dev_dq = runtime::to_device(g.dq), dev_dk = runtime::to_device(g.dk), dev_dv = runtime::to_device(g.dv);
    auto dev_dalpha = runtime::to_device(g.dalpha);
    std::optional<runtime::DeviceTensor> dev_dsinks, dev_dgate;
    GradArgs ga{dev_do.view, dev_dq.view, dev_dk.view, dev_dv.view};
    ga.grads["alpha"] = dev_dalpha.view;
    CompileOptions opts;
    opts.grads = {"alpha"};
    opts.fused_backward = !c.two_pass;
    opts.deterministic = !c.fast;
    if (c.sinks) {
        dev_dsinks = runtime::to_device(g.dsinks);
        ga.grads["sinks"] = dev_dsinks->view;
        opts.grads.insert("sinks");
    }
    if (c.gate) {
        dev_dgate = runtime::to_device(g.dgate);
        ga.grads["gate"] = dev_dgate->view;
        opts.grads.insert("gate");
    }
    AttentionBackward(spec, opts)(d.args, ga);
    runtime::synchronize("cuCtxSynchronize after the reciprocal band backward");
    runtime::from_device(dev_dq, g.dq);
    runtime::from_device(dev_dk, g.dk);
    runtime::from_device(dev_dv, g.dv);
    runtime::from_device(dev_dalpha, g.dalpha);
    if (c.sinks) runtime::from_device(*dev_dsinks, g.dsinks);
    if (c.gate) runtime::from_device(*dev_dgate, g.dgate);
    return g;
}


std::vector<BandCase> backward_band_cases() {
    std::vector<BandCase> cases;
    auto add = [&](BandCase c) { cases.push_back(c); };
    for (int w : {0, 1, 63, 64, 200, 5000})
        for (bool causal : {true, false}) add({DType::bf16, 64, w, causal, 1, 2, 2, 333});
    for (int d : {32, 40, 128}) add({DType::f16, d, 64, true, 2, 2, 2, 200});
    add({DType::bf16, 128, 17, false, 1, 4, 2, 300});  // GQA
    add({DType::bf16, 64, 64, true, 1, 4, 1, 700});    // MQA, several query tiles a head
    add({DType::f16, 64, 64, true, 1, 2, 2, 2});  // (at one row every gradient is 0 up to rounding)
    BandCase mods{DType::bf16, 64, 64, true, 1, 4, 2, 300};
    mods.softcap = mods.window = true;
    add(mods);
    mods.causal = false;
    add(mods);
    BandCase gated{DType::f16, 64, 48, true, 2, 2, 2, 150};
    gated.gate = gated.sinks = true;
    add(gated);
    BandCase pb{DType::bf16, 32, 64, true, 1, 2, 2, 200};
    pb.pair_bias = true;
    add(pb);
    // Head dims 64 and 128 take backward_fused: several of its key tiles, its fast order,
    // and the two-pass backward beside it.
    add({DType::bf16, 128, 64, true, 1, 2, 2, 1000});
    add({DType::f16, 128, 130, false, 1, 2, 1, 400});
    for (bool causal : {true, false}) {
        BandCase fast{DType::bf16, 128, causal ? 64 : 17, causal, 2, 4, 2, 500};
        fast.fast = true;
        add(fast);
        BandCase two{DType::bf16, 64, causal ? 64 : 200, causal, 1, 2, 2, 333};
        two.two_pass = true;
        add(two);
    }
    return cases;
}

class ReciprocalBandBackward : public ::testing::TestWithParam<BandCase> {};

TEST_P(ReciprocalBandBackward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const BandCase& c = GetParam();
    const dsl::AttentionSpec spec = band_spec(c);
    const reference::ForwardInputs in = band_inputs(c);
    HostTensor d_o(c.dtype, {c.batch, c.hq, c.n, c.d});
    reference::fill_normal(d_o, c.seed() + 17);
    const BandGrads g = run_band_backward(c, spec, in, d_o);
    std::set<std::string> wanted = {"alpha"};
    if (c.sinks) wanted.insert("sinks");
    if (c.gate) wanted.insert("gate");
    const reference::BackwardResult ref = reference::backward(spec, in, d_o, wanted);
    for (const Check& ch : {check_gradient(c.name() + " dQ", g.dq, ref.dq, c.dtype),
                            check_gradient(c.name() + " dK", g.dk, ref.dk, c.dtype),
                            check_gradient(c.name() + " dV", g.dv, ref.dv, c.dtype),
                            check_summed_gradient(c.name() + " d alpha", g.dalpha, ref.dtensors.at("alpha"), c.dtype)})
        EXPECT_TRUE(ch.ok) << ch.message;
    if (c.sinks) {
        const Check ch = check_summed_gradient(c.name() + " d sinks", g.dsinks, ref.dtensors.at("sinks"), c.dtype);
        EXPECT_TRUE(ch.ok) << ch.message;
    }
    if (c.gate) {
        const Check ch = check_gradient(c.name() + " d gate", g.dgate, ref.dtensors.at("gate"), c.dtype);
        EXPECT_TRUE(ch.ok) << ch.message;
    }
}

INSTANTIATE_TEST_SUITE_P(Matrix, ReciprocalBandBackward, ::testing::ValuesIn(backward_band_cases()),
                         [](const ::testing::TestParamInfo<BandCase>& info) { return info.param.name(); });

// The backward gives the same bits twice (every sum in a fixed order: d alpha's too), fused
// (head dim 128) and two-pass (head dim 40).
class ReciprocalBandDeterministic : public ::testing::TestWithParam<int> {};

TEST_P(ReciprocalBandDeterministic, SameBitsTwice) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const BandCase c{DType::bf16, GetParam(), 64, true, 2, 4, 2, 500};
    const dsl::AttentionSpec spec = band_spec(c);
    const reference::ForwardInputs in = band_inputs(c);
    HostTensor d_o(c.dtype, {c.batch, c.hq, c.n, c.d});
    reference::fill_normal(d_o, 5);
    const BandGrads a = run_band_backward(c, spec, in, d_o), b = run_band_backward(c, spec, in, d_o);
    for (auto [x, y, what] : {std::tuple{&a.dq, &b.dq, "dq"}, std::tuple{&a.dk, &b.dk, "dk"},
                              std::tuple{&a.dv, &b.dv, "dv"}, std::tuple{&a.dalpha, &b.dalpha, "dalpha"}})
        EXPECT_TRUE(x->storage() == y->storage()) << what << " differs between two runs";
}

INSTANTIATE_TEST_SUITE_P(HeadDims, ReciprocalBandDeterministic, ::testing::Values(40, 128));

// Bad input is refused before anything is launched, with a message that says what to do.
TEST(ReciprocalBandForward, BadInputIsRefused) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    BandCase c{DType::bf16, 64, 64, true, 1, 2, 2, 100};
    const dsl::AttentionSpec spec = band_spec(c);
    reference::ForwardInputs in = band_inputs(c);
    // Nq != Nk.
    {
        reference::ForwardInputs cross = in;
        cross.q = HostTensor(c.dtype, {1, 2, 50, 64});
        reference::fill_normal(cross.q, 1);
        HostTensor o(c.dtype, {1, 2, 50, 64}), lse(DType::f32, {1, 2, 50});
        const ConvDeviceArgs d = to_device_args(cross, o, lse);
        Attention attn(spec);
        EXPECT_USER_ERROR(attn(d.args), "needs self-attention");
    }
    // alpha of the wrong shape.
    {
        reference::ForwardInputs bad = in;
        bad.tensors.at("alpha") = HostTensor(DType::f32, {3});
        HostTensor o(c.dtype, {1, 2, 100, 64}), lse(DType::f32, {1, 2, 100});
        const ConvDeviceArgs d = to_device_args(bad, o, lse);
        Attention attn(spec);
        EXPECT_USER_ERROR(attn(d.args), "must be [Hq] = [2]");
    }
}

// What the band does not support yet is refused at construction (compile only).
TEST(ReciprocalBandForward, UnsupportedCombinationsAreRefused) {
    const auto base = dsl::AttentionSpec().dtype(DType::bf16).head_dim(128).return_lse().reciprocal_band(64, "alpha");
    CompileOptions sm90;
    sm90.arch = "sm_90a";
    EXPECT_NO_THROW(Attention(base, sm90));
    EXPECT_USER_ERROR(Attention(dsl::AttentionSpec(base).dtype(DType::f32), sm90), "reciprocal band");
    EXPECT_NO_THROW(AttentionBackward(base, sm90));
    EXPECT_USER_ERROR(Attention(dsl::AttentionSpec(base).score_conv("theta", 3, 3), sm90), "cannot be combined");
    EXPECT_USER_ERROR(Attention(dsl::AttentionSpec(base).reciprocal_band(-1, "alpha"), sm90), "band width");
}

}  // namespace
}  // namespace attnjit::gputest
