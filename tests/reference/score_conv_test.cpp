// The fp64 reference of the score convolution (SEMANTICS.md section 3,
// docs/score_convolution.md): a case worked out by hand, the identity kernel against
// causal attention, a packed sequence of documents against the documents run alone, and
// the shape errors.
#include <cmath>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "reference/attention_backward.h"
#include "reference/attention_reference.h"
#include "support/exceptions.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;

ForwardInputs random_inputs(int64_t B, int64_t H, int64_t N, int64_t D, uint64_t seed) {
    ForwardInputs in{HostTensor(DType::f32, {B, H, N, D}), HostTensor(DType::f32, {B, H, N, D}),
                     HostTensor(DType::f32, {B, H, N, D}), {}, {}};
    fill_normal(in.q, seed);
    fill_normal(in.k, seed + 1);
    fill_normal(in.v, seed + 2);
    return in;
}

// Nq = Nk = 3, D = 1, scale 1: q = (1, 2, 3), k = (1, 1, 1), so s_ij = q_i and
// S0 = [[1, 0, 0], [2, 2, 0], [3, 3, 3]]. theta = [[1, 2, 3], [4, 5, 6]] (c 2 x 3, p_k 1),
// C[i][j] = sum_a sum_b theta[a][b] S0[i - 1 + a][j - 1 + b], written out:
//   C00 = 5 * S0[0][0] = 5
//   C10 = 2 * 1 + (5 * 2 + 6 * 2) = 24        C11 = 1 * 1 + (4 * 2 + 5 * 2) = 19
//   C20 = (2 * 2 + 3 * 2) + (5 * 3 + 6 * 3) = 43
//   C21 = (1 * 2 + 2 * 2) + (4 * 3 + 5 * 3 + 6 * 3) = 51
//   C22 = 1 * 2 + (4 * 3 + 5 * 3) = 29
// v = (1, 10, 100): O_i = sum_j softmax_j(C[i][.]) v_j over j <= i.
TEST(ScoreConvReference, ACaseWorkedOutByHand) {
    ForwardInputs in{HostTensor(DType::f32, {1, 1, 3, 1}), HostTensor(DType::f32, {1, 1, 3, 1}),
                     HostTensor(DType::f32, {1, 1, 3, 1}), {}, {}};
    HostTensor theta(DType::f32, {1, 2, 3});
    for (int64_t i = 0; i < 3; ++i) {
        in.q.set({0, 0, i, 0}, double(i + 1));
        in.k.set({0, 0, i, 0}, 1.0);
        in.v.set({0, 0, i, 0}, std::pow(10.0, double(i)));
    }
    for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 3; ++b) theta.set({0, a, b}, double(3 * a + b + 1));
    in.tensors.emplace("theta", theta);
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(1).scale(1.0).score_conv("theta", 2, 3);
    const ForwardResult r = forward(spec, in);
    const double c[3][3] = {{5, 0, 0}, {24, 19, 0}, {43, 51, 29}};
    for (int64_t i = 0; i < 3; ++i) {
        double m = -INFINITY, l = 0, o = 0;
        for (int64_t j = 0; j <= i; ++j) m = std::max(m, c[i][j]);
        for (int64_t j = 0; j <= i; ++j) l += std::exp(c[i][j] - m);
        for (int64_t j = 0; j <= i; ++j) o += std::exp(c[i][j] - m) / l * std::pow(10.0, double(j));
        EXPECT_NEAR(r.lse.at({0, 0, i}), m + std::log(l), 1e-12) << "row " << i;
        EXPECT_NEAR(r.o.at({0, 0, i, 0}), o, 1e-12 * (1 + o)) << "row " << i;
    }
}

// theta[h][c_q - 1][p_k] = 1, zero elsewhere: plain causal attention.
TEST(ScoreConvReference, IdentityKernelIsCausalAttention) {
    for (auto [cq, ck] : {std::pair{1, 1}, {3, 3}, {6, 11}}) {
        SCOPED_TRACE(std::to_string(cq) + "x" + std::to_string(ck));
        ForwardInputs in = random_inputs(2, 3, 20, 8, 11);
        const ForwardResult causal =
            forward(AttentionSpec().dtype(DType::f32).head_dim(8).mask(kv_idx() <= q_idx()), in);
        HostTensor theta(DType::f32, {3, cq, ck});
        for (int64_t h = 0; h < 3; ++h) theta.set({h, cq - 1, (ck - 1) / 2}, 1.0);
        in.tensors.emplace("theta", theta);
        const ForwardResult conv = forward(AttentionSpec().dtype(DType::f32).head_dim(8).score_conv("theta", cq, ck), in);
        EXPECT_LT(max_abs_error(conv.o, causal.o), 1e-12);
        EXPECT_LT(max_abs_error(conv.lse, causal.lse), 1e-12);
    }
}

