// The fp64 reference against closed forms and against a tiny independent implementation
// whose masks and score mods are plain C++ lambdas (no DSL, no interpreter).
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "reference/attention_reference.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;
constexpr double kInf = std::numeric_limits<double>::infinity();

using Keep = std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)>;
using Mod = std::function<double(double s, int64_t b, int64_t h, int64_t i, int64_t j)>;

// Softmax attention written the textbook way: full score row, -inf for masked keys,
// p = exp(t - max) / sum; K/V head chosen by integer division.
ForwardResult naive(const HostTensor& q, const HostTensor& k, const HostTensor& v, double scale,
                    const Keep& keep = nullptr, const Mod& mod = nullptr) {
    int64_t B = q.size(0), Hq = q.size(1), Nq = q.size(2), D = q.size(3), Hkv = k.size(1), Nk = k.size(2),
            Dv = v.size(3);
    ForwardResult r{DoubleTensor({B, Hq, Nq, Dv}), DoubleTensor({B, Hq, Nq})};
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < Hq; ++h)
            for (int64_t i = 0; i < Nq; ++i) {
                int64_t g = h / (Hq / Hkv);
                std::vector<double> t(Nk);
                double mx = -kInf;
                for (int64_t j = 0; j < Nk; ++j) {
                    double s = 0;
                    for (int64_t d = 0; d < D; ++d) s += q.get({b, h, i, d}) * k.get({b, g, j, d});
                    s *= scale;
                    if (mod) s = mod(s, b, h, i, j);
                    t[j] = (!keep || keep(b, h, i, j)) ? s : -kInf;
                    mx = std::max(mx, t[j]);
                }
                if (mx == -kInf) {
                    r.lse.at({b, h, i}) = -kInf;
                    continue;  // O stays 0
                }
                double sum = 0;
                for (double x : t) sum += std::exp(x - mx);
                r.lse.at({b, h, i}) = mx + std::log(sum);
                for (int64_t j = 0; j < Nk; ++j)
                    for (int64_t d = 0; d < Dv; ++d)
                        r.o.at({b, h, i, d}) += std::exp(t[j] - mx) / sum * v.get({b, g, j, d});
            }
    return r;
}

struct Problem {
    ForwardInputs in;
    AttentionSpec spec;
};

Problem make(DType dt, int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t D = 32,
             uint64_t seed = 1) {
    Problem p;
    p.spec.dtype(dt).head_dim(static_cast<int>(D));
    p.in.q = HostTensor(dt, {B, Hq, Nq, D});
    p.in.k = HostTensor(dt, {B, Hkv, Nk, D});
    p.in.v = HostTensor(dt, {B, Hkv, Nk, D});
    fill_normal(p.in.q, seed);
    fill_normal(p.in.k, seed + 100);
    fill_normal(p.in.v, seed + 200);
    return p;
}

void expect_close(const ForwardResult& a, const ForwardResult& e, double tol = 1e-12) {
    auto co = compare(a.o, e.o, {tol, tol});
    EXPECT_TRUE(co.ok) << "O: " << co.report;
    auto cl = compare(a.lse, e.lse, {tol, tol});
    EXPECT_TRUE(cl.ok) << "LSE: " << cl.report;
}

TEST(Reference, IdentityModsArePlainSoftmaxAttention) {
    for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
        auto p = make(dt, 2, 3, 3, 5, 7);
        auto r = forward(p.spec, p.in);
        expect_close(r, naive(p.in.q, p.in.k, p.in.v, 1.0 / std::sqrt(32.0)));
    }
}

TEST(Reference, TwoKeysByHand) {
    // scale 1, q = e0, k0 = e0, k1 = 0: scores 1 and 0. v0 = 1, v1 = 3 (in every dim).
    auto p = make(DType::f32, 1, 1, 1, 1, 2);
    p.spec.scale(1.0);
    fill_value(p.in.q, 0);
    fill_value(p.in.k, 0);
    p.in.q.set({0, 0, 0, 0}, 1);
    p.in.k.set({0, 0, 0, 0}, 1);
    for (int64_t d = 0; d < 32; ++d) {
        p.in.v.set({0, 0, 0, d}, 1);
        p.in.v.set({0, 0, 1, d}, 3);
    }
    auto r = forward(p.spec, p.in);
    const double e = std::exp(1.0);
    EXPECT_DOUBLE_EQ(r.lse.at({0, 0, 0}), std::log(e + 1));
    for (int64_t d = 0; d < 32; ++d) EXPECT_DOUBLE_EQ(r.o.at({0, 0, 0, d}), (e * 1 + 1 * 3) / (e + 1));
}

