// The score convolution (Multi-Token Attention, SEMANTICS.md section 3) in the sm80 forward
// against the fp64 reference: kernel sizes 1x1, 3x3, 6x11 (the paper's) and 8x15 (the
// largest), head dims 32, 40 (padded), 64, 96, 128 and 256, f16 and bf16, ragged lengths (not multiples of the
// tiles, halos across tile edges, a query tile starting at row 0), GQA, Nq != Nk, a
// score_mod after the convolution, an output gate and sinks on top, and masks that gate the
// taps (packed documents, a sliding window, a scattered mask). Outputs are poisoned before
// the launch; NaN and unwritten elements fail.
//
// LSE is held to kScoreConvLseTolerance (score_conv_cases.h); O to the dtype's tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "api/attention_backward.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "tests/common/expect_error.h"
#include "tests/gpu/score_conv_cases.h"

namespace attnjit::gputest {
namespace {

std::vector<ConvCase> conv_cases() {
    std::vector<ConvCase> cases = shared_conv_cases();
    auto add = [&](ConvCase c) { cases.push_back(c); };
    for (int d : {8, 16, 32, 40, 96, 256}) add({DType::bf16, d, 6, 11, 1, 2, 2, 200, 200});  // padded head dims too
    add({DType::bf16, 128, 6, 11, 1, 2, 2, 1, 1});
    add({DType::bf16, 64, 6, 11, 1, 4, 1, 1000, 1000});
    for (const ConvCase& c : masked_conv_cases()) add(c);
    return cases;
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
    set_identity_kernel(in, c);
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
    // With a mask: both directions compile.
    EXPECT_NO_THROW(Attention(dsl::AttentionSpec(base).mask(dsl::mods::causal()), sm90));
    EXPECT_NO_THROW(AttentionBackward(dsl::AttentionSpec(base).mask(dsl::mods::causal()), sm90));
    EXPECT_USER_ERROR(Attention(dsl::AttentionSpec(base).dtype(DType::f32), sm90),
                      "the score convolution runs in the sm80 forward, backward_fused and backward_dq only");
    // The backward: head dims over 128 where shared memory holds their tiles (sm_90, not
    // sm_80); gradients of captured tensors beside it (backward_dq with the convolution,
    // whose tile needs less shared memory than backward_fused's wherever that one fits).
    CompileOptions with_grads = sm90;
    with_grads.grads = {"cap"};
    const auto softcapped = dsl::AttentionSpec(base).score_mod(dsl::mods::softcap(dsl::scalar("cap")));
    EXPECT_NO_THROW(AttentionBackward(softcapped, with_grads));
    with_grads.arch = "sm_89";
    EXPECT_NO_THROW(AttentionBackward(dsl::AttentionSpec(softcapped).head_dim(64), with_grads));
    EXPECT_NO_THROW(AttentionBackward(dsl::AttentionSpec(base).head_dim(136), sm90));
    CompileOptions sm80 = sm90;
    sm80.arch = "sm_80";
    EXPECT_USER_ERROR(AttentionBackward(dsl::AttentionSpec(base).head_dim(256), sm80),
                      "the backward of a score convolution at head dims 256 x 256 needs 181 KiB of shared memory a "
                      "block, more than the 163 KiB of sm_80; head dims over 128 train on sm_90 or sm_100 GPUs");
    EXPECT_USER_ERROR(AttentionBackward(dsl::AttentionSpec(base).dtype(DType::f32), sm90),
                      "the backward of a score convolution runs for f16 / bf16 (got f32)");
}

}  // namespace
}  // namespace attnjit::gputest
