// The latent projection (MLA, SEMANTICS.md section 4) in the sm80 forward against the fp64
// reference: L 64, 128, 200 (padded), 256, 384 (padded) and 512 (two warps a row group); Q head dims 64 and 128, Dv 64, 128 and 96 (padded),
// Dqk != Dv; f16 and bf16; ragged lengths (1, and lengths that are not multiples of the tile,
// Nq != Nk), causal and not, many heads sharing one latent K/V, a score_mod, a sliding window,
// sinks and a gate, and tiles other than the default; with a reciprocal band (RA + MLA: fused up
// to L 256, over it in Q's space, api/latent_projection.h), its widths and both forms. Outputs are poisoned before the launch;
// NaN and unwritten elements fail. O at the dtype's tolerance. LSE at 1e-2 (bf16) and 3e-3
// (f16) absolute: Q_lat is an mma operand, rounded to the element type (relative 2^-9 and
// 2^-11), which moves a score by about u / sqrt(3) of its scale (measured: up to 4e-3 in bf16
// over a few thousand rows); plain attention's 1e-3 has exact scores' inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <sstream>

#include "api/attention.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "reference/attention_reference.h"
#include "tests/common/expect_error.h"
#include "tests/gpu/latent_cases.h"
#include "tests/gpu/score_conv_cases.h"

namespace attnjit::gputest {
namespace {

reference::Tolerance lse_tolerance(DType dt) { return dt == DType::bf16 ? reference::Tolerance{1e-2, 1e-3} : reference::Tolerance{3e-3, 1e-3}; }

std::vector<LatentCase> latent_cases() {
    std::vector<LatentCase> cases;
    for (int l : {64, 128, 200, 256, 384, 512})
        for (bool causal : {true, false}) cases.push_back({DType::bf16, 128, 128, l, causal});
    // Over 256 (two warps a row group): Dqk != Dv, Nq != Nk, one row, many heads, other tile.
    cases.push_back({DType::f16, 64, 96, 512, true, 2, 3, 200, 200});
    cases.push_back({DType::bf16, 128, 64, 512, false, 1, 2, 257, 100});
    cases.push_back({DType::bf16, 128, 128, 512, true, 1, 2, 1, 1});
    cases.push_back({DType::bf16, 128, 128, 512, true, 1, 16, 1000, 1000});
    {
        LatentCase c{DType::bf16, 128, 128, 512, true, 1, 2, 450, 450};
        c.tile = TileConfig{64, 64, 8, 1};
        cases.push_back(c);
        LatentCase m{DType::bf16, 128, 128, 512, true, 2, 2, 500, 500};
        m.softcap = m.window = m.gate = m.sinks = true;
        cases.push_back(m);
    }
    cases.push_back({DType::f16, 64, 128, 128, true, 2, 3, 200, 200});   // Dqk != Dv
    cases.push_back({DType::bf16, 128, 64, 256, false, 1, 2, 257, 100});  // Nq != Nk
    cases.push_back({DType::bf16, 128, 96, 128, true, 1, 2, 1, 1});       // one row, padded Dv
    cases.push_back({DType::f16, 128, 128, 256, true, 1, 16, 1000, 1000});  // many heads, one K/V
    LatentCase mods{DType::bf16, 128, 128, 128, true, 2, 2, 500, 500};
    mods.softcap = mods.window = true;
    cases.push_back(mods);
    LatentCase gated{DType::f16, 64, 64, 64, false, 2, 2, 300, 300};
    gated.gate = gated.sinks = true;
    cases.push_back(gated);
    // RA + MLA (seed 000: L 64, D 64, W 64): band widths 0, 1, 63, 64 and wider than N, causal and
    // not, Dqk != Dv, with score_mod and a window, another tile; L up to 256.
    for (int w : {0, 1, 63, 64, 5000})
        for (bool causal : {true, false}) {
            LatentCase c{DType::bf16, 64, 64, 64, causal, 2, 3, 333, 333};
            c.band = w;
            cases.push_back(c);
        }
    {
        LatentCase c{DType::f16, 128, 96, 256, true, 1, 2, 300, 300};
        c.band = 64;
        cases.push_back(c);
        LatentCase m{DType::bf16, 64, 64, 128, false, 1, 2, 450, 450};
        m.band = 70;
        m.softcap = m.window = m.sinks = m.gate = true;
        cases.push_back(m);
        LatentCase t{DType::bf16, 64, 64, 128, true, 1, 2, 450, 450};
        t.band = 64;
        t.tile = TileConfig{64, 64, 4, 1};
        cases.push_back(t);
    }
    // RA + MLA over L 256: in Q's space (latent_gemm, then the band's forward over K_h, V_h).
    for (int w : {0, 64, 5000})
        for (bool causal : {true, false}) {
            LatentCase c{DType::bf16, 128, 128, 512, causal, 2, 2, 300, 300};
            c.band = w;
            cases.push_back(c);
        }
    {
        LatentCase c{DType::f16, 64, 96, 384, true, 1, 3, 257, 257};  // padded L, Dqk != Dv
        c.band = 17;
        c.softcap = c.gate = true;
        cases.push_back(c);
    }
    for (TileConfig t : {TileConfig{64, 64, 4, 1}, TileConfig{64, 64, 4, 2}, TileConfig{128, 32, 4, 2}}) {
        LatentCase c{DType::bf16, 128, 128, 128, true, 1, 2, 450, 450};
        c.tile = t;
        cases.push_back(c);
    }
    return cases;
}

class LatentForward : public ::testing::TestWithParam<LatentCase> {};

TEST_P(LatentForward, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const LatentCase& c = GetParam();
    const dsl::AttentionSpec spec = latent_spec(c);
    const reference::ForwardInputs in = latent_inputs(c);
    const ConvRun r = run_on_gpu(spec, in, c.tile);
    const reference::ForwardResult ref = reference::forward(spec, in);
    const Check o = check_output(c.name() + " O", r.o, ref.o, reference::output_tolerance(c.dtype));
    const Check lse = check_output(c.name() + " LSE", r.lse, ref.lse, lse_tolerance(c.dtype));
    EXPECT_TRUE(o.ok) << o.message;
    EXPECT_TRUE(lse.ok) << lse.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, LatentForward, ::testing::ValuesIn(latent_cases()),
                         [](const ::testing::TestParamInfo<LatentCase>& info) { return info.param.name(); });

// The launcher refuses what the kernel cannot read, before anything is launched.
TEST(LatentForward, RefusesLatentKWithSeveralHeads) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    LatentCase c{DType::bf16, 64, 64, 64, true, 1, 2, 40, 40};
    reference::ForwardInputs in = latent_inputs(c);
    in.k = HostTensor(c.dtype, {1, 2, 40, 64});
    in.v = HostTensor(c.dtype, {1, 2, 40, 64});
    reference::fill_normal(in.k, 1);
    reference::fill_normal(in.v, 2);
    EXPECT_USER_ERROR(run_on_gpu(latent_spec(c), in), "shared by every query head");
}

TEST(LatentForward, RefusesProjectionOfWrongShape) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    LatentCase c{DType::bf16, 64, 64, 64, true, 1, 2, 40, 40};
    reference::ForwardInputs in = latent_inputs(c);
    in.tensors.at("w_vup") = HostTensor(c.dtype, {2, 64, 32});
    reference::fill_normal(in.tensors.at("w_vup"), 3);
    EXPECT_USER_ERROR(run_on_gpu(latent_spec(c), in), "w_vup");
}

}  // namespace
}  // namespace attnjit::gputest
