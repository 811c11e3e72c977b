// The score convolution (Multi-Token Attention, SEMANTICS.md section 3) in the sm80 forward
// against the fp64 reference: kernel sizes 1x1, 3x3, 6x11 (the paper's) and 8x15 (the
// largest), head dims 32, 40 (padded), 64, 96, 128 and 256, f16 and bf16, ragged lengths (not multiples of the
// tiles, halos across tile edges, a query tile starting at row 0), GQA, Nq != Nk, a
// score_mod after the convolution, an output gate and sinks on top. Outputs are poisoned
// before the launch; NaN and unwritten elements fail.
//
// S0 is staged in f16 (11 bits a score, sm80/score_conv.cuh; the MTA reference code runs
// the whole convolution in bf16, 8 bits), so LSE is held to kScoreConvLseTolerance rather
// than the plain kernels' 1e-3; O keeps the dtype's tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "api/attention_backward.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "tests/common/expect_error.h"
#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {
namespace {

constexpr reference::Tolerance kScoreConvLseTolerance{5e-3, 1e-4};

struct ConvCase {
    DType dtype = DType::bf16;
    int d = 128;
    int cq = 6, ck = 11;
    int batch = 1, hq = 4, hkv = 4, nq = 1, nk = 1;
    bool softcap = false, gate = false, sinks = false;

