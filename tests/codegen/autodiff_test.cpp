// The autodiff pass against central finite differences of the interpreter (dsl/interpreter.h):
// every rule of codegen/autodiff.h, the ready-made modifiers, random smooth expressions,
// the conventions at kinks (abs, min, max, pow), and the user errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "codegen/autodiff.h"
#include "codegen/simplify.h"
#include "dsl/dsl.h"
#include "dsl/equality.h"
#include "dsl/interpreter.h"
#include "dsl/limits.h"
#include "dsl/printer.h"
#include "support/exceptions.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

// A point to evaluate at: the score, the indices, scalars, and row-major f32 tensors
// t [9] and r [3][9].
struct Point {
    Env env;
    std::map<std::string, std::vector<double>> tensors;
    std::map<std::string, std::vector<long long>> dims;

    Point() {
        env.load = [this](const std::string& name, const long long* idx, int rank) {
            const auto& d = dims.at(name);
            long long flat = 0;
            for (int r = 0; r < rank; ++r) flat = flat * d[static_cast<size_t>(r)] + idx[r];
            return tensors.at(name).at(static_cast<size_t>(flat));
        };
    }
    // The flat element a read at this point touches.
    size_t element(const Expr& read) const {
        const auto* t = read.as<TensorLoad>();
        const auto& d = dims.at(t->name);
        long long flat = 0;
        for (size_t r = 0; r < t->indices.size(); ++r) flat = flat * d[r] + interpret_int(t->indices[r], env);
        return static_cast<size_t>(flat);
    }
};

double eval(const Expr& e, const Point& p) { return interpret_float(e, p.env); }

// Central difference of e in the value `x` points at, with step h * max(1, |x|).
double central(const Expr& e, Point& p, double& x, double h = 1e-6) {
    const double x0 = x, step = h * std::max(1.0, std::fabs(x0));
    x = x0 + step;
    const double up = eval(e, p);
    x = x0 - step;
    const double down = eval(e, p);
    x = x0;
    return (up - down) / (2 * step);
}

void expect_close(double got, double want, const std::string& what) {
    ASSERT_FALSE(std::isnan(got)) << what;
    EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << what;
}

// d e / d s against the finite difference at the point.
void check_d_score(const Expr& e, Point& p) {
    const Expr d = simplify(derivative(e, score()));
    expect_close(eval(d, p), central(e, p, p.env.score), "d/ds of " + to_string(e) + " = " + to_string(d));
}

Point point(double s) {
    Point p;
    p.env.score = s;
    p.env.b = 1;
    p.env.h = 2;
    p.env.kv_head = 1;
    p.env.q_idx = 5;
    p.env.kv_idx = 3;
    p.env.q_len = 9;
    p.env.kv_len = 7;
    p.env.scalars = {{"c", 1.7}, {"w", 3.0}, {"n", 4.0}};
    p.tensors["t"] = {0.3, -1.2, 0.8, 2.1, -0.4, 1.1, 0.6, -0.9, 1.4};
    p.dims["t"] = {9};
    for (int k = 0; k < 27; ++k) p.tensors["r"].push_back(0.1 * k - 1.3);  // [3][9]
    p.dims["r"] = {3, 9};
    return p;
}

TEST(Autodiff, EveryUnaryRuleMatchesFiniteDifferences) {
    const Expr s = score();
    // Each at points inside its domain and away from kinks.
    const std::vector<std::pair<Expr, std::vector<double>>> cases = {
        {-s, {0.7, -2.0}},
        {exp(s), {0.7, -2.0}},
        {exp2(s), {0.7, -2.0}},
        {log(s), {0.7, 3.5}},
        {log2(s), {0.7, 3.5}},
        {tanh(s), {0.7, -1.3}},
        {sigmoid(s), {0.7, -1.3}},
        {abs(s), {0.7, -1.3}},
        {sqrt(s), {0.7, 3.5}},
        {rsqrt(s), {0.7, 3.5}},
        {sin(s), {0.7, -1.3}},
        {cos(s), {0.7, -1.3}},
        {floor(s) + s * 0.5, {0.7, -1.3}},
        {ceil(s) * 2.0, {0.7, -1.3}},
        {to_float(to_int(s * 3.0)), {0.7, -1.3}},
    };
    for (const auto& [e, xs] : cases)
        for (double x : xs) {
            Point p = point(x);
            check_d_score(e, p);
        }
}

