// The bounds pass (codegen/bounds_analysis.h) and its evaluator (codegen/bounds_check.h):
// which programs the pass builds, and what the evaluator makes of them for a launch.
// tests/errors/launch_errors_test.cpp checks the same through check_launch_args.
#include <memory>
#include <sstream>

#include <gtest/gtest.h>

#include "codegen/bounds_analysis.h"
#include "codegen/bounds_check.h"
#include "codegen/interval_core.h"
#include "codegen/lower.h"
#include "dsl/dsl.h"
#include "support/error.h"
#include "tests/common/expect_error.h"

namespace attnjit::codegen {
namespace {

using namespace attnjit::dsl;

// B = 2, Hq = 4, Hkv = 2, Nq = 16, Nk = 32.
LaunchNumbers launch() {
    LaunchNumbers n;
    n.extents = {2, 4, 2, 16, 32};
    return n;
}

TensorExtent contiguous(std::vector<int64_t> shape) {
    TensorExtent t{shape, std::vector<int64_t>(shape.size(), 1)};
    for (size_t i = shape.size() - 1; i-- > 0;) t.strides[i] = t.strides[i + 1] * shape[i + 1];
    return t;
}

void check_score_mod(const Expr& score_mod, const LaunchNumbers& n) {
    check_tensor_reads(analyze_tensor_reads(score_mod, Expr()), n);
}
void check_mask(const Expr& mask, const LaunchNumbers& n) { check_tensor_reads(analyze_tensor_reads(Expr(), mask), n); }

size_t count_steps(const BoundsProgram& p, BoundsProgram::Step::Kind kind) {
    size_t c = 0;
    for (const auto& s : p.steps) c += s.kind == kind;
    return c;
}

// A node of a kind the IR does not list (what a new kind looks like to a pass that was
// not taught it).
struct UnknownNode : ExprNode {
    explicit UnknownNode(Type t) : ExprNode(static_cast<NodeKind>(99), t) {}
};
Expr unknown(Type t) { return Expr(std::make_shared<UnknownNode>(t)); }

TEST(BoundsAnalysis, UnknownNodeKindIsAnInternalErrorNotSkipped) {
    EXPECT_THROW(analyze_tensor_reads(unknown(Type::Float), Expr()), InternalError);
    // Below a known node too: the old hand-written traversal passed over such children.
    const Expr sum = Binary::make(BinaryOp::Add, score(), unknown(Type::Float));
    try {
        analyze_tensor_reads(sum, Expr());
        FAIL() << "an unknown node kind was skipped";
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("has no bounds rule"), std::string::npos) << e.what();
    }
    const Expr mask = Binary::make(BinaryOp::And, kv_idx() < 4, unknown(Type::Bool));
    EXPECT_THROW(analyze_tensor_reads(Expr(), mask), InternalError);
}

TEST(BoundsAnalysis, ProgramHasOneReadPerDimension) {
    Tensor bias("bias", DType::f32, 4);
    const BoundsProgram p = analyze_tensor_reads(score() + bias(batch(), head(), q_idx(), kv_idx()), Expr());
    ASSERT_EQ(count_steps(p, BoundsProgram::Step::Kind::Read), 4u);
    EXPECT_EQ(p.steps[3].tensor, "bias");
    EXPECT_EQ(p.steps[3].dim, 3);
    EXPECT_EQ(p.steps[3].index, "kv_idx");
    EXPECT_TRUE(analyze_tensor_reads(score() * 2.0, q_idx() >= kv_idx()).reads_nothing());
}

TEST(BoundsAnalysis, LowerKeepsTheProgramInThePlanAndPrintsIt) {
    Tensor bias("bias", DType::f32, 4);
    AttentionSpec spec;
    spec.dtype(DType::f16).head_dim(64).score_mod(score() + bias(batch(), head(), q_idx(), kv_idx()));
    const KernelPlan plan = lower(spec);
    EXPECT_EQ(count_steps(plan.inputs.tensor_reads, BoundsProgram::Step::Kind::Read), 4u);
    std::ostringstream s;
    s << plan;
    EXPECT_NE(s.str().find("read bias dim 3"), std::string::npos) << s.str();
}

TEST(BoundsAnalysis, GuardsNarrowInScoreModOnly) {
    Tensor t("t", DType::f32, 1), valid("valid", DType::u8, 1);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({8});
    n.tensors["valid"] = contiguous({8});

    const Expr guarded = select(q_idx() < 8, t(q_idx()), 0.0);
    const BoundsProgram narrowed = analyze_tensor_reads(score() + guarded, Expr());
    EXPECT_EQ(narrowed.domains.size(), 3u);  // the launch, q_idx < 8, q_idx >= 8
    EXPECT_EQ(count_steps(narrowed, BoundsProgram::Step::Kind::Enter), 2u);  // both sides of the select
    EXPECT_NO_THROW(check_tensor_reads(narrowed, n));
    EXPECT_USER_ERROR(check_score_mod(score() + select(q_idx() < 9, t(q_idx()), 0.0), n),
                      "index 0 (q_idx) ranges over [0, 8]");
    // Negated conditions, the false side, && and ! narrow too.
    EXPECT_NO_THROW(check_score_mod(score() + select(q_idx() >= 8, 0.0, t(q_idx())), n));
    EXPECT_NO_THROW(check_score_mod(score() + select(!(q_idx() >= 8), t(q_idx()), 0.0), n));
    EXPECT_NO_THROW(check_score_mod(select(q_idx() < 8 && valid(q_idx()), score(), 0.0), n));
    EXPECT_NO_THROW(check_score_mod(select(q_idx() > 7 || valid(q_idx()), score(), 0.0), n));

    // The same guard in a mask narrows nothing: classify() reads it over whole tiles.
    const BoundsProgram ignored = analyze_tensor_reads(Expr(), q_idx() < 8 && valid(q_idx()));
    EXPECT_EQ(ignored.domains.size(), 1u);
    EXPECT_EQ(count_steps(ignored, BoundsProgram::Step::Kind::Enter), 0u);
    EXPECT_USER_ERROR(check_tensor_reads(ignored, n), "tensor 'valid' has shape [8] but index 0 (q_idx) ranges over [0, 15]");
    n.tensors["valid"] = contiguous({16});
    EXPECT_NO_THROW(check_tensor_reads(ignored, n));
    n.tensors["t"] = contiguous({1});  // a mask's select does not narrow either
    EXPECT_USER_ERROR(check_mask(select(kv_idx() < 1, t(kv_idx()), 0.0) > 0.0, n), "ranges over [0, 31]");
}

TEST(BoundsAnalysis, ReadsOnAnEmptyPathAreSkipped) {
    Tensor t("t", DType::f32, 1);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({1});
    EXPECT_NO_THROW(check_score_mod(score() + select(q_idx() < 0, t(q_idx() + 100), 0.0), n));
    EXPECT_USER_ERROR(check_score_mod(score() + select(q_idx() < 1, t(q_idx() + 100), 0.0), n),
                      "ranges over [100, 100]");
    // Inside an index: the select's range is the side that can happen.
    EXPECT_NO_THROW(check_score_mod(score() + t(select(kv_idx() >= kv_len(), kv_idx(), 0)), n));
}

TEST(BoundsAnalysis, GuardBoundsUseTheLaunchScalars) {
    Tensor t("t", DType::f32, 1);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({4});
    n.scalars["w"] = 4;
    const BoundsProgram p = analyze_tensor_reads(score() + select(kv_idx() < int_scalar("w"), t(kv_idx()), 0.0), Expr());
    EXPECT_NO_THROW(check_tensor_reads(p, n));
    n.scalars["w"] = 5;
    EXPECT_USER_ERROR(check_tensor_reads(p, n), "index 0 (kv_idx) ranges over [0, 4]");
}

TEST(BoundsAnalysis, DataDependentIndexIsOpaqueUnlessBounded) {
    Tensor t("t", DType::f32, 1), doc("doc", DType::i32, 2);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({10});
    n.tensors["doc"] = contiguous({2, 32});
    const Expr d = doc(batch(), kv_idx());
    EXPECT_USER_ERROR(check_score_mod(score() + t(d), n),
                      "tensor 't' has shape [10] but index 0 (doc[b, kv_idx]) depends on values the host cannot "
                      "see (another tensor's elements or a float), so it could read out of bounds; bound it in "
                      "the expression, e.g. clamp(doc[b, kv_idx], 0, 9)");
    EXPECT_NO_THROW(check_score_mod(score() + t(clamp(d, 0, 9)), n));
    // One side bounded: no longer opaque, but still unbounded below.
    EXPECT_USER_ERROR(check_score_mod(score() + t(min(d, 9)), n), "ranges over [-2147483648, 9]");
    // % by a constant bounds it too; C's % keeps the dividend's sign.
    EXPECT_USER_ERROR(check_score_mod(score() + t(d % 10), n), "ranges over [-9, 9]");
    // A float cast to int is opaque as well; arithmetic on an opaque value stays opaque
    // (and is not reported as an overflow).
    EXPECT_USER_ERROR(check_score_mod(score() + t(to_int(score())), n), "depends on values the host cannot see");
    EXPECT_USER_ERROR(check_score_mod(score() + t(d * 100000 * 100000), n), "depends on values the host cannot see");
}

TEST(BoundsAnalysis, IndexArithmeticBeyondInt32IsReported) {
    Tensor t("t", DType::f32, 1);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({int64_t(1) << 40});
    EXPECT_USER_ERROR(check_score_mod(score() + t(q_idx() * 100000 * 100000 + kv_idx()), n),
                      "index expression q_idx * 100000 * 100000 ranges over [0, 150000000000] for these inputs, "
                      "beyond int32, where the GPU computes it");
    n.scalars["s"] = 1000000000;
    const BoundsProgram p = analyze_tensor_reads(score() + t(q_idx() * int_scalar("s")), Expr());
    EXPECT_USER_ERROR(check_tensor_reads(p, n), "beyond int32");
    n.scalars["s"] = 1000;
    EXPECT_NO_THROW(check_tensor_reads(p, n));
    EXPECT_USER_ERROR(check_score_mod(score() + t(-(q_idx() - 2147483647 - 1)), n), "beyond int32");
}

TEST(BoundsAnalysis, DivisionAndAbsolute) {
    Tensor t("t", DType::f32, 1);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({4});
    n.scalars["d"] = 4;
    const BoundsProgram p = analyze_tensor_reads(score() + t(q_idx() / int_scalar("d")), Expr());
    EXPECT_NO_THROW(check_tensor_reads(p, n));
    n.scalars["d"] = 2;
    EXPECT_USER_ERROR(check_tensor_reads(p, n), "index 0 (q_idx / d) ranges over [0, 7]");
    n.scalars["d"] = 0;  // no bound from a zero divisor
    EXPECT_USER_ERROR(check_tensor_reads(p, n), "depends on values the host cannot see");
    EXPECT_USER_ERROR(check_score_mod(score() + t(abs(q_idx() - kv_idx())), n), "ranges over [0, 31]");
}

TEST(BoundsAnalysis, StrideZeroDimensionsBroadcast) {
    Tensor bias("bias", DType::f32, 2);
    LaunchNumbers n = launch();
    n.tensors["bias"] = TensorExtent{{1, 32}, {0, 1}};
    const BoundsProgram p = analyze_tensor_reads(score() + bias(batch(), kv_idx()), Expr());
    EXPECT_NO_THROW(check_tensor_reads(p, n));
    n.tensors["bias"] = TensorExtent{{1, 32}, {32, 1}};
    EXPECT_USER_ERROR(check_tensor_reads(p, n), "tensor 'bias' has shape [1, 32] but index 0 (b) ranges over [0, 1] for "
                                                "these inputs; give dimension 0 at least 2 elements (indices must be >= 0), or "
                                                "stride 0 to broadcast it");
}

TEST(BoundsAnalysis, EmptyLaunchReadsNothing) {
    Tensor t("t", DType::f32, 1);
    LaunchNumbers n = launch();
    n.tensors["t"] = contiguous({1});
    const BoundsProgram p = analyze_tensor_reads(score() + t(q_idx()), Expr());
    EXPECT_THROW(check_tensor_reads(p, n), UserError);
    n.extents.q_len = 0;
    EXPECT_NO_THROW(check_tensor_reads(p, n));
    n.extents = launch().extents;
    n.extents.batch = 0;
    EXPECT_NO_THROW(check_tensor_reads(p, n));
}

// The evaluator needs no IR: a program written by hand runs.
TEST(BoundsCheck, RunsAProgramBuiltWithoutTheIR) {
    BoundsProgram p;
    BoundsProgram::Formula j;
    j.op = BoundsProgram::Op::Var;
    j.var = IndexVar::KvIdx;
    p.formulas.push_back(j);
    BoundsProgram::Formula three;
    three.op = BoundsProgram::Op::Const;
    three.value = 3;
    p.formulas.push_back(three);
    p.domains.push_back({0, {{IndexVar::KvIdx, interval::Cmp::Le, 1}}});  // kv_idx <= 3
    BoundsProgram::Step enter;
    enter.kind = BoundsProgram::Step::Kind::Enter;
    enter.domain = 1;
    enter.skip_to = 2;
    BoundsProgram::Step read;
    read.tensor = "x";
    read.index = "j";
    read.formula = 0;
    p.steps = {enter, read};
    LaunchNumbers n = launch();
    n.tensors["x"] = contiguous({4});
    // The read's formula is in the launch domain: kv_idx in [0, 31].
    EXPECT_USER_ERROR(check_tensor_reads(p, n), "tensor 'x' has shape [4] but index 0 (j) ranges over [0, 31]");
    p.formulas[0].domain = 1;  // read on the guarded path
    EXPECT_NO_THROW(check_tensor_reads(p, n));
    n.tensors.clear();
    EXPECT_THROW(check_tensor_reads(p, n), InternalError);  // presence is the caller's check
}

TEST(IntervalCore, RulesOnNumbers) {
    using interval::IntInterval;
    auto eq = [](IntInterval a, IntInterval b) { return a.lo == b.lo && a.hi == b.hi; };
    EXPECT_TRUE(eq(interval::mul({-2, 3}, {-5, 4}), {-15, 12}));
    EXPECT_TRUE(eq(interval::abs({-7, 3}), {0, 7}));
    EXPECT_TRUE(eq(interval::abs({2, 5}), {2, 5}));
    EXPECT_TRUE(eq(interval::abs({-5, -2}), {2, 5}));
    EXPECT_TRUE(eq(interval::div_by_const({-7, 9}, -2), {-4, 3}));
    EXPECT_TRUE(eq(interval::mod_by_const({0, 3}, 8), {0, 3}));
    EXPECT_TRUE(eq(interval::mod_by_const({-20, -1}, 8), {-7, 0}));
    {
        interval::Int64Arith a;
        EXPECT_TRUE(eq(interval::mod_by_const_signed(a, IntInterval{0, 3}, 8), {0, 7}));
    }
    EXPECT_TRUE(eq(interval::cap_int32({-(1LL << 40), 1LL << 40}), {INT32_MIN, INT32_MAX}));
    EXPECT_TRUE(eq(interval::narrow({0, 31}, interval::Cmp::Lt, {8, 10}), {0, 9}));
    EXPECT_TRUE(eq(interval::narrow({0, 31}, interval::Cmp::Ge, {8, 10}), {8, 31}));
    EXPECT_TRUE(eq(interval::narrow({0, 31}, interval::Cmp::Eq, {8, 10}), {8, 10}));
    EXPECT_TRUE(eq(interval::narrow({0, 31}, interval::Cmp::Ne, {8, 8}), {0, 31}));
}

}  // namespace
}  // namespace attnjit::codegen