// A packed sequence of two documents (5 and 7 tokens) with a document mask gives, per
// document, what the document alone gives: the convolution never crosses the boundary.
TEST(ScoreConvReference, DocumentMaskKeepsTheConvolutionInsideEachDocument) {
    const int64_t n0 = 5, n1 = 7, N = n0 + n1, H = 2, D = 4;
    ForwardInputs packed = random_inputs(1, H, N, D, 21);
    HostTensor theta(DType::f32, {H, 3, 5});
    fill_normal(theta, 24);
    HostTensor doc(DType::i32, {1, N});
    for (int64_t j = 0; j < N; ++j) doc.set({0, j}, j < n0 ? 0.0 : 1.0);
    packed.tensors.emplace("theta", theta);
    packed.tensors.emplace("doc", doc);
    const Tensor docs("doc", DType::i32, 2);
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(D).score_conv("theta", 3, 5);
    const ForwardResult whole =
        forward(AttentionSpec(spec).mask(docs(batch(), q_idx()) == docs(batch(), kv_idx())), packed);
    for (auto [start, len] : {std::pair{int64_t{0}, n0}, {n0, n1}}) {
        ForwardInputs alone = random_inputs(1, H, len, D, 0);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < len; ++i)
                for (int64_t d = 0; d < D; ++d) {
                    alone.q.set({0, h, i, d}, packed.q.get({0, h, start + i, d}));
                    alone.k.set({0, h, i, d}, packed.k.get({0, h, start + i, d}));
                    alone.v.set({0, h, i, d}, packed.v.get({0, h, start + i, d}));
                }
        alone.tensors.emplace("theta", theta);
        const ForwardResult r = forward(spec, alone);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < len; ++i) {
                EXPECT_NEAR(whole.lse.at({0, h, start + i}), r.lse.at({0, h, i}), 1e-12) << h << " " << i;
                for (int64_t d = 0; d < D; ++d)
                    EXPECT_NEAR(whole.o.at({0, h, start + i, d}), r.o.at({0, h, i, d}), 1e-12) << h << " " << i;
            }
    }
}

TEST(ScoreConvReference, KernelOfTheWrongShapeIsAUserError) {
    ForwardInputs in = random_inputs(1, 2, 6, 4, 31);
    in.tensors.emplace("theta", HostTensor(DType::f32, {2, 3, 3}));
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(4).score_conv("theta", 3, 5);
    try {
        forward(spec, in);
        FAIL() << "no error";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("must be [Hq, c_q, c_k] = [2, 3, 5]"), std::string::npos) << e.what();
    }
}

// The convolution's backward against central differences of the forward: loss = sum(O *
// dO), every element of q, k, v, theta and the gate; f32 inputs (the reference is then
// nearly exact), GQA, Nq != Nk, a softcap after the convolution and a document mask.
TEST(ScoreConvReference, GradientsByFiniteDifferences) {
    const int64_t B = 1, Hq = 2, Hkv = 1, Nq = 7, Nk = 9, D = 3;
    ForwardInputs in{HostTensor(DType::f32, {B, Hq, Nq, D}), HostTensor(DType::f32, {B, Hkv, Nk, D}),
                     HostTensor(DType::f32, {B, Hkv, Nk, D}), {}, {}};
    fill_normal(in.q, 41);
    fill_normal(in.k, 42);
    fill_normal(in.v, 43);
    HostTensor theta(DType::f32, {Hq, 3, 3}), gate(DType::f32, {B, Hq, Nq, D}), q_doc(DType::i32, {B, Nq}),
        kv_doc(DType::i32, {B, Nk}), d_o(DType::f32, {B, Hq, Nq, D});
    fill_normal(theta, 44, 0.0, 0.5);
    fill_normal(gate, 45);
    fill_normal(d_o, 46);
    for (int64_t i = 0; i < Nq; ++i) q_doc.set({0, i}, i < 4 ? 0.0 : 1.0);
    for (int64_t j = 0; j < Nk; ++j) kv_doc.set({0, j}, j < 4 ? 0.0 : 1.0);
    in.tensors.emplace("theta", theta);
    in.tensors.emplace("gate", gate);
    in.tensors.emplace("q_doc", q_doc);
    in.tensors.emplace("kv_doc", kv_doc);
    in.scalars["cap"] = 2.0;
    const Tensor qd("q_doc", DType::i32, 2), kd("kv_doc", DType::i32, 2);
    const auto spec = AttentionSpec()
                          .dtype(DType::f32)
                          .head_dim(D)
                          .score_conv("theta", 3, 3)
                          .gate("gate")
                          .score_mod(mods::softcap(scalar("cap")))
                          .mask(qd(batch(), q_idx()) == kd(batch(), kv_idx()));
    const BackwardResult g = backward(spec, in, d_o, {"theta", "gate"});
    const DoubleTensor dout = to_double(d_o);
    auto loss = [&] {
        const ForwardResult f = forward(spec, in, 1);
        double l = 0;
        for (size_t n = 0; n < f.o.data.size(); ++n) l += f.o.data[n] * dout.data[n];
        return l;
    };
    auto expect_grad = [&](const DoubleTensor& grad, HostTensor& t, const char* what) {
        ASSERT_EQ(grad.shape, t.shape()) << what;
        int64_t n = 0;
        t.for_each_index([&](const int64_t* idx) {
            const double x = t.get(idx), h = 1e-3 * std::max(1.0, std::fabs(x));
            t.set(idx, x + h);
            const double up_x = t.get(idx), up = loss();
            t.set(idx, x - h);
            const double down_x = t.get(idx), down = loss();
            t.set(idx, x);
            const double fd = (up - down) / (up_x - down_x), a = grad.data[static_cast<size_t>(n++)];
            EXPECT_NEAR(a, fd, 2e-5 + 2e-4 * std::fabs(fd)) << what << " element " << n - 1;
        });
    };
    expect_grad(g.dq, in.q, "dq");
    expect_grad(g.dk, in.k, "dk");
    expect_grad(g.dv, in.v, "dv");
    expect_grad(g.dtensors.at("theta"), in.tensors.at("theta"), "d theta");
    expect_grad(g.dtensors.at("gate"), in.tensors.at("gate"), "d gate");
}

}  // namespace
}  // namespace attnjit::reference
