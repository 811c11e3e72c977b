// The fp64 backward reference against central finite differences of the forward
// reference: loss = sum(O * dO), every element of q, k, v, of each captured tensor that
// needs a gradient and each such scalar, on small ragged problems (Nq != Nk, GQA,
// Dqk != Dv, a broadcast bias, a fully masked row).
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "finite_differences.h"
#include "reference/attention_backward.h"
#include "support/exceptions.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;
using namespace attnjit::reference::fd;

TEST(BackwardReference, PlainRaggedGqaWithUnequalHeadDims) {
    Problem p = make(2, 4, 2, 3, 5, 3, 4, 11);
    check(p);
}

TEST(BackwardReference, CausalAlibiWithSlopeGradients) {
    Problem p = make(1, 2, 1, 4, 6, 3, 3, 21);
    Tensor slopes("slopes", DType::f32, 1);
    p.spec.score_mod(mods::alibi(slopes)).mask(mods::causal(mods::CausalAlign::BottomRight));
    p.in.tensors.emplace("slopes", HostTensor(DType::f32, {2}));
    fill_normal(p.in.tensors.at("slopes"), 5, 0.0, 0.3);
    p.wanted = {"slopes"};
    check(p);
}

TEST(BackwardReference, SoftcapScalarGradient) {
    Problem p = make(1, 2, 2, 3, 4, 3, 2, 31);
    p.spec.score_mod(mods::softcap(scalar("cap"))).scale(1.5);
    p.in.scalars["cap"] = 1.25;  // small: tanh far from linear
    p.wanted = {"cap"};
    check(p);
}

// score + bias[b][h][i][j] with a [1, H, Nq, Nk] bias broadcast over the batch (stride 0).
void add_broadcast_bias(Problem& p, int64_t H, int64_t Nq, int64_t Nk, uint64_t seed) {
    Tensor bias("bias", DType::f32, 4);
    p.spec.score_mod(mods::bias(bias));
    p.in.tensors.emplace("bias", HostTensor(DType::f32, {1, H, Nq, Nk}, {0, Nq * Nk, Nk, 1}));
    fill_normal(p.in.tensors.at("bias"), seed);
    p.wanted = {"bias"};
}

// The broadcast bias's gradient is summed over the batch.
TEST(BackwardReference, BroadcastBiasGradientSumsTheBatch) {
    Problem p = make(3, 2, 2, 3, 4, 2, 2, 41);
    add_broadcast_bias(p, 2, 3, 4, 7);
    check(p);
}

// Two reads of one table per score (j - i and i - j): the reads' partials add.
TEST(BackwardReference, RelativePositionTableReadTwice) {
    Problem p = make(1, 2, 1, 4, 4, 2, 2, 51);
    Tensor table("table", DType::f32, 2);
    p.spec.score_mod(mods::relative_position_bias(table, 2) +
                     tanh(score()) * table(head(), clamp(q_idx() - kv_idx(), -2, 2) + 2));
    p.in.tensors.emplace("table", HostTensor(DType::f32, {2, 5}));
    fill_normal(p.in.tensors.at("table"), 9);
    p.wanted = {"table"};
    check(p);
}

// Row 0 keeps no key (j < i never holds for i = 0): its gradients are zero, not NaN.
TEST(BackwardReference, FullyMaskedRowHasZeroGradients) {
    Problem p = make(1, 1, 1, 3, 3, 2, 2, 61);
    p.spec.mask(kv_idx() < q_idx());
    const BackwardResult g = backward(p.spec, p.in, p.d_o);
    for (int64_t d = 0; d < 2; ++d) EXPECT_EQ(g.dq.at({0, 0, 0, d}), 0.0);
    EXPECT_EQ(g.forward.lse.at({0, 0, 0}), -std::numeric_limits<double>::infinity());
    check(p);
}

// Attention sinks: d sinks (and dQ, dK, dV through an LSE that includes the sink) against
// finite differences, ragged GQA, a row that keeps no key (its LSE is the sink: it still
// adds to d sinks), a score_mod and the softmax scale in play.
void add_sinks(Problem& p, int64_t Hq, uint64_t seed, DType dtype = DType::f32) {
    p.spec.sinks("sinks", dtype);
    p.in.tensors.emplace("sinks", HostTensor(dtype, {Hq}));
    fill_normal(p.in.tensors.at("sinks"), seed, 0.5, 1.0);
    p.wanted.insert("sinks");
}

TEST(BackwardReference, SinksRaggedGqaWithAnEmptyRow) {
    Problem p = make(2, 4, 2, 4, 3, 3, 2, 91);
    p.spec.mask(kv_idx() < q_idx());  // row 0 keeps no key
    add_sinks(p, 4, 13);
    check(p);
    const BackwardResult g = backward(p.spec, p.in, p.d_o, p.wanted);
    for (int64_t h = 0; h < 4; ++h) {
        EXPECT_DOUBLE_EQ(g.forward.lse.at({1, h, 0}), p.in.tensors.at("sinks").get({h})) << "LSE of an empty row";
        for (int64_t d = 0; d < 2; ++d) EXPECT_EQ(g.forward.o.at({1, h, 0, d}), 0.0);
    }
}

TEST(BackwardReference, SinksWithSoftcapAndScale) {
    Problem p = make(1, 2, 1, 3, 5, 2, 3, 93);
    p.spec.score_mod(mods::softcap(scalar("cap"))).scale(0.7);
    p.in.scalars["cap"] = 2.0;
    add_sinks(p, 2, 17);
    p.wanted.insert("cap");
    check(p);
}

