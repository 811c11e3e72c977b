// Pass unit tests in Halide's simplify-test style: input -> expected printed output.
#include <gtest/gtest.h>

#include <limits>

#include "codegen/cse.h"
#include "codegen/hoist.h"
#include "codegen/simplify.h"
#include "dsl/dsl.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

#define EXPECT_SIMPLIFIES(input, expected)                                                        \
    do {                                                                                          \
        Expr in_ = (input);                                                                       \
        std::string out_ = to_string(simplify(in_));                                              \
        EXPECT_EQ(out_, expected) << "Input:           " << in_ << "\nOutput:          " << out_ \
                                  << "\nExpected output: " << expected;                           \
    } while (0)

TEST(Simplify, FoldsConstants) {
    EXPECT_SIMPLIFIES(Expr(2) + 3, "5");
    EXPECT_SIMPLIFIES(Expr(7) / 2, "3");
    EXPECT_SIMPLIFIES(Expr(-7) / 2, "-3");   // C truncation
    EXPECT_SIMPLIFIES(Expr(-7) % 2, "-1");   // sign of the dividend
    EXPECT_SIMPLIFIES(Expr(1) / 0, "1 / 0");  // left for the GPU, never folded
    EXPECT_SIMPLIFIES(Expr(2147483647) + 1, "2147483647 + 1");  // int32 overflow: not folded
    EXPECT_SIMPLIFIES(Expr(1.5) * 2.0, "3.0");
    EXPECT_SIMPLIFIES(min(Expr(3), 4), "3");
    EXPECT_SIMPLIFIES(tanh(Expr(0.0)), "0.0");
    EXPECT_SIMPLIFIES(to_float(Expr(3)), "3.0");
    EXPECT_SIMPLIFIES(to_int(Expr(-2.7)), "-2");
    EXPECT_SIMPLIFIES(Expr(3) < 4, "true");
    EXPECT_SIMPLIFIES(Expr(1.0) == 2.0, "false");
    EXPECT_SIMPLIFIES(!Expr(true), "false");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_SIMPLIFIES(max(Expr(nan), Expr(1.0)), "nan");  // NaN survives min / max
}

TEST(Simplify, ConstantConditions) {
    EXPECT_SIMPLIFIES(select(Expr(true), score(), 0.0), "score");
    EXPECT_SIMPLIFIES(select(Expr(1) > 2, score(), 0.0), "0.0");
    EXPECT_SIMPLIFIES(select(q_idx() < kv_idx(), score(), score()), "score");
    EXPECT_SIMPLIFIES(select(q_idx() < kv_idx(), Expr(true), Expr(false)), "q_idx < kv_idx");
    EXPECT_SIMPLIFIES(select(q_idx() < kv_idx(), Expr(false), Expr(true)), "q_idx >= kv_idx");
    EXPECT_SIMPLIFIES(Expr(true) && q_idx() < 4, "q_idx < 4");
    EXPECT_SIMPLIFIES(q_idx() < 4 && Expr(false), "false");
    EXPECT_SIMPLIFIES(Expr(true) || q_idx() < 4, "true");
    EXPECT_SIMPLIFIES(q_idx() < 4 || Expr(false), "q_idx < 4");
    EXPECT_SIMPLIFIES(q_idx() < 4 && q_idx() < 4, "q_idx < 4");
}

