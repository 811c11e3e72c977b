// The fp64 reference of the score convolution (SEMANTICS.md section 3,
// docs/score_convolution.md): a case worked out by hand, the identity kernel against
// causal attention (forward and backward), a packed sequence of documents against the
// documents run alone, the definition written out directly with an arbitrary mask, and
// the shape errors. Gradients by finite differences: score_conv_backward_test.cpp.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "finite_differences.h"
#include "reference/attention_backward.h"
#include "reference/attention_reference.h"
#include "support/exceptions.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;
using namespace attnjit::reference::fd;

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

// theta[h][c_q - 1][p_k] = 1, zero elsewhere: plain causal attention, forward and backward
// (d theta is not compared: causal attention has none).
TEST(ScoreConvReference, IdentityKernelIsCausalAttention) {
    for (auto [cq, ck] : {std::pair{1, 1}, {3, 3}, {6, 11}}) {
        SCOPED_TRACE(std::to_string(cq) + "x" + std::to_string(ck));
        ForwardInputs in = random_inputs(2, 3, 20, 8, 11);
        HostTensor d_o(DType::f32, {2, 3, 20, 8});
        fill_normal(d_o, 14);
        const auto causal_spec = AttentionSpec().dtype(DType::f32).head_dim(8).mask(kv_idx() <= q_idx());
        const BackwardResult causal = backward(causal_spec, in, d_o);
        HostTensor theta(DType::f32, {3, cq, ck});
        for (int64_t h = 0; h < 3; ++h) theta.set({h, cq - 1, (ck - 1) / 2}, 1.0);
        in.tensors.emplace("theta", theta);
        const BackwardResult conv =
            backward(AttentionSpec().dtype(DType::f32).head_dim(8).score_conv("theta", cq, ck), in, d_o, {"theta"});
        EXPECT_LT(max_abs_error(conv.forward.o, causal.forward.o), 1e-12);
        EXPECT_LT(max_abs_error(conv.forward.lse, causal.forward.lse), 1e-12);
        EXPECT_LT(max_abs_error(conv.dq, causal.dq), 1e-12);
        EXPECT_LT(max_abs_error(conv.dk, causal.dk), 1e-12);
        EXPECT_LT(max_abs_error(conv.dv, causal.dv), 1e-12);
        EXPECT_LT(max_abs_error(conv.delta, causal.delta), 1e-12);
    }
}

// A packed sequence of two documents (5 and 7 tokens) with a document mask gives, per
// document, what the document alone gives, forward and backward: the convolution never
// crosses the boundary, and d theta is the sum of the documents'.
TEST(ScoreConvReference, DocumentMaskKeepsTheConvolutionInsideEachDocument) {
    const int64_t n0 = 5, n1 = 7, N = n0 + n1, H = 2, D = 4;
    ForwardInputs packed = random_inputs(1, H, N, D, 21);
    HostTensor theta(DType::f32, {H, 3, 5}), d_o(DType::f32, {1, H, N, D});
    fill_normal(theta, 24);
    fill_normal(d_o, 25);
    HostTensor doc(DType::i32, {1, N});
    for (int64_t j = 0; j < N; ++j) doc.set({0, j}, j < n0 ? 0.0 : 1.0);
    packed.tensors.emplace("theta", theta);
    packed.tensors.emplace("doc", doc);
    const Tensor docs("doc", DType::i32, 2);
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(D).score_conv("theta", 3, 5);
    const BackwardResult whole =
        backward(AttentionSpec(spec).mask(docs(batch(), q_idx()) == docs(batch(), kv_idx())), packed, d_o, {"theta"});
    DoubleTensor dtheta_sum({H, 3, 5});
    for (auto [start, len] : {std::pair{int64_t{0}, n0}, {n0, n1}}) {
        SCOPED_TRACE("document at " + std::to_string(start));
        ForwardInputs alone = random_inputs(1, H, len, D, 0);
        HostTensor d_o_alone(DType::f32, {1, H, len, D});
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < len; ++i)
                for (int64_t d = 0; d < D; ++d) {
                    alone.q.set({0, h, i, d}, packed.q.get({0, h, start + i, d}));
                    alone.k.set({0, h, i, d}, packed.k.get({0, h, start + i, d}));
                    alone.v.set({0, h, i, d}, packed.v.get({0, h, start + i, d}));
                    d_o_alone.set({0, h, i, d}, d_o.get({0, h, start + i, d}));
                }
        alone.tensors.emplace("theta", theta);
        const BackwardResult r = backward(spec, alone, d_o_alone, {"theta"});
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < len; ++i) {
                EXPECT_NEAR(whole.forward.lse.at({0, h, start + i}), r.forward.lse.at({0, h, i}), 1e-12) << h << " " << i;
                for (int64_t d = 0; d < D; ++d) {
                    EXPECT_NEAR(whole.forward.o.at({0, h, start + i, d}), r.forward.o.at({0, h, i, d}), 1e-12);
                    EXPECT_NEAR(whole.dq.at({0, h, start + i, d}), r.dq.at({0, h, i, d}), 1e-12) << h << " " << i;
                    EXPECT_NEAR(whole.dk.at({0, h, start + i, d}), r.dk.at({0, h, i, d}), 1e-12) << h << " " << i;
                    EXPECT_NEAR(whole.dv.at({0, h, start + i, d}), r.dv.at({0, h, i, d}), 1e-12) << h << " " << i;
                }
            }
        for (size_t n = 0; n < dtheta_sum.data.size(); ++n) dtheta_sum.data[n] += r.dtensors.at("theta").data[n];
    }
    EXPECT_LT(max_abs_error(whole.dtensors.at("theta"), dtheta_sum), 1e-11);
}

