// The fp64 reference of the latent projection (MLA, SEMANTICS.md section 4): the forward
// against the composition written out here (project Q, a direct softmax, up-project), the
// identity projections as plain multi-query attention, every gradient against finite
// differences (with a gate, sinks, a score_mod reading a projection, and a reciprocal band),
// and the input errors.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "reference/attention_backward.h"
#include "reference/attention_reference.h"
#include "reference/finite_differences.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;

struct Sizes {
    int64_t B, Hq, Nq, Nk, Dqk, Dv, L;
};

// Q [B, Hq, Nq, Dqk], the latent K and V [B, 1, Nk, L], and the projections "wq" [Hq, Dqk, L]
// and "wv" [Hq, L, Dv], scaled so that the scores stay of order one.
ForwardInputs latent_inputs(const Sizes& z, DType dt, uint64_t seed) {
    ForwardInputs in{HostTensor(dt, {z.B, z.Hq, z.Nq, z.Dqk}), HostTensor(dt, {z.B, 1, z.Nk, z.L}),
                     HostTensor(dt, {z.B, 1, z.Nk, z.L}), {}, {}};
    fill_normal(in.q, seed);
    fill_normal(in.k, seed + 1);
    fill_normal(in.v, seed + 2);
    HostTensor wq(dt, {z.Hq, z.Dqk, z.L}), wv(dt, {z.Hq, z.L, z.Dv});
    fill_normal(wq, seed + 3, 0.0, 1.5 / std::sqrt(double(z.Dqk)));
    fill_normal(wv, seed + 4, 0.0, 1.0 / std::sqrt(double(z.L)));
    in.tensors.emplace("wq", std::move(wq));
    in.tensors.emplace("wv", std::move(wv));
    return in;
}

AttentionSpec latent_spec(const Sizes& z, DType dt) {
    return AttentionSpec()
        .dtype(dt)
        .head_dims(static_cast<int>(z.Dqk), static_cast<int>(z.Dv))
        .latent(static_cast<int>(z.L), "wq", "wv");
}

// The definition, directly from the stored values: Q_lat = q W_q[h], a causal (top-left)
// softcapped softmax over s = scale <Q_lat_i, k_j>, O = (P v) W_v[h].
void expect_composition(const ForwardInputs& in, const ForwardResult& r, const Sizes& z, double scale, double cap) {
    const HostTensor &wq = in.tensors.at("wq"), &wv = in.tensors.at("wv");
    for (int64_t b = 0; b < z.B; ++b)
        for (int64_t h = 0; h < z.Hq; ++h)
            for (int64_t i = 0; i < z.Nq; ++i) {
                std::vector<double> q_lat(z.L, 0.0);
                for (int64_t l = 0; l < z.L; ++l)
                    for (int64_t c = 0; c < z.Dqk; ++c) q_lat[l] += in.q.get({b, h, i, c}) * wq.get({h, c, l});
                std::vector<double> t(z.Nk, -INFINITY);
                double m = -INFINITY;
                for (int64_t j = 0; j <= std::min(i, z.Nk - 1); ++j) {
                    double s = 0;
                    for (int64_t l = 0; l < z.L; ++l) s += q_lat[l] * in.k.get({b, 0, j, l});
                    t[j] = cap * std::tanh(scale * s / cap);
                    m = std::max(m, t[j]);
                }
                double sum = 0;
                std::vector<double> o_lat(z.L, 0.0);
                for (int64_t j = 0; j < z.Nk; ++j) {
                    if (t[j] == -INFINITY) continue;
                    sum += std::exp(t[j] - m);
                    for (int64_t l = 0; l < z.L; ++l) o_lat[l] += std::exp(t[j] - m) * in.v.get({b, 0, j, l});
                }
                ASSERT_NEAR(r.lse.at({b, h, i}), m + std::log(sum), 1e-10 * std::max(1.0, std::fabs(m)))
                    << b << " " << h << " " << i;
                for (int64_t d = 0; d < z.Dv; ++d) {
                    double o = 0;
                    for (int64_t l = 0; l < z.L; ++l) o += o_lat[l] / sum * wv.get({h, l, d});
                    ASSERT_NEAR(r.o.at({b, h, i, d}), o, 1e-10 * std::max(1.0, std::fabs(o)))
                        << b << " " << h << " " << i << " " << d;
                }
            }
}