TEST(Simplify, Identities) {
    EXPECT_SIMPLIFIES(q_idx() + 0, "q_idx");
    EXPECT_SIMPLIFIES(q_idx() * 1, "q_idx");
    EXPECT_SIMPLIFIES(q_idx() * 0, "0");
    EXPECT_SIMPLIFIES(q_idx() - q_idx(), "0");
    EXPECT_SIMPLIFIES(q_idx() / 1, "q_idx");
    EXPECT_SIMPLIFIES(q_idx() % 1, "0");
    EXPECT_SIMPLIFIES(score() * 1.0, "score");
    EXPECT_SIMPLIFIES(score() / 1.0, "score");
    EXPECT_SIMPLIFIES(score() - 0.0, "score");
    EXPECT_SIMPLIFIES(-(-score()), "score");
    EXPECT_SIMPLIFIES(!!(q_idx() < kv_idx()), "q_idx < kv_idx");
    EXPECT_SIMPLIFIES(min(score(), score()), "score");
    EXPECT_SIMPLIFIES(max(q_idx(), q_idx()), "q_idx");
    EXPECT_SIMPLIFIES(q_idx() == q_idx(), "true");
    EXPECT_SIMPLIFIES(!(q_idx() < kv_idx()), "q_idx >= kv_idx");
}

TEST(Simplify, KeepsFloatSemantics) {
    // NaN * 0 is NaN and inf - inf is NaN: neither may become 0.
    EXPECT_SIMPLIFIES(score() * 0.0, "score * 0.0");
    EXPECT_SIMPLIFIES(score() - score(), "score - score");
    // -0.0 + 0.0 is +0.0, so x + 0.0 is not x.
    EXPECT_SIMPLIFIES(score() + 0.0, "score + 0.0");
    // !(x < y) is not x >= y when x is NaN.
    EXPECT_SIMPLIFIES(!(score() < 1.0), "!(score < 1.0)");
    EXPECT_SIMPLIFIES(score() == score(), "score == score");
    // No float reassociation.
    EXPECT_SIMPLIFIES((score() + 1.0) + 2.0, "score + 1.0 + 2.0");
}

TEST(Simplify, CanonicalOrder) {
    EXPECT_SIMPLIFIES(Expr(2) * q_idx(), "q_idx * 2");
    EXPECT_SIMPLIFIES(Expr(2.0) + score(), "score + 2.0");
    EXPECT_SIMPLIFIES(Expr(0) <= q_idx() - kv_idx(), "q_idx - kv_idx >= 0");
    EXPECT_SIMPLIFIES(Expr(3) > kv_idx(), "kv_idx < 3");
    EXPECT_SIMPLIFIES(Expr(5) - q_idx(), "5 - q_idx");  // not commutative: unchanged
    // Int constants collect on the right.
    EXPECT_SIMPLIFIES((q_idx() + 3) + 4, "q_idx + 7");
    EXPECT_SIMPLIFIES((q_idx() + 3) - 5, "q_idx - 2");
    EXPECT_SIMPLIFIES((q_idx() - 3) + 3, "q_idx");
    EXPECT_SIMPLIFIES(Expr(1) + (q_idx() + 1), "q_idx + 2");
}

TEST(Simplify, RecursesIntoTensorIndices) {
    Tensor t("t", DType::f32, 2);
    EXPECT_SIMPLIFIES(t(head() * 1, kv_idx() + 0) + 0.0 * 1.0, "t[h, kv_idx] + 0.0");
}

TEST(Simplify, UnchangedExpressionsStayShared) {
    Expr e = score() + q_idx();
    EXPECT_TRUE(simplify(e).same_as(e));
}

std::string print(const CseResult& r) {
    std::string s;
    for (const auto& b : r.bindings) s += b.name + " = " + to_string(b.value) + "; ";
    for (const auto& e : r.results) s += "-> " + (e.defined() ? to_string(e) : std::string("none")) + "; ";
    return s;
}

TEST(Cse, SharesRepeatedSubexpressionsInFirstUseOrder) {
    Expr d = q_idx() - kv_idx();
    Expr mask = d >= 0 && d < 8;
    EXPECT_EQ(print(cse({Expr(), mask})), "t0 = q_idx - kv_idx; -> none; -> t0 >= 0 && t0 < 8; ");
}

TEST(Cse, RepeatedSubtreeDoesNotAlsoBindItsParts) {
    Expr inner = score() / 30.0;
    Expr big = tanh(inner) * tanh(inner);
    EXPECT_EQ(print(cse({big})), "t0 = tanh(score / 30.0); -> t0 * t0; ");
}

