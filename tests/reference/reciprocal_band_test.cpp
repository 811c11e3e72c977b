// The fp64 reference of the reciprocal band (SEMANTICS.md section 4): a case worked out by
// hand, the definition written out directly (both forms, per-head alpha, a mask and a
// score_mod on top), W = 0 as a diagonal score_mod, the input errors, and the backward (dQ,
// dK, dV and d alpha through both paths) against finite differences.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "finite_differences.h"
#include "reference/attention_reference.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;

ForwardInputs band_inputs(int64_t B, int64_t H, int64_t N, int64_t D, uint64_t seed) {
    ForwardInputs in{HostTensor(DType::f32, {B, H, N, D}), HostTensor(DType::f32, {B, H, N, D}),
                     HostTensor(DType::f32, {B, H, N, D}), {}, {}};
    fill_normal(in.q, seed);
    fill_normal(in.k, seed + 1);
    fill_normal(in.v, seed + 2);
    HostTensor alpha(DType::f32, {H});
    fill_normal(alpha, seed + 3, 0.0, 0.8);
    in.tensors.emplace("alpha", std::move(alpha));
    return in;
}

// N = 2, D = 1, scale 1, alpha 0.5, W = 1, causal: q = (1, 2), k = (3, 5), v = (10, 20).
// T00 = 1.5 * q0 k0 = 4.5; T10 = q1 k0 + 0.5 q0 k1 = 6 + 2.5 = 8.5; T11 = 1.5 * q1 k1 = 15.
TEST(ReferenceReciprocalBand, HandWorkedCase) {
    ForwardInputs in{HostTensor(DType::f32, {1, 1, 2, 1}), HostTensor(DType::f32, {1, 1, 2, 1}),
                     HostTensor(DType::f32, {1, 1, 2, 1}), {}, {}};
    in.q.set({0, 0, 0, 0}, 1);
    in.q.set({0, 0, 1, 0}, 2);
    in.k.set({0, 0, 0, 0}, 3);
    in.k.set({0, 0, 1, 0}, 5);
    in.v.set({0, 0, 0, 0}, 10);
    in.v.set({0, 0, 1, 0}, 20);
    HostTensor alpha(DType::f32, {1});
    alpha.set({0}, 0.5);
    in.tensors.emplace("alpha", std::move(alpha));
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(1).scale(1.0).reciprocal_band(1, "alpha");
    const ForwardResult r = forward(spec, in);
    EXPECT_DOUBLE_EQ(r.o.at({0, 0, 0, 0}), 10.0);
    EXPECT_NEAR(r.lse.at({0, 0, 0}), 4.5, 1e-12);
    const double p0 = 1.0 / (1.0 + std::exp(15.0 - 8.5));
    EXPECT_NEAR(r.o.at({0, 0, 1, 0}), 10.0 * p0 + 20.0 * (1 - p0), 1e-12);
    EXPECT_NEAR(r.lse.at({0, 0, 1}), 15.0 + std::log1p(std::exp(8.5 - 15.0)), 1e-12);
}