TEST(Reference, LseIsLogSumExpByHand) {
    // Three keys with scores 2, 0, -1 (scale 0.5, q = 2 e0, k = (2, 0, -1) e0).
    auto p = make(DType::f32, 1, 1, 1, 1, 3);
    p.spec.scale(0.5).return_lse();
    fill_value(p.in.q, 0);
    fill_value(p.in.k, 0);
    p.in.q.set({0, 0, 0, 0}, 2);
    p.in.k.set({0, 0, 0, 0}, 2);
    p.in.k.set({0, 0, 2, 0}, -1);
    auto r = forward(p.spec, p.in);
    EXPECT_NEAR(r.lse.at({0, 0, 0}), std::log(std::exp(2.0) + std::exp(0.0) + std::exp(-1.0)), 1e-15);
}

TEST(Reference, CausalMaskEqualsMinusInfScoreMod) {
    auto p = make(DType::bf16, 1, 2, 2, 9, 9);
    AttentionSpec masked = p.spec;
    masked.mask(mods::causal());
    AttentionSpec modded = p.spec;
    modded.score_mod(select(kv_idx() <= q_idx(), score(), -infinity()));
    auto a = forward(masked, p.in), b = forward(modded, p.in);
    EXPECT_EQ(a.o.data, b.o.data);
    EXPECT_EQ(a.lse.data, b.lse.data);
    expect_close(a, naive(p.in.q, p.in.k, p.in.v, 1 / std::sqrt(32.0),
                          [](int64_t, int64_t, int64_t i, int64_t j) { return j <= i; }));
}

TEST(Reference, ConstantScoreModGivesMeanOfV) {
    auto p = make(DType::f16, 1, 2, 1, 4, 6);
    p.spec.score_mod(Expr(0.25));
    auto r = forward(p.spec, p.in);
    for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 4; ++i) {
            EXPECT_NEAR(r.lse.at({0, h, i}), 0.25 + std::log(6.0), 1e-14);
            for (int64_t d = 0; d < 32; ++d) {
                double mean = 0;
                for (int64_t j = 0; j < 6; ++j) mean += p.in.v.get({0, 0, j, d}) / 6;
                EXPECT_NEAR(r.o.at({0, h, i, d}), mean, 1e-14);
            }
        }
}

TEST(Reference, FullyMaskedRowsGiveZeroAndMinusInf) {
    auto p = make(DType::f16, 1, 1, 1, 5, 4);
    p.spec.mask(q_idx() >= 2 && kv_idx() < q_idx());
    auto r = forward(p.spec, p.in);
    for (int64_t i = 0; i < 5; ++i) {
        bool empty = i < 2;
        EXPECT_EQ(r.lse.at({0, 0, i}) == -kInf, empty) << "row " << i;
        for (int64_t d = 0; d < 32; ++d) {
            EXPECT_FALSE(std::isnan(r.o.at({0, 0, i, d})));
            if (empty) {
                EXPECT_EQ(r.o.at({0, 0, i, d}), 0.0);
            }
        }
    }
    // The same through a score_mod that sends every score to -inf, and a constant mask.
    AttentionSpec all_minus_inf = p.spec;
    all_minus_inf.mask(Expr()).score_mod(-infinity());
    AttentionSpec none_kept = p.spec;
    none_kept.mask(Expr(false));
    for (const auto& s : {all_minus_inf, none_kept}) {
        auto z = forward(s, p.in);
        for (double x : z.o.data) EXPECT_EQ(x, 0.0);
        for (double x : z.lse.data) EXPECT_EQ(x, -kInf);
    }
}