TEST(Cse, SharesAcrossScoreModAndMask) {
    Tensor doc("doc", DType::i32, 2);
    Expr sm = score() + to_float(doc(batch(), kv_idx()));
    Expr mask = doc(batch(), kv_idx()) > 0;
    EXPECT_EQ(print(cse({sm, mask})), "t0 = doc[b, kv_idx]; -> score + float(t0); -> t0 > 0; ");
}

TEST(Cse, InnerBindingsComeFirst) {
    Expr a = q_idx() * 2;
    Expr b = a + kv_idx();
    EXPECT_EQ(print(cse({b * b + to_float(a)})),
              "t0 = q_idx * 2; t1 = t0 + kv_idx; -> float(t1 * t1) + float(t0); ");
}

TEST(Cse, NeverLiftsAGuardedLoadOutOfItsSelect) {
    Tensor t("t", DType::f32, 1);
    Expr guarded = select(kv_idx() < 4, t(kv_idx()), 0.0);
    EXPECT_EQ(print(cse({guarded + guarded * 2.0})),
              "t0 = select(kv_idx < 4, t[kv_idx], 0.0); -> t0 + t0 * 2.0; ");
    // The load repeats inside both branches only: it stays where it is.
    Expr two = select(kv_idx() < 4, t(kv_idx()) * 2.0, t(kv_idx()));
    EXPECT_EQ(print(cse({two})), "-> select(kv_idx < 4, t[kv_idx] * 2.0, t[kv_idx]); ");
    // Speculatable arithmetic may be shared out of branches.
    Expr s = select(kv_idx() < 4, score() * 2.0 + 1.0, score() * 2.0);
    EXPECT_EQ(print(cse({s})), "t0 = score * 2.0; -> select(kv_idx < 4, t0 + 1.0, t0); ");
}

TEST(Cse, NeverLiftsAGuardedLoadOrDivisionOutOfAShortCircuit) {
    // && and || only evaluate their right operand when the left does not decide: the
    // right operand is guarded like a select branch.
    Tensor dq("dq", DType::i32, 2);
    Tensor valid("valid", DType::u8, 1);
    Expr guarded = kv_idx() < 4 && valid(kv_idx());
    EXPECT_EQ(print(cse({guarded || valid(kv_idx())})),
              "-> kv_idx < 4 && valid[kv_idx] || valid[kv_idx]; ");
    Expr d = int_scalar("d");
    Expr div = d != 0 && (kv_idx() < q_idx() / d || kv_idx() > q_idx() / d * 2);
    EXPECT_EQ(print(cse({div})), "-> d != 0 && (kv_idx < q_idx / d || kv_idx > q_idx / d * 2); ");
    Expr mod = d == 0 || (kv_idx() % d == 0 && q_idx() % d == kv_idx() % d);
    EXPECT_EQ(print(cse({mod})), "-> d == 0 || kv_idx % d == 0 && q_idx % d == kv_idx % d; ");
    // An unguarded occurrence makes the shared value safe to compute up front.
    Expr row = dq(batch(), q_idx());
    EXPECT_EQ(print(cse({row >= 0 && valid(row) && row < kv_idx(), row > kv_idx()})),
              "t0 = dq[b, q_idx]; -> t0 >= 0 && valid[t0] && t0 < kv_idx; -> t0 > kv_idx; ");
    // Speculatable arithmetic is still shared out of the right operand.
    Expr s = q_idx() - kv_idx();
    EXPECT_EQ(print(cse({d != 0 && s < d && s > 0})), "t0 = q_idx - kv_idx; -> d != 0 && t0 < d && t0 > 0; ");
}

TEST(Cse, TrivialLeavesAreNeverBound) {
    EXPECT_EQ(print(cse({score() * score()})), "-> score * score; ");
}

