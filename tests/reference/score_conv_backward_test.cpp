// The score convolution's fp64 backward (reference/score_conv.h) against central finite
// differences of the forward, in every element of q, k, v, theta, the gate, the sinks and
// score_mod's captured tensors and scalars; f32 inputs (the reference is then nearly
// exact), GQA, Nq != Nk, with and without a score_mod and a document mask; one thread and
// three (finite_differences.h).
#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "finite_differences.h"
#include "reference/attention_backward.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;
using namespace attnjit::reference::fd;

// theta [Hq, c_q, c_k] ~ N(0, 0.5) by default: scores stay O(1), so central differences stay accurate.
void add_conv(Problem& p, int64_t Hq, int cq, int ck, uint64_t seed, double stddev = 0.5) {
    p.spec.score_conv("theta", cq, ck);
    p.in.tensors.emplace("theta", HostTensor(DType::f32, {Hq, cq, ck}));
    fill_normal(p.in.tensors.at("theta"), seed, 0.0, stddev);
    p.wanted.insert("theta");
}

void add_gate(Problem& p, uint64_t seed) {
    const HostTensor& q = p.in.q;
    p.spec.gate("gate");
    p.in.tensors.emplace("gate", HostTensor(DType::f32, {q.size(0), q.size(1), q.size(2), p.in.v.size(3)}));
    fill_normal(p.in.tensors.at("gate"), seed, 0.0, 2.0);
    p.wanted.insert("gate");
}

// Two documents per batch row: queries [0, q_split) and keys [0, kv_split) are document 0.
void add_documents(Problem& p, int64_t q_split, int64_t kv_split) {
    const int64_t B = p.in.q.size(0), Nq = p.in.q.size(2), Nk = p.in.k.size(2);
    HostTensor q_doc(DType::i32, {B, Nq}), kv_doc(DType::i32, {B, Nk});
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t i = 0; i < Nq; ++i) q_doc.set({b, i}, i < q_split ? 0.0 : 1.0);
        for (int64_t j = 0; j < Nk; ++j) kv_doc.set({b, j}, j < kv_split ? 0.0 : 1.0);
    }
    p.in.tensors.emplace("q_doc", q_doc);
    p.in.tensors.emplace("kv_doc", kv_doc);
    const Tensor qd("q_doc", DType::i32, 2), kd("kv_doc", DType::i32, 2);
    p.spec.mask(qd(batch(), q_idx()) == kd(batch(), kv_idx()));
}

void add_softcap(Problem& p) {
    p.spec.score_mod(mods::softcap(scalar("cap")));
    p.in.scalars["cap"] = 2.0;  // small: tanh far from linear
    p.wanted.insert("cap");
}

TEST(ScoreConvBackward, PlainRaggedGqa) {
    Problem p = make(1, 4, 2, 6, 8, 3, 2, 101);
    add_conv(p, 4, 3, 3, 102);
    check(p);
}

TEST(ScoreConvBackward, Softcap) {
    Problem p = make(2, 2, 1, 7, 5, 3, 3, 111);
    add_conv(p, 2, 2, 5, 112);
    add_softcap(p);
    check(p);
}

TEST(ScoreConvBackward, DocumentMask) {
    Problem p = make(1, 2, 2, 7, 9, 3, 2, 121);
    add_conv(p, 2, 3, 3, 122);
    add_documents(p, 4, 4);
    check(p);
}

TEST(ScoreConvBackward, DocumentMaskSoftcapAndGate) {
    Problem p = make(1, 2, 1, 7, 9, 3, 3, 131);
    add_conv(p, 2, 3, 3, 132);
    add_documents(p, 4, 4);
    add_softcap(p);
    add_gate(p, 133);
    check(p);
}

// The paper's 6 x 11 kernel on a sequence shorter than it: most taps fall outside.
TEST(ScoreConvBackward, PaperKernelOnAShortSequence) {
    Problem p = make(1, 1, 1, 8, 8, 2, 2, 141);
    add_conv(p, 1, 6, 11, 142, 0.2);
    check(p);
}

// Sinks join the denominator (d sinks too), with a gate.
TEST(ScoreConvBackward, SinksAndGate) {
    Problem p = make(1, 2, 1, 5, 6, 3, 2, 151);
    add_conv(p, 2, 2, 3, 152);
    add_gate(p, 153);
    p.spec.sinks("sinks");
    p.in.tensors.emplace("sinks", HostTensor(DType::f32, {2}));
    fill_normal(p.in.tensors.at("sinks"), 154, 0.5, 1.0);
    p.wanted.insert("sinks");
    check(p);
}

// score_mod's own captured tensors and scalars: a bias broadcast over the batch (its
// gradient sums the batch) and a scalar weight, read at the convolved score's (i, j).
TEST(ScoreConvBackward, ScoreModTensorAndScalarGradients) {
    const int64_t B = 2, H = 2, Nq = 5, Nk = 6;
    Problem p = make(B, H, 1, Nq, Nk, 2, 2, 161);
    add_conv(p, H, 3, 3, 162);
    const Tensor bias("bias", DType::f32, 4);
    p.spec.score_mod(tanh(score()) * scalar("w") + bias(batch(), head(), q_idx(), kv_idx()));
    p.in.tensors.emplace("bias", HostTensor(DType::f32, {1, H, Nq, Nk}, {0, Nq * Nk, Nk, 1}));
    fill_normal(p.in.tensors.at("bias"), 163);
    p.in.scalars["w"] = 1.5;
    p.wanted.insert("bias");
    p.wanted.insert("w");
    check(p);
}

TEST(ScoreConvBackward, SameBitsForTheSameThreadCount) {
    Problem p = make(2, 2, 1, 6, 6, 3, 3, 171);
    add_conv(p, 2, 3, 5, 172);
    add_gate(p, 173);
    const BackwardResult a = backward(p.spec, p.in, p.d_o, p.wanted, 2);
    const BackwardResult b = backward(p.spec, p.in, p.d_o, p.wanted, 2);
    EXPECT_EQ(a.dq.data, b.dq.data);
    EXPECT_EQ(a.dk.data, b.dk.data);
    EXPECT_EQ(a.dtensors.at("theta").data, b.dtensors.at("theta").data);
    EXPECT_EQ(a.dtensors.at("gate").data, b.dtensors.at("gate").data);
}

}  // namespace
}  // namespace attnjit::reference