// The definition written out directly (docs/score_convolution.md, independent of
// reference/score_conv.cpp): whole N x N matrices per head, then C, softcap, sinks, gate.
DoubleTensor direct_output(const ForwardInputs& in, const HostTensor& keep, double cap) {
    const int64_t Hq = in.q.size(1), Nq = in.q.size(2), Nk = in.k.size(2), D = in.q.size(3);
    const HostTensor &theta = in.tensors.at("theta"), &sinks = in.tensors.at("sinks"), &g = in.tensors.at("g");
    const int64_t cq = theta.size(1), ck = theta.size(2), pk = (ck - 1) / 2;
    auto mask = [&](int64_t h, int64_t i, int64_t j) { return keep.get({h, i, j}) != 0; };
    auto keep0 = [&](int64_t h, int64_t i, int64_t j) { return j <= i && mask(h, i, j); };
    DoubleTensor out({1, Hq, Nq, D});
    for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kvh = h / (Hq / in.k.size(1));
        auto s0 = [&](int64_t i, int64_t j) {
            if (i < 0 || i >= Nq || j < 0 || j >= Nk || !keep0(h, i, j)) return 0.0;
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += in.q.get({0, h, i, d}) * in.k.get({0, kvh, j, d});
            return dot / std::sqrt(double(D));
        };
        for (int64_t i = 0; i < Nq; ++i) {
            std::vector<double> z(static_cast<size_t>(Nk), -INFINITY);
            for (int64_t j = 0; j < Nk; ++j) {
                if (!keep0(h, i, j)) continue;
                double c = 0;
                for (int64_t a = 0; a < cq; ++a)
                    for (int64_t b = 0; b < ck; ++b) {
                        const int64_t ii = i - (cq - 1) + a, jj = j - pk + b;
                        const bool taps = jj >= 0 && jj < Nk && ii >= 0 && mask(h, i, jj) && mask(h, ii, j);
                        if (taps) c += theta.get({h, a, b}) * s0(ii, jj);
                    }
                z[j] = cap * std::tanh(c / cap);
            }
            double denom = std::exp(sinks.get({h}));
            for (int64_t j = 0; j < Nk; ++j) denom += std::exp(z[j]);
            for (int64_t d = 0; d < D; ++d) {
                double o = 0;
                for (int64_t j = 0; j < Nk; ++j) o += std::exp(z[j]) / denom * in.v.get({0, kvh, j, d});
                out.at({0, h, i, d}) = o / (1 + std::exp(-g.get({0, h, i, d})));
            }
        }
    }
    return out;
}

// A mask that is no equivalence (random keeps per head): both tap conditions, mask(i, j')
// and mask(i', j), matter on their own (a document mask implies one from the other).
TEST(ScoreConvReference, ArbitraryMaskSoftcapSinksAndGateFollowTheDefinition) {
    const int64_t Hq = 2, Nq = 7, Nk = 9, D = 3;
    Problem p = make(1, Hq, 1, Nq, Nk, D, D, 51);
    HostTensor keep(DType::u8, {Hq, Nq, Nk}), theta(DType::f32, {Hq, 3, 5}), sinks(DType::f32, {Hq}),
        g(DType::f32, {1, Hq, Nq, D});
    fill_uniform_int(keep, 52, 0, 1);
    fill_normal(theta, 53, 0.0, 0.5);
    fill_normal(sinks, 54);
    fill_normal(g, 55);
    for (auto [name, t] : {std::pair{"keep", &keep}, {"theta", &theta}, {"sinks", &sinks}, {"g", &g}})
        p.in.tensors.emplace(name, *t);
    p.in.scalars["cap"] = 2.0;
    const Tensor kt("keep", DType::u8, 3);
    p.spec.score_conv("theta", 3, 5)
        .score_mod(mods::softcap(scalar("cap")))
        .mask(kt(head(), q_idx(), kv_idx()))
        .sinks("sinks")
        .gate("g");
    EXPECT_LT(max_abs_error(forward(p.spec, p.in).o, direct_output(p.in, keep, 2.0)), 1e-12);
    p.wanted = {"theta", "sinks", "g", "cap"};
    check(p);  // and the backward by finite differences
}

TEST(ScoreConvReference, KernelOfTheWrongShapeIsAUserError) {
    ForwardInputs in = random_inputs(1, 2, 6, 4, 31);
    in.tensors.emplace("theta", HostTensor(DType::f32, {2, 3, 3}));
    const auto spec = AttentionSpec().dtype(DType::f32).head_dim(4).score_conv("theta", 3, 5);
    EXPECT_USER_ERROR(forward(spec, in),
                      "reference::forward: the score convolution's kernel 'theta' is f32[2, 3, 3] strides [9, 3, 1]; "
                      "it must be [Hq, c_q, c_k] = [2, 3, 5]");
    HostTensor d_o(DType::f32, {1, 2, 6, 4});
    EXPECT_USER_ERROR(backward(spec, in, d_o), "reference::backward: the score convolution's kernel 'theta' is");
    in.tensors.at("theta") = HostTensor(DType::f32, {2, 15});
    EXPECT_USER_ERROR(forward(spec, in), "the spec reads a f32 tensor of rank 3");
    in.tensors.at("theta") = HostTensor(DType::bf16, {2, 3, 5});
    EXPECT_USER_ERROR(forward(spec, in), "the spec reads a f32 tensor of rank 3");
    in.tensors.erase("theta");
    EXPECT_USER_ERROR(forward(spec, in), "captured tensor 'theta' is read by the spec but not given");
}

}  // namespace
}  // namespace attnjit::reference