std::string print(const HoistResult& r) {
    std::string s;
    for (const Bindings* bs : {&r.head, &r.row, &r.element})
        for (const auto& b : *bs) s += b.name + " = " + to_string(b.value) + "; ";
    for (const auto& e : r.results) s += "-> " + (e.defined() ? to_string(e) : std::string("none")) + "; ";
    return s;
}

HoistResult hoist_exprs(const std::vector<Expr>& exprs) {
    CseResult c = cse(exprs);
    return hoist(c.bindings, c.results);
}

TEST(Hoist, AlibiSlopeIsHeadLevel) {
    Tensor slopes("slopes", DType::f32, 1);
    EXPECT_EQ(print(hoist_exprs({simplify(mods::alibi(slopes))})),
              "h0 = slopes[h]; -> score + h0 * float(kv_idx - q_idx); ");
}

TEST(Hoist, BottomRightCausalSplitsHeadAndRow) {
    HoistResult r = hoist_exprs({simplify(mods::causal(mods::CausalAlign::BottomRight))});
    EXPECT_EQ(print(r), "h0 = kv_len - q_len; r0 = q_idx + h0; -> r0 - kv_idx >= 0; ");
    ASSERT_EQ(r.head.size(), 1u);
    EXPECT_EQ(r.head[0].level, Level::Head);
    ASSERT_EQ(r.row.size(), 1u);
    EXPECT_EQ(r.row[0].level, Level::Row);
}

TEST(Hoist, DocumentMaskLoadsTheQueryDocOncePerRow) {
    Tensor doc("doc", DType::i32, 2);
    EXPECT_EQ(print(hoist_exprs({mods::document_mask(doc)})), "r0 = doc[b, q_idx]; -> r0 == doc[b, kv_idx]; ");
}

TEST(Hoist, CseBindingsKeepTheirLevel) {
    Tensor w("w", DType::f32, 1);
    Expr hw = w(head()) * 2.0;
    Expr e = score() * hw + hw * to_float(q_idx());
    EXPECT_EQ(print(hoist_exprs({e})), "h0 = w[h] * 2.0; r0 = h0 * float(q_idx); -> score * h0 + r0; ");
}

TEST(Hoist, SharedElementBindingReadsAHeadField) {
    Tensor w("w", DType::f32, 1);
    Expr sm = score() + w(head()) * to_float(kv_idx());
    Expr mask = w(head()) * to_float(kv_idx()) > 0.0;  // (the mask never reads the score)
    HoistResult r = hoist_exprs({sm, mask});
    EXPECT_EQ(print(r), "h0 = w[h]; t0 = h0 * float(kv_idx); -> score + t0; -> t0 > 0.0; ");
}

TEST(Hoist, EqualInvariantsShareAField) {
    Tensor w("w", DType::f32, 1);
    Expr e = score() * w(head()) + to_float(kv_idx()) * w(head()) * 0.5;
    EXPECT_EQ(print(hoist_exprs({e})), "h0 = w[h]; -> score * h0 + float(kv_idx) * h0 * 0.5; ");
}

TEST(Hoist, ScalarsAndVariablesStayInPlace) {
    EXPECT_EQ(print(hoist_exprs({scalar("cap") * tanh(score() * scalar("cap"))})), "-> cap * tanh(score * cap); ");
}

// Softcap's score / cap: one division a head (a field holding 1 / cap), not one a score.
TEST(Hoist, DivisionByAnInvariantBecomesAReciprocalField) {
    EXPECT_EQ(print(hoist_exprs({scalar("cap") * tanh(score() / scalar("cap"))})),
              "h0 = 1.0 / cap; -> cap * tanh(score * h0); ");
    EXPECT_EQ(print(hoist_exprs({score() / 4.0})), "-> score * 0.25; ");
    const Expr per_row = score() / to_float(q_idx() + 1);
    EXPECT_EQ(print(hoist_exprs({per_row})), "r0 = 1.0 / float(q_idx + 1); -> score * r0; ");
    const Expr per_element = score() / to_float(kv_idx() + 1);  // the divisor varies per score: kept
    EXPECT_EQ(print(hoist_exprs({per_element})), "-> score / float(kv_idx + 1); ");
}