TEST(Reference, StridedInputsEqualMaterialisedCopies) {
    // Q, K, V stored as [B, N, H, D] and viewed as [B, H, N, D]; O of the copy is the truth.
    const int64_t B = 2, H = 3, N = 6, D = 32;
    auto p = make(DType::f16, B, H, H, N, N);
    ForwardInputs strided;
    for (auto [dst, src] : {std::pair{&strided.q, &p.in.q}, {&strided.k, &p.in.k}, {&strided.v, &p.in.v}}) {
        *dst = HostTensor(DType::f16, {B, H, N, D}, {N * H * D, D, H * D, 1});
        src->for_each_index([&](const int64_t* idx) { dst->set(idx, src->get(idx)); });
    }
    // A pair bias [1, H, N, N] broadcast over the batch by stride 0, and a slope per head
    // read through a stride of 3 with an offset.
    Tensor bias("bias", DType::f32, 4);
    Tensor slopes("slopes", DType::f32, 1);
    p.spec.score_mod(mods::compose(mods::bias(bias), mods::alibi(slopes)));
    HostTensor pair(DType::f32, {B, H, N, N}, {0, N * N, N, 1});
    fill_normal(pair, 7);
    HostTensor slope(DType::f32, {H}, {3}, 5);
    fill_normal(slope, 8);
    strided.tensors = {{"bias", pair}, {"slopes", slope}};
    p.in.tensors = {{"bias", materialize(pair)}, {"slopes", materialize(slope)}};
    EXPECT_EQ(materialize(pair).strides()[0], H * N * N);

    auto a = forward(p.spec, strided), e = forward(p.spec, p.in);
    EXPECT_EQ(a.o.data, e.o.data);
    EXPECT_EQ(a.lse.data, e.lse.data);
    // And the broadcast really is shared: batch 0 and 1 see the same bias.
    auto pb = [&](int64_t b, int64_t h, int64_t i, int64_t j) { return pair.get({b, h, i, j}); };
    EXPECT_EQ(pb(0, 1, 2, 3), pb(1, 1, 2, 3));
    expect_close(a, naive(p.in.q, p.in.k, p.in.v, 1 / std::sqrt(32.0), nullptr,
                          [&](double s, int64_t b, int64_t h, int64_t i, int64_t j) {
                              return s + pb(b, h, i, j) + slope.get({h}) * double(j - i);
                          }));
}

TEST(Reference, SizeOneStrideZeroBroadcasts) {
    auto p = make(DType::f32, 3, 2, 2, 4, 4);
    Tensor bias("bias", DType::f32, 4);
    p.spec.score_mod(mods::bias(bias));
    HostTensor small(DType::f32, {1, 2, 4, 4}, {0, 16, 4, 1});  // extent 1, stride 0: any b reads row 0
    fill_normal(small, 3);
    HostTensor full(DType::f32, {3, 2, 4, 4});
    full.for_each_index([&](const int64_t* idx) { full.set(idx, small.get({0, idx[1], idx[2], idx[3]})); });
    ForwardInputs a = p.in, b = p.in;
    a.tensors = {{"bias", small}};
    b.tensors = {{"bias", full}};
    auto ra = forward(p.spec, a), rb = forward(p.spec, b);
    EXPECT_EQ(ra.o.data, rb.o.data);
}

TEST(Reference, GroupedQueryAttentionMapsHeadsByDivision) {
    // Hq = 6, Hkv = 2: heads 0-2 read KV head 0, heads 3-5 read KV head 1.
    auto p = make(DType::bf16, 2, 6, 2, 3, 5);
    auto r = forward(p.spec, p.in);
    // Same as MHA with the KV heads repeated.
    HostTensor k6(DType::bf16, {2, 6, 5, 32}), v6(DType::bf16, {2, 6, 5, 32});
    k6.for_each_index([&](const int64_t* i) { k6.set(i, p.in.k.get({i[0], i[1] / 3, i[2], i[3]})); });
    v6.for_each_index([&](const int64_t* i) { v6.set(i, p.in.v.get({i[0], i[1] / 3, i[2], i[3]})); });
    ForwardInputs mha = p.in;
    mha.k = k6;
    mha.v = v6;
    auto e = forward(p.spec, mha);
    EXPECT_EQ(r.o.data, e.o.data);
    // kv_head() reads h / (Hq / Hkv): keep only key j == kv_head, so O = V[kv_head, j].
    p.spec.mask(kv_idx() == kv_head());
    auto m = forward(p.spec, p.in);
    for (int64_t h = 0; h < 6; ++h)
        for (int64_t d = 0; d < 32; ++d)
            EXPECT_EQ(m.o.at({1, h, 2, d}), p.in.v.get({1, h / 3, h / 3, d})) << "head " << h;
}

TEST(Reference, BottomRightAndTopLeftCausalDifferWhenNqIsNotNk) {
    const double scale = 1 / std::sqrt(32.0);
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{3, 7}, {7, 3}}) {
        auto p = make(DType::f16, 1, 1, 1, nq, nk);
        AttentionSpec tl = p.spec, br = p.spec;
        tl.mask(mods::causal());
        br.mask(mods::causal(mods::CausalAlign::BottomRight));
        int64_t shift = nk - nq;
        expect_close(forward(tl, p.in),
                     naive(p.in.q, p.in.k, p.in.v, scale, [](int64_t, int64_t, int64_t i, int64_t j) { return j <= i; }));
        expect_close(forward(br, p.in), naive(p.in.q, p.in.k, p.in.v, scale,
                                              [&](int64_t, int64_t, int64_t i, int64_t j) { return j <= i + shift; }));
        auto rtl = forward(tl, p.in), rbr = forward(br, p.in);
        EXPECT_NE(rtl.o.data, rbr.o.data);
        if (nq > nk) {  // bottom-right: the first nq - nk rows see no key
            EXPECT_EQ(rbr.lse.at({0, 0, 0}), -kInf);
            EXPECT_NE(rtl.lse.at({0, 0, 0}), -kInf);
        } else {  // decode-like: the last query sees every key under bottom-right
            EXPECT_NEAR(rbr.lse.at({0, 0, nq - 1}), forward(p.spec, p.in).lse.at({0, 0, nq - 1}), 1e-14);
        }
    }
}