TEST(Autodiff, EveryBinaryRuleMatchesFiniteDifferences) {
    const Expr s = score(), c = scalar("c");
    const std::vector<Expr> cases = {
        s + c,      s - c,      c - s,      s * c,       s * s,          s / c,        c / s,
        min(s, c),  max(s, c),  min(c, s),  max(c, s),   pow(s, c),      pow(c, s),    pow(s, 3.0),
        pow(s, s),  s + 2.0,    3.0 - s,    s * s * s,   (s + c) / (s * c),
    };
    for (const Expr& e : cases)
        for (double x : {0.7, 2.3}) {
            Point p = point(x);
            check_d_score(e, p);
            // and with respect to the scalar
            const Expr dc = simplify(derivative(e, scalar("c")));
            expect_close(eval(dc, p), central(e, p, p.env.scalars["c"]), "d/dc of " + to_string(e));
        }
}

TEST(Autodiff, SelectAndComparisonsCarryNoTangentThroughTheCondition) {
    const Expr s = score();
    const Expr e = select(s > 1.0, s * s, exp(s)) + select(s > 0.0, 1.0, 0.0);
    for (double x : {0.4, 2.5, -0.8}) {
        Point p = point(x);
        check_d_score(e, p);
    }
    EXPECT_TRUE(equal(simplify(derivative(select(s > 0.0, 1.0, 0.0), s)), Expr(0.0)));
    EXPECT_TRUE(equal(simplify(derivative(q_idx() < kv_idx(), s)), Expr(0.0)));
}

// Kinks: abs has derivative 0 at 0; min and max split a tie evenly; pow's exponent
// derivative is 0 at a zero base (PyTorch's conventions), and nothing is NaN there.
TEST(Autodiff, KinksFollowPyTorchConventions) {
    const Expr s = score(), c = scalar("c");
    Point p = point(0.0);
    EXPECT_EQ(eval(simplify(derivative(abs(s), s)), p), 0.0);
    p.env.scalars["c"] = 0.0;
    EXPECT_EQ(eval(simplify(derivative(min(s, c), s)), p), 0.5);
    EXPECT_EQ(eval(simplify(derivative(max(s, c), c)), p), 0.5);
    EXPECT_EQ(eval(simplify(derivative(min(s, c), s) + derivative(min(s, c), c)), p), 1.0);
    p.env.scalars["c"] = 2.0;
    EXPECT_EQ(eval(simplify(derivative(pow(s, c), c)), p), 0.0);  // d/dc 0^c at c >= 0
    EXPECT_EQ(eval(simplify(derivative(pow(s, 0.0), s)), p), 0.0);  // not 0 * 0^-1
}

// A branch that does not read the leaf contributes nothing, not 0 * inf.
TEST(Autodiff, UnrelatedInfiniteBranchesDoNotPoisonTheDerivative) {
    const Expr s = score();
    const Expr e = s * 2.0 + log(to_float(kv_idx() - kv_idx()));  // log(0) = -inf, independent of s
    Point p = point(0.3);
    EXPECT_EQ(eval(simplify(derivative(e, s)), p), 2.0);
}

TEST(Autodiff, TensorReadsAreSitesAndTheirPartialsSumLikeTheGradient) {
    Tensor t("t", DType::f32, 1);
    const Expr s = score();
    const Expr i = q_idx(), j = kv_idx();
    // t read at two places (j and i) and one of them twice.
    AttentionSpec spec;
    spec.score_mod(s * t(j) + t(i) * t(i) + tanh(t(j) * s));
    const ScoreModGradients g = score_mod_gradients(spec, {"t"});
    ASSERT_EQ(g.tensors.size(), 2u) << "t[j] and t[i]";
    EXPECT_EQ(g.tensors[0].reduction.kind, GradReduction::PerKey) << "t[j] is read first";
    EXPECT_EQ(g.tensors[1].reduction.kind, GradReduction::PerQuery);
    for (long long qi : {1, 4})
        for (long long kj : {1, 6}) {  // (1, 1): both sites read one element
            Point p = point(0.9);
            p.env.q_idx = qi;
            p.env.kv_idx = kj;
            for (size_t el : {size_t(1), size_t(4), size_t(6)}) {
                double sum = 0;
                for (const auto& site : g.tensors)
                    if (p.element(site.read) == el) sum += eval(site.partial, p);
                expect_close(sum, central(spec.score_mod(), p, p.tensors["t"][el]),
                             "d/dt[" + std::to_string(el) + "] at i=" + std::to_string(qi) +
                                 " j=" + std::to_string(kj));
            }
        }
}