    std::string name() const {
        std::ostringstream s;
        s << dtype_name(dtype) << "_d" << d << "_c" << cq << "x" << ck << "_b" << batch << "_h" << hq << "x" << hkv
          << "_q" << nq << "_k" << nk << (softcap ? "_softcap" : "") << (gate ? "_gate" : "") << (sinks ? "_sinks" : "");
        return s.str();
    }
    uint64_t seed() const {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (unsigned char ch : name()) h = (h ^ ch) * 0x100000001b3ULL;
        return h;
    }
};

std::vector<ConvCase> conv_cases() {
    std::vector<ConvCase> cases;
    auto add = [&](ConvCase c) { cases.push_back(c); };
    for (auto [cq, ck] : {std::pair{1, 1}, {3, 3}, {6, 11}, {8, 15}}) {
        add({DType::bf16, 128, cq, ck, 2, 4, 2, 300, 300});
        add({DType::f16, 64, cq, ck, 1, 4, 4, 129, 129});
    }
    for (int d : {32, 40, 96, 256}) add({DType::bf16, d, 6, 11, 1, 2, 2, 200, 200});  // other head dims, d40 padded
    add({DType::bf16, 128, 6, 11, 1, 2, 2, 1, 1});
    add({DType::bf16, 128, 6, 11, 1, 2, 1, 17, 17});
    add({DType::bf16, 64, 6, 11, 1, 4, 1, 1000, 1000});
    add({DType::f16, 128, 6, 11, 1, 2, 2, 100, 300});  // Nq < Nk: top-left causal
    add({DType::bf16, 128, 6, 11, 1, 2, 2, 300, 100});  // Nq > Nk
    ConvCase softcap{DType::bf16, 128, 6, 11, 1, 4, 2, 200, 200};
    softcap.softcap = true;
    add(softcap);
    ConvCase gated{DType::bf16, 64, 3, 5, 2, 4, 4, 150, 150};
    gated.gate = gated.sinks = true;
    add(gated);
    return cases;
}

dsl::AttentionSpec conv_spec(const ConvCase& c) {
    dsl::AttentionSpec s;
    s.dtype(c.dtype).head_dim(c.d).return_lse().score_conv("theta", c.cq, c.ck);
    if (c.softcap) s.score_mod(dsl::mods::softcap(dsl::scalar("cap")));
    if (c.gate) s.gate("gate");
    if (c.sinks) s.sinks("sinks");
    return s;
}

// Inputs: N(0, 1) Q, K, V; theta N(0, 0.3) plus 1 at the identity tap, so the result is
// neither plain causal attention nor noise.
reference::ForwardInputs conv_inputs(const ConvCase& c) {
    const uint64_t seed = c.seed();
    reference::ForwardInputs in{HostTensor(c.dtype, {c.batch, c.hq, c.nq, c.d}),
                                HostTensor(c.dtype, {c.batch, c.hkv, c.nk, c.d}),
                                HostTensor(c.dtype, {c.batch, c.hkv, c.nk, c.d}), {}, {}};
    reference::fill_normal(in.q, seed + 1);
    reference::fill_normal(in.k, seed + 2);
    reference::fill_normal(in.v, seed + 3);
    HostTensor theta(DType::f32, {c.hq, c.cq, c.ck});
    reference::fill_normal(theta, seed + 4, 0.0, 0.3);
    for (int64_t h = 0; h < c.hq; ++h)
        theta.set({h, c.cq - 1, (c.ck - 1) / 2}, theta.get({h, c.cq - 1, (c.ck - 1) / 2}) + 1.0);
    in.tensors.emplace("theta", std::move(theta));
    if (c.softcap) in.scalars["cap"] = 3.0;
    if (c.gate) {
        HostTensor g(c.dtype, {c.batch, c.hq, c.nq, c.d});
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

struct ConvRun {
    HostTensor o, lse;
};

ConvRun run_on_gpu(const dsl::AttentionSpec& spec, const reference::ForwardInputs& in) {
    const auto& q = in.q.shape();
    ConvRun r{HostTensor(in.q.dtype(), {q[0], q[1], q[2], in.v.shape()[3]}), HostTensor(DType::f32, {q[0], q[1], q[2]})};
    reference::fill_poison(r.o);
    reference::fill_poison(r.lse);
    const auto dq = runtime::to_device(in.q), dk = runtime::to_device(in.k), dv = runtime::to_device(in.v);
    const auto d_o = runtime::to_device(r.o), d_lse = runtime::to_device(r.lse);
    std::map<std::string, runtime::DeviceTensor> tensors;
    LaunchArgs a;
    a.q = dq.view;
    a.k = dk.view;
    a.v = dv.view;
    a.o = d_o.view;
    a.lse = d_lse.view;
    for (const auto& [name, t] : in.tensors) a.tensors[name] = tensors.emplace(name, runtime::to_device(t)).first->second.view;
    a.scalars = in.scalars;
    Attention attn(spec);
    attn(a);
    runtime::synchronize("cuCtxSynchronize after the score convolution forward");
    runtime::from_device(d_o, r.o);
    runtime::from_device(d_lse, r.lse);
    return r;
}

class ScoreConvForward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ScoreConvForward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const ConvCase& c = GetParam();
    const dsl::AttentionSpec spec = conv_spec(c);
    const reference::ForwardInputs in = conv_inputs(c);
    const ConvRun r = run_on_gpu(spec, in);
    const reference::ForwardResult ref = reference::forward(spec, in);
    const Check o = check_output(c.name() + " O", r.o, ref.o, reference::output_tolerance(c.dtype));
    const Check lse = check_output(c.name() + " LSE", r.lse, ref.lse, kScoreConvLseTolerance);
    EXPECT_TRUE(o.ok) << o.message;
    EXPECT_TRUE(lse.ok) << lse.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, ScoreConvForward, ::testing::ValuesIn(conv_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name(); });

// The identity kernel (theta[h][c_q - 1][p_k] = 1) is plain causal attention: the kernel's
// output against attnjit's own causal kernel on the same inputs, at the dtype's tolerance.
TEST(ScoreConvForward, IdentityKernelIsCausalAttention) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    ConvCase c{DType::bf16, 128, 6, 11, 2, 4, 2, 333, 333};
    reference::ForwardInputs in = conv_inputs(c);
    HostTensor& theta = in.tensors.at("theta");
    for (int64_t h = 0; h < c.hq; ++h)
        for (int a = 0; a < c.cq; ++a)
            for (int b = 0; b < c.ck; ++b) theta.set({h, a, b}, a == c.cq - 1 && b == (c.ck - 1) / 2 ? 1.0 : 0.0);
    const ConvRun conv = run_on_gpu(conv_spec(c), in);
    reference::ForwardInputs plain_in{in.q, in.k, in.v, {}, {}};
    const dsl::AttentionSpec causal =
        dsl::AttentionSpec().dtype(c.dtype).head_dim(c.d).return_lse().mask(dsl::mods::causal());
    const ConvRun plain = run_on_gpu(causal, plain_in);
    const Check o = check_output("identity conv O vs causal", conv.o, reference::to_double(plain.o),
                                 reference::output_tolerance(c.dtype));
    const Check lse = check_output("identity conv LSE vs causal", conv.lse, reference::to_double(plain.lse),
                                   kScoreConvLseTolerance);
    EXPECT_TRUE(o.ok) << o.message;
    EXPECT_TRUE(lse.ok) << lse.message;
}

// What the convolution does not support yet is refused before anything is launched.
TEST(ScoreConvForward, UnsupportedCombinationsAreRefused) {
    const auto base = dsl::AttentionSpec().dtype(DType::bf16).head_dim(128).return_lse().score_conv("theta", 6, 11);
    CompileOptions sm90;
    sm90.arch = "sm_90a";  // compile only: refused before NVRTC runs
    EXPECT_USER_ERROR(Attention(dsl::AttentionSpec(base).mask(dsl::mods::causal()), sm90),
                      "with a mask is not implemented yet");
    EXPECT_USER_ERROR(Attention(dsl::AttentionSpec(base).dtype(DType::f32), sm90),
                      "the score convolution runs in the sm80 forward only");
    EXPECT_USER_ERROR(AttentionBackward(base, sm90), "backward of the score convolution is not implemented yet");
}

}  // namespace
}  // namespace attnjit::gputest