// The definition written out with two full score matrices, for both forms, with a window
// mask and a softcap on top.
TEST(ReferenceReciprocalBand, MatchesTheDefinitionWrittenOut) {
    const int64_t B = 2, H = 3, N = 37, D = 8;
    for (bool causal : {true, false})
        for (int w : {0, 1, 5, 40}) {
            const ForwardInputs in = band_inputs(B, H, N, D, 11 + w);
            const double cap = 4.0, scale = 1.0 / std::sqrt(double(D));
            const auto spec = AttentionSpec()
                                  .dtype(DType::f32)
                                  .head_dim(D)
                                  .reciprocal_band(w, "alpha", causal)
                                  .mask(kv_idx() - q_idx() < Expr(9))
                                  .score_mod(mods::softcap(scalar("cap")));
            ForwardInputs with_cap = in;
            with_cap.scalars["cap"] = cap;
            const ForwardResult r = forward(spec, with_cap);
            for (int64_t b = 0; b < B; ++b)
                for (int64_t h = 0; h < H; ++h) {
                    const double alpha = in.tensors.at("alpha").get({h});
                    auto s = [&](int64_t i, int64_t j) {
                        double d = 0;
                        for (int64_t c = 0; c < D; ++c) d += in.q.get({b, h, i, c}) * in.k.get({b, h, j, c});
                        return scale * d;
                    };
                    for (int64_t i = 0; i < N; ++i) {
                        std::vector<double> t(N, -INFINITY);
                        double m = -INFINITY;
                        for (int64_t j = 0; j < N; ++j) {
                            if ((causal && j > i) || j - i >= 9) continue;
                            const bool band = causal ? (i - j >= 0 && i - j <= w) : std::abs(i - j) <= w;
                            const double x = s(i, j) + (band ? alpha * s(j, i) : 0.0);
                            t[j] = cap * std::tanh(x / cap);
                            m = std::max(m, t[j]);
                        }
                        double l = 0, o = 0;
                        for (int64_t j = 0; j < N; ++j)
                            if (t[j] > -INFINITY) {
                                l += std::exp(t[j] - m);
                                o += std::exp(t[j] - m) * in.v.get({b, h, j, 0});
                            }
                        ASSERT_NEAR(r.lse.at({b, h, i}), m + std::log(l), 1e-10) << b << h << i << " w " << w;
                        ASSERT_NEAR(r.o.at({b, h, i, 0}), o / l, 1e-10) << b << h << i << " w " << w;
                    }
                }
        }
}

// W = 0 is the diagonal scaled by 1 + alpha_h: the same as a score_mod that does it.
TEST(ReferenceReciprocalBand, ZeroWidthIsAScaledDiagonal) {
    const ForwardInputs in = band_inputs(1, 2, 20, 4, 5);
    const auto band = AttentionSpec().dtype(DType::f32).head_dim(4).reciprocal_band(0, "alpha");
    const Tensor alpha("alpha", DType::f32, 1);
    const auto diag = AttentionSpec().dtype(DType::f32).head_dim(4).mask(mods::causal()).score_mod(
        select(q_idx() == kv_idx(), score() * (Expr(1.0) + alpha(head())), score()));
    const ForwardResult a = forward(band, in), b = forward(diag, in);
    for (size_t n = 0; n < a.o.data.size(); ++n) ASSERT_NEAR(a.o.data[n], b.o.data[n], 1e-12);
    for (size_t n = 0; n < a.lse.data.size(); ++n) ASSERT_NEAR(a.lse.data[n], b.lse.data[n], 1e-12);
}

// The backward against central differences of the forward: both forms, GQA, a softcap (its
// derivative at T) and a window mask on top, alpha per head (and its gradient).
TEST(ReferenceReciprocalBand, BackwardMatchesFiniteDifferences) {
    for (bool causal : {true, false})
        for (int w : {0, 2, 30}) {
            fd::Problem p = fd::make(1, 4, 2, 9, 9, 4, 3, 40 + w);
            HostTensor alpha(DType::f32, {4});
            fill_normal(alpha, 7 + w, 0.0, 0.8);
            p.in.tensors.emplace("alpha", std::move(alpha));
            p.in.scalars["cap"] = 3.0;
            p.spec.reciprocal_band(w, "alpha", causal)
                .score_mod(mods::softcap(scalar("cap")))
                .mask(kv_idx() - q_idx() < Expr(6));
            p.wanted = {"alpha"};
            SCOPED_TRACE(std::string(causal ? "causal" : "non-causal") + " W " + std::to_string(w));
            fd::check(p, 2);
        }
}

TEST(ReferenceReciprocalBand, InputErrors) {
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(4).reciprocal_band(3, "alpha");
    ForwardInputs in = band_inputs(1, 2, 10, 4, 1);
    in.tensors.at("alpha") = HostTensor(DType::f32, {3});
    EXPECT_USER_ERROR(forward(spec, in), "it must be [Hq] = [2]");
    ForwardInputs cross = band_inputs(1, 2, 10, 4, 1);
    cross.q = HostTensor(DType::f32, {1, 2, 7, 4});
    EXPECT_USER_ERROR(forward(spec, cross), "needs self-attention, Nq == Nk");
}

}  // namespace
}  // namespace attnjit::reference