// Ragged lengths (Nq != Nk, neither a multiple of anything), Dqk != Dv, three widths, both
// dtypes, the default scale 1/sqrt(L) and an explicit one.
TEST(ReferenceLatent, ForwardMatchesTheCompositionWrittenOut) {
    for (DType dt : {DType::bf16, DType::f32})
        for (int64_t L : {8, 32, 64})
            for (bool explicit_scale : {false, true}) {
                const Sizes z{2, 3, 13, 29, 24, 40, L};
                SCOPED_TRACE(std::string(dtype_name(dt)) + " L " + std::to_string(L) +
                             (explicit_scale ? " scale 0.2" : " default scale"));
                ForwardInputs in = latent_inputs(z, dt, 100 + L);
                in.scalars["cap"] = 5.0;
                AttentionSpec spec = latent_spec(z, dt).mask(mods::causal()).score_mod(mods::softcap(scalar("cap")));
                if (explicit_scale) spec.scale(0.2);
                const ForwardResult r = forward(spec, in, 3);
                expect_composition(in, r, z, explicit_scale ? 0.2 : 1.0 / std::sqrt(double(L)), 5.0);
            }
}

// With W_q = I (Dqk = L) and W_v = I (Dv = L) the latent projection is multi-query attention
// at head dim L: the same forward, and the same dq, dk, dv.
TEST(ReferenceLatent, IdentityProjectionsArePlainMultiQueryAttention) {
    const Sizes z{2, 3, 11, 17, 16, 16, 16};
    ForwardInputs in = latent_inputs(z, DType::f32, 7);
    for (const char* name : {"wq", "wv"}) {
        HostTensor& w = in.tensors.at(name);
        for (int64_t h = 0; h < z.Hq; ++h)
            for (int64_t r = 0; r < 16; ++r)
                for (int64_t c = 0; c < 16; ++c) w.set({h, r, c}, r == c ? 1.0 : 0.0);
    }
    const auto latent = latent_spec(z, DType::f32).mask(mods::causal(mods::CausalAlign::BottomRight));
    const auto mqa = AttentionSpec().dtype(DType::f32).head_dim(16).heads(3, 1).mask(mods::causal(mods::CausalAlign::BottomRight));
    ForwardInputs plain = in;
    plain.tensors.clear();
    HostTensor d_o(DType::f32, {z.B, z.Hq, z.Nq, 16});
    fill_normal(d_o, 9);
    const BackwardResult a = backward(latent, in, d_o, {}, 2), b = backward(mqa, plain, d_o, {}, 2);
    EXPECT_LT(max_abs_error(a.forward.o, b.forward.o), 1e-12);
    EXPECT_LT(max_abs_error(a.forward.lse, b.forward.lse), 1e-12);
    EXPECT_LT(max_abs_error(a.dq, b.dq), 1e-12);
    EXPECT_LT(max_abs_error(a.dk, b.dk), 1e-12);
    EXPECT_LT(max_abs_error(a.dv, b.dv), 1e-12);
    EXPECT_GT(max_abs_error(a.dk, DoubleTensor(a.dk.shape)), 1e-3);  // not all zero
}

// A latent problem for finite differences (f32 storage, fd::check's loss sum(O * dO)).
fd::Problem latent_problem(const Sizes& z, uint64_t seed) {
    fd::Problem p;
    p.spec = latent_spec(z, DType::f32);
    p.in = latent_inputs(z, DType::f32, seed);
    p.d_o = HostTensor(DType::f32, {z.B, z.Hq, z.Nq, z.Dv});
    fill_normal(p.d_o, seed + 5);
    p.wanted = {"wq", "wv"};
    return p;
}