TEST(Autodiff, ReadyMadeModifiers) {
    Tensor slopes("t", DType::f32, 1), table("r", DType::f32, 2);
    const std::vector<std::pair<Expr, std::set<std::string>>> mods_and_inputs = {
        {mods::softcap(scalar("c")), {"c"}},
        {mods::alibi(slopes), {"t"}},
        {mods::compose(mods::softcap(scalar("c")), mods::alibi(slopes)), {"c", "t"}},
        {mods::relative_position_bias(table, 4), {"r"}},
    };
    for (const auto& [mod, inputs] : mods_and_inputs) {
        AttentionSpec spec;
        spec.score_mod(mod);
        const ScoreModGradients g = score_mod_gradients(spec, inputs);
        for (double x : {-2.0, 0.3, 4.0}) {
            Point p = point(x);
            expect_close(eval(g.d_score, p), central(mod, p, p.env.score), "d/ds of " + to_string(mod));
            for (const auto& sc : g.scalars)
                expect_close(eval(sc.partial, p), central(mod, p, p.env.scalars[sc.scalar]),
                             "d/d" + sc.scalar + " of " + to_string(mod));
            for (const auto& site : g.tensors) {
                const size_t el = p.element(site.read);
                expect_close(eval(site.partial, p), central(mod, p, p.tensors[site.tensor][el]),
                             "d/d" + to_string(site.read) + " of " + to_string(mod));
            }
        }
    }
}

// Random smooth expressions of s, c and t[j]: the derivative with respect to each leaf
// matches the finite difference.
Expr random_smooth(std::mt19937& rng, int depth) {
    const Expr leaves[] = {score(), scalar("c"), Tensor("t", DType::f32, 1)(kv_idx()), Expr(0.75), Expr(-1.5)};
    if (depth == 0) return leaves[rng() % 5];
    const Expr a = random_smooth(rng, depth - 1);
    switch (rng() % 10) {
    case 0: return a + random_smooth(rng, depth - 1);
    case 1: return a - random_smooth(rng, depth - 1);
    case 2: return a * random_smooth(rng, depth - 1);
    case 3: return a / (exp(random_smooth(rng, depth - 1)) + 0.5);
    case 4: return tanh(a);
    case 5: return sigmoid(a);
    case 6: return sin(a);
    case 7: return exp(tanh(a));
    case 8: return sqrt(a * a + 1.0);
    default: return log(a * a + 0.25);
    }
}

TEST(Autodiff, RandomSmoothExpressions) {
    std::mt19937 rng(1234);
    for (int n = 0; n < 300; ++n) {
        const Expr e = random_smooth(rng, 1 + n % 5);
        Point p = point(0.37 + 0.01 * n);
        check_d_score(e, p);
        expect_close(eval(simplify(derivative(e, scalar("c"))), p), central(e, p, p.env.scalars["c"]),
                     "d/dc of " + to_string(e));
        const Expr read = Tensor("t", DType::f32, 1)(kv_idx());
        expect_close(eval(simplify(derivative(e, read)), p), central(e, p, p.tensors["t"][3]),
                     "d/dt[j] of " + to_string(e));
    }
}

TEST(Autodiff, WithoutScoreModTheScoreDerivativeIsOne) {
    const ScoreModGradients g = score_mod_gradients(AttentionSpec(), {});
    EXPECT_TRUE(equal(g.d_score, Expr(1.0)));
}

TEST(Autodiff, MaskOnlyTensorHasNoSites) {
    Tensor doc("doc", DType::f32, 1);
    AttentionSpec spec;
    spec.mask(doc(q_idx()) == doc(kv_idx())).score_mod(score() * 2.0);
    const ScoreModGradients g = score_mod_gradients(spec, {"doc"});
    EXPECT_TRUE(g.tensors.empty());
}

std::string error_of(const AttentionSpec& spec, const std::set<std::string>& wanted) {
    try {
        score_mod_gradients(spec, wanted);
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

TEST(Autodiff, GradientsThatDoNotExistAreUserErrors) {
    Tensor ids("ids", DType::i32, 1);
    AttentionSpec spec;
    spec.score_mod(score() + to_float(ids(kv_idx())) * scalar("c") + to_float(int_scalar("n")));
    const std::string int_tensor = error_of(spec, {"ids"});
    EXPECT_NE(int_tensor.find("tensor 'ids', which holds i32"), std::string::npos) << int_tensor;
    const std::string int_scalar = error_of(spec, {"n"});
    EXPECT_NE(int_scalar.find("scalar 'n', an int scalar"), std::string::npos) << int_scalar;
    const std::string unknown = error_of(spec, {"bias"});
    EXPECT_NE(unknown.find("'bias', which the spec does not read; it reads tensor 'ids', scalar 'c', scalar 'n'"),
              std::string::npos)
        << unknown;
    EXPECT_EQ(error_of(spec, {"c"}), "");
}

TEST(Autodiff, OversizedDerivativeIsAUserErrorNotACrash) {
    Expr e = score();
    for (int k = 0; k < 10; ++k) e = sin(e) * cos(e);  // each level reads the one below twice
    ASSERT_LE(e->size, static_cast<uint32_t>(kMaxExprNodes)) << "a valid user expression";
    Expr d;
    EXPECT_THROW(d = derivative(e, score()), UserError);
}

}  // namespace
}  // namespace attnjit::codegen