TEST(Hoist, GuardedDivisionByATensorStaysADivision) {
    // The load may only run where the select takes its branch: no field, no reciprocal (this
    // recursed without end once: the rewrite made a new division by the same load).
    Tensor t("t", DType::f32, 1);
    EXPECT_EQ(print(hoist_exprs({select(q_idx() < 4, score() / t(0), score())})),
              "r0 = q_idx < 4; -> select(r0, score / t[0], score); ");
    // Unguarded, the same division becomes a head-level reciprocal.
    EXPECT_EQ(print(hoist_exprs({score() / t(0)})), "h0 = 1.0 / t[0]; -> score * h0; ");
}

TEST(Hoist, GuardedLoadsStayUnderTheirGuard) {
    Tensor t("t", DType::f32, 1);
    Expr e = select(head() < 4, score() + t(head()), score());
    EXPECT_EQ(print(hoist_exprs({e})), "h0 = h < 4; -> select(h0, score + t[h], score); ");
}

TEST(Hoist, GuardedLoadsStayUnderTheirShortCircuit) {
    // dq[b, q_idx] is row level, but valid[...] may only be read where the guard holds:
    // valid[...] must not move into make_row (it would read rows whose guard is false).
    Tensor dq("dq", DType::i32, 2);
    Tensor valid("valid", DType::u8, 1);
    Expr row = dq(batch(), q_idx());
    EXPECT_EQ(print(hoist_exprs({row >= kv_idx() && valid(row)})), "r0 = dq[b, q_idx]; -> r0 >= kv_idx && valid[r0]; ");
    EXPECT_EQ(print(hoist_exprs({kv_idx() < 8 || valid(row)})), "-> kv_idx < 8 || valid[dq[b, q_idx]]; ");
    // A guard that is itself row level: the whole && moves, keeping its short-circuit.
    EXPECT_EQ(print(hoist_exprs({row >= 0 && valid(row) && kv_idx() < 8})),
              "r0 = dq[b, q_idx] >= 0 && valid[dq[b, q_idx]]; -> r0 && kv_idx < 8; ");
    // Head level: the guarded load of a head value stays per element too.
    Tensor t("t", DType::f32, 1);
    EXPECT_EQ(print(hoist_exprs({kv_idx() < 4 && t(head()) > 0.0})), "-> kv_idx < 4 && t[h] > 0.0; ");
}

TEST(Hoist, GuardedIntDivisionStaysUnderItsShortCircuit) {
    Expr d = int_scalar("d");
    // q_idx / d is row level; hoisting it into make_row would divide by zero when d == 0.
    EXPECT_EQ(print(hoist_exprs({d != 0 && kv_idx() < q_idx() / d})), "h0 = d != 0; -> h0 && kv_idx < q_idx / d; ");
    EXPECT_EQ(print(hoist_exprs({d == 0 || kv_idx() % d == q_idx() % d})), "h0 = d == 0; -> h0 || kv_idx % d == q_idx % d; ");
    // Speculatable row-level parts of a guarded operand still move.
    EXPECT_EQ(print(hoist_exprs({d != 0 && kv_idx() < (q_idx() + 1) * d})),
              "h0 = d != 0; r0 = (q_idx + 1) * d; -> h0 && kv_idx < r0; ");
}

TEST(Hoist, LevelOf) {
    Bindings none;
    EXPECT_EQ(level_of(batch() + head(), none), Level::Head);
    EXPECT_EQ(level_of(q_len() - kv_len(), none), Level::Head);
    EXPECT_EQ(level_of(q_idx() + 1, none), Level::Row);
    EXPECT_EQ(level_of(kv_idx() + q_idx(), none), Level::Element);
    EXPECT_EQ(level_of(score(), none), Level::Element);
}

}  // namespace
}  // namespace attnjit::codegen