// dq, dk, dv, d wq, d wv against central differences, three query heads on the one latent
// head, Nq != Nk, with a causal mask, a softcap (d cap), sinks and a gate on top, and a
// score_mod that reads wq itself (its d wq adds to the projection's).
TEST(ReferenceLatent, BackwardMatchesFiniteDifferences) {
    const Sizes z{2, 3, 5, 7, 5, 3, 8};
    fd::Problem p = latent_problem(z, 21);
    HostTensor sinks(DType::f32, {z.Hq}), gate(DType::f32, {z.B, z.Hq, z.Nq, z.Dv});
    fill_normal(sinks, 31);
    fill_normal(gate, 32);
    p.in.tensors.emplace("sinks", std::move(sinks));
    p.in.tensors.emplace("g", std::move(gate));
    p.in.scalars["cap"] = 3.0;
    const Tensor wq("wq", DType::f32, 3);
    p.spec.mask(mods::causal())
        .score_mod(mods::softcap(scalar("cap")) + wq(head(), 1, 2) * to_float(kv_idx() - q_idx()))
        .sinks("sinks")
        .gate("g");
    p.wanted = {"wq", "wv", "cap", "sinks", "g"};
    fd::check(p);
}

// The reciprocal band on the latent scores (s_ji = scale <Q_lat_j, k_i>), both forms: every
// gradient and d alpha.
TEST(ReferenceLatent, BackwardWithAReciprocalBandMatchesFiniteDifferences) {
    for (bool causal : {true, false}) {
        SCOPED_TRACE(causal ? "causal" : "non-causal");
        const Sizes z{1, 2, 7, 7, 6, 5, 8};
        fd::Problem p = latent_problem(z, 50 + causal);
        HostTensor alpha(DType::f32, {z.Hq});
        fill_normal(alpha, 57, 0.0, 0.8);
        p.in.tensors.emplace("alpha", std::move(alpha));
        p.spec.reciprocal_band(2, "alpha", causal);
        p.wanted = {"wq", "wv", "alpha"};
        fd::check(p);
    }
}

// A band on Q_lat, written out: T_ij = s_ij + alpha_h [0 <= i - j <= W] s_ji, causal.
TEST(ReferenceLatent, ReciprocalBandUsesTheProjectedQueries) {
    const Sizes z{1, 2, 9, 9, 6, 4, 8};
    ForwardInputs in = latent_inputs(z, DType::f32, 61);
    HostTensor alpha(DType::f32, {z.Hq});
    fill_normal(alpha, 62, 0.0, 0.8);
    in.tensors.emplace("alpha", std::move(alpha));
    const int W = 3;
    const ForwardResult r = forward(latent_spec(z, DType::f32).reciprocal_band(W, "alpha"), in);
    const HostTensor &wq = in.tensors.at("wq"), &wv = in.tensors.at("wv");
    const double scale = 1.0 / std::sqrt(8.0);
    for (int64_t h = 0; h < z.Hq; ++h) {
        std::vector<std::vector<double>> q_lat(z.Nq, std::vector<double>(z.L, 0.0));
        for (int64_t i = 0; i < z.Nq; ++i)
            for (int64_t l = 0; l < z.L; ++l)
                for (int64_t c = 0; c < z.Dqk; ++c) q_lat[i][l] += in.q.get({0, h, i, c}) * wq.get({h, c, l});
        auto s = [&](int64_t i, int64_t j) {
            double d = 0;
            for (int64_t l = 0; l < z.L; ++l) d += q_lat[i][l] * in.k.get({0, 0, j, l});
            return scale * d;
        };
        for (int64_t i = 0; i < z.Nq; ++i) {
            std::vector<double> t(i + 1);
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= i; ++j) {
                t[j] = s(i, j) + (i - j <= W ? in.tensors.at("alpha").get({h}) * s(j, i) : 0.0);
                m = std::max(m, t[j]);
            }
            for (int64_t j = 0; j <= i; ++j) sum += std::exp(t[j] - m);
            ASSERT_NEAR(r.lse.at({0, h, i}), m + std::log(sum), 1e-10);
            for (int64_t d = 0; d < z.Dv; ++d) {
                double o = 0;
                for (int64_t j = 0; j <= i; ++j)
                    for (int64_t l = 0; l < z.L; ++l)
                        o += std::exp(t[j] - m) / sum * in.v.get({0, 0, j, l}) * wv.get({h, l, d});
                ASSERT_NEAR(r.o.at({0, h, i, d}), o, 1e-10) << h << " " << i << " " << d;
            }
        }
    }
}