// The definition, by hand for one row: the sink joins the denominator and takes no value.
TEST(ForwardReference, SinksJoinTheDenominator) {
    Problem p = make(1, 1, 1, 1, 3, 2, 2, 95);
    add_sinks(p, 1, 19);
    const double sink = p.in.tensors.at("sinks").get({0});
    const ForwardResult f = forward(p.spec, p.in);
    const double scale = 1 / std::sqrt(2.0);
    double t[3], denom = std::exp(sink);
    for (int64_t j = 0; j < 3; ++j) {
        t[j] = 0;
        for (int64_t d = 0; d < 2; ++d) t[j] += scale * p.in.q.get({0, 0, 0, d}) * p.in.k.get({0, 0, j, d});
        denom += std::exp(t[j]);
    }
    EXPECT_NEAR(f.lse.at({0, 0, 0}), std::log(denom), 1e-12);
    for (int64_t d = 0; d < 2; ++d) {
        double o = 0;
        for (int64_t j = 0; j < 3; ++j) o += std::exp(t[j]) / denom * p.in.v.get({0, 0, j, d});
        EXPECT_NEAR(f.o.at({0, 0, 0, d}), o, 1e-12);
    }
    // A sink of -inf is no sink.
    p.in.tensors.at("sinks").set({0}, -std::numeric_limits<double>::infinity());
    const ForwardResult none = forward(p.spec, p.in);
    Problem plain = make(1, 1, 1, 1, 3, 2, 2, 95);
    const ForwardResult ref = forward(plain.spec, plain.in);
    EXPECT_EQ(none.lse.data, ref.lse.data);
    EXPECT_EQ(none.o.data, ref.o.data);
    const BackwardResult g = backward(p.spec, p.in, p.d_o, {"sinks"});
    EXPECT_EQ(g.dtensors.at("sinks").at({0}), 0.0);
}

TEST(BackwardReference, SinksOfTheWrongShapeAreAUserError) {
    Problem p = make(1, 2, 2, 2, 2, 2, 2, 97);
    add_sinks(p, 3, 1);
    EXPECT_THROW(forward(p.spec, p.in), UserError);
}

TEST(BackwardReference, SameBitsForTheSameThreadCount) {
    Problem p = make(2, 2, 1, 5, 7, 3, 3, 71);
    add_broadcast_bias(p, 2, 5, 7, 3);
    const BackwardResult a = backward(p.spec, p.in, p.d_o, {"bias"}, 2);
    const BackwardResult b = backward(p.spec, p.in, p.d_o, {"bias"}, 2);
    EXPECT_EQ(a.dq.data, b.dq.data);
    EXPECT_EQ(a.dk.data, b.dk.data);
    EXPECT_EQ(a.dtensors.at("bias").data, b.dtensors.at("bias").data);
}

TEST(BackwardReference, BadGradientOutputIsAUserError) {
    Problem p = make(1, 1, 1, 2, 2, 2, 2, 81);
    HostTensor wrong(DType::f32, {1, 1, 2, 3});
    try {
        backward(p.spec, p.in, wrong);
        FAIL() << "no error";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("d_o is f32[1, 1, 2, 3]"), std::string::npos) << e.what();
    }
    Tensor ids("ids", DType::i32, 1);
    p.spec.score_mod(score() + to_float(ids(kv_idx())));
    p.in.tensors.emplace("ids", HostTensor(DType::i32, {2}));
    EXPECT_THROW(backward(p.spec, p.in, p.d_o, {"ids"}), UserError);
}

// An output gate (out = sigmoid(gate) * O): dq, dk, dv and d gate by finite differences,
// with ragged GQA, a score_mod and a mask, so dO * sigmoid(gate) reaches every path.
TEST(BackwardReference, GateGradientsByFiniteDifferences) {
    Problem p = make(2, 4, 2, 5, 7, 8, 6, 71);
    p.spec.score_mod(mods::softcap(scalar("cap"))).mask(kv_idx() <= q_idx() + 2).gate("gate");
    p.in.scalars["cap"] = 2.0;
    HostTensor gate(DType::f32, {2, 4, 5, 6});
    fill_normal(gate, 72, 0.0, 2.0);
    p.in.tensors.emplace("gate", std::move(gate));
    p.wanted = {"gate", "cap"};
    check(p);
}

// The gated forward is sigmoid(gate) times the ungated one, element by element.
TEST(ForwardReference, GateScalesTheOutput) {
    Problem p = make(1, 2, 2, 4, 6, 8, 8, 81);
    const ForwardResult plain = forward(p.spec, p.in);
    HostTensor gate(DType::f32, {1, 2, 4, 8});
    fill_normal(gate, 82, 0.0, 2.0);
    p.spec.gate("g");
    p.in.tensors.emplace("g", gate);
    const ForwardResult gated = forward(p.spec, p.in);
    int64_t n = 0;
    gate.for_each_index([&](const int64_t* idx) {
        const double want = plain.o.data[static_cast<size_t>(n)] / (1.0 + std::exp(-gate.get(idx)));
        EXPECT_NEAR(gated.o.data[static_cast<size_t>(n)], want, 1e-12 * (1 + std::fabs(want)));
        ++n;
    });
    EXPECT_EQ(gated.lse.data, plain.lse.data);  // LSE is the ungated softmax's
}

TEST(ForwardReference, GateOfTheWrongShapeIsAUserError) {
    Problem p = make(1, 2, 2, 4, 6, 8, 8, 91);
    p.spec.gate("g");
    p.in.tensors.emplace("g", HostTensor(DType::f32, {1, 2, 4, 4}));
    try {
        forward(p.spec, p.in);
        FAIL() << "no error";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("the gate tensor 'g' is"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("[B, Hq, Nq, Dv] = [1, 2, 4, 8]"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace attnjit::reference