TEST(Reference, SlidingWindowOfOneKeepsTheDiagonal) {
    auto p = make(DType::f32, 1, 2, 2, 6, 6);
    p.spec.mask(mods::sliding_window(1));
    auto r = forward(p.spec, p.in);
    const double scale = 1 / std::sqrt(32.0);
    for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 6; ++i) {
            double s = 0;
            for (int64_t d = 0; d < 32; ++d) s += p.in.q.get({0, h, i, d}) * p.in.k.get({0, h, i, d});
            EXPECT_NEAR(r.lse.at({0, h, i}), scale * s, 1e-13);
            for (int64_t d = 0; d < 32; ++d) EXPECT_EQ(r.o.at({0, h, i, d}), p.in.v.get({0, h, i, d}));
        }
}

TEST(Reference, ScoreModsAndMasksMatchLambdas) {
    auto p = make(DType::bf16, 2, 2, 1, 6, 9);
    Tensor doc("doc", DType::i32, 2);
    p.spec.score_mod(mods::softcap(scalar("cap"))).mask(mods::document_mask(doc) && mods::prefix_lm(int_scalar("prefix")));
    HostTensor ids(DType::i32, {2, 9});
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t j = 0; j < 9; ++j) ids.set({b, j}, j < 3 + b ? 0 : 1);
    p.in.tensors = {{"doc", ids}};
    p.in.scalars = {{"cap", 2.0}, {"prefix", 2}};
    auto r = forward(p.spec, p.in);
    auto e = naive(
        p.in.q, p.in.k, p.in.v, 1 / std::sqrt(32.0),
        [&](int64_t b, int64_t, int64_t i, int64_t j) {
            return ids.get({b, i}) == ids.get({b, j}) && (j < 2 || j <= i);
        },
        [](double s, int64_t, int64_t, int64_t, int64_t) { return 2.0 * std::tanh(s / 2.0); });
    expect_close(r, e);
}

TEST(Reference, ThreadCountDoesNotChangeBits) {
    auto p = make(DType::f16, 2, 4, 2, 33, 40, 64);
    p.spec.head_dim(64).mask(mods::causal());
    auto one = forward(p.spec, p.in, 1), many = forward(p.spec, p.in, 5);
    EXPECT_EQ(one.o.data, many.o.data);
    EXPECT_EQ(one.lse.data, many.lse.data);
}

TEST(Reference, LargeCaseIsFastEnough) {
    // The size the GPU tests use at most: Nq = 1000, Nk = 4097, D = 128.
    auto p = make(DType::bf16, 1, 1, 1, 1000, 4097, 128);
    p.spec.mask(mods::causal(mods::CausalAlign::BottomRight));
    auto t0 = std::chrono::steady_clock::now();
    auto r = forward(p.spec, p.in);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RecordProperty("seconds", std::to_string(secs));
    EXPECT_LT(secs, 30.0);
    for (double x : r.o.data) ASSERT_TRUE(std::isfinite(x));
    // Spot-check two rows against the naive implementation on a slice: row i of a
    // bottom-right mask keeps keys [0, i + 3097].
    for (int64_t i : {int64_t{0}, int64_t{999}}) {
        HostTensor q1(DType::bf16, {1, 1, 1, 128});
        q1.for_each_index([&](const int64_t* idx) { q1.set(idx, p.in.q.get({0, 0, i, idx[3]})); });
        auto e = naive(q1, p.in.k, p.in.v, 1 / std::sqrt(128.0),
                       [&](int64_t, int64_t, int64_t, int64_t j) { return j <= i + 3097; });
        EXPECT_NEAR(r.lse.at({0, 0, i}), e.lse.at({0, 0, 0}), 1e-10);
        for (int64_t d = 0; d < 128; ++d) EXPECT_NEAR(r.o.at({0, 0, i, d}), e.o.at({0, 0, 0, d}), 1e-12);
    }
}

}  // namespace
}  // namespace attnjit::reference