TEST(ReferenceLatent, InputErrorsNameTheArgument) {
    const Sizes z{1, 2, 6, 10, 24, 40, 32};
    const AttentionSpec spec = latent_spec(z, DType::bf16);
    const ForwardInputs good = latent_inputs(z, DType::bf16, 3);
    HostTensor d_o(DType::bf16, {z.B, z.Hq, z.Nq, z.Dv});
    EXPECT_NO_THROW(forward(spec, good));
    EXPECT_NO_THROW(backward(spec, good, d_o, {"wq", "wv"}));

    ForwardInputs in = good;
    in.tensors.at("wq") = HostTensor(DType::bf16, {2, 24, 40});
    EXPECT_USER_ERROR(forward(spec, in),
                      "reference::forward: the latent query projection w_qlat 'wq' is bf16[2, 24, 40]");
    EXPECT_USER_ERROR(backward(spec, in, d_o), "it must be [Hq, Dqk, L] = [2, 24, 32]");
    in = good;
    in.tensors.at("wq") = HostTensor(DType::bf16, {3, 24, 32});  // one head too many
    EXPECT_USER_ERROR(forward(spec, in), "w_qlat 'wq' is bf16[3, 24, 32]");
    in = good;
    in.tensors.at("wv") = HostTensor(DType::bf16, {2, 40, 32});  // transposed
    EXPECT_USER_ERROR(forward(spec, in), "the latent up-projection w_vup 'wv' is bf16[2, 40, 32]");
    EXPECT_USER_ERROR(forward(spec, in), "it must be [Hq, L, Dv] = [2, 32, 40]");
    in = good;
    in.tensors.at("wv") = HostTensor(DType::f32, {2, 32, 40});
    EXPECT_USER_ERROR(forward(spec, in), "tensor 'wv' is f32[2, 32, 40]");
    in = good;
    in.tensors.at("wv") = HostTensor(DType::bf16, {2, 32, 40, 1});
    EXPECT_USER_ERROR(forward(spec, in), "but the spec reads a bf16 tensor of rank 3");
    in = good;
    in.tensors.erase("wq");
    EXPECT_USER_ERROR(forward(spec, in), "captured tensor 'wq' is read by the spec but not given");

    in = good;
    in.k = HostTensor(DType::bf16, {1, 2, 10, 32});  // two KV heads (divides Hq: only the latent rule refuses it)
    in.v = HostTensor(DType::bf16, {1, 2, 10, 32});
    EXPECT_USER_ERROR(forward(spec, in),
                      "reference::forward: k is bf16[1, 2, 10, 32] strides [640, 320, 32, 1]; with spec.latent(32, ...) "
                      "it holds the latent keys, [B, 1, Nk, L] = [1, 1, 10, 32]");
    in = good;
    in.k = HostTensor(DType::bf16, {1, 1, 10, 24});  // Q's head dim, not L
    EXPECT_USER_ERROR(forward(spec, in), "k is bf16[1, 1, 10, 24]");
    EXPECT_USER_ERROR(backward(spec, in, d_o), "reference::backward: k is bf16[1, 1, 10, 24]");
    in = good;
    in.v = HostTensor(DType::bf16, {1, 1, 10, 40});  // Dv, not L
    EXPECT_USER_ERROR(forward(spec, in), "v is bf16[1, 1, 10, 40] strides [400, 400, 40, 1]; with spec.latent(32, ...) "
                                         "it holds the latent values");
    in = good;
    in.q = HostTensor(DType::bf16, {1, 2, 6, 32});  // Q at L, not Dqk
    EXPECT_USER_ERROR(forward(spec, in), "q bf16[1, 2, 6, 32] strides [384, 192, 32, 1] must have head dim 24");
    in = good;
    in.v = HostTensor(DType::bf16, {1, 1, 9, 32});
    EXPECT_USER_ERROR(forward(spec, in), "must have the same heads and length");
    HostTensor wide(DType::bf16, {z.B, z.Hq, z.Nq, z.L});  // d_o is the output's, at Dv
    EXPECT_USER_ERROR(backward(spec, good, wide), "it must be [B, Hq, Nq, Dv] = [1, 2, 6, 40]");
}

}  // namespace
}  // namespace attnjit::reference
