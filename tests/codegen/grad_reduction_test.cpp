// grad_reduction: each read's plan, and the plan's promise checked by brute force: every
// (b, h, i, j) of a small problem is mapped through the read's indices by the interpreter,
// and the elements must meet exactly where the plan says they do.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "codegen/grad_reduction.h"
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "dsl/printer.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

struct Row {
    Expr read;
    GradReduction kind;
    bool sums_batch;
    HeadSum sums_heads;
};

std::vector<Row> rows() {
    const Expr b = batch(), h = head(), kvh = kv_head(), i = q_idx(), j = kv_idx();
    Tensor t4("t4", DType::f32, 4), t3("t3", DType::f32, 3), t2("t2", DType::f32, 2), t1("t1", DType::f32, 1);
    Tensor doc("doc", DType::i32, 1);
    const Expr m = 3;
    return {
        {t4(b, h, i, j), GradReduction::Elementwise, false, HeadSum::None},
        {t4(0, h, i, j), GradReduction::Elementwise, true, HeadSum::None},
        {t3(h, i, j), GradReduction::Elementwise, true, HeadSum::None},
        {t4(b, kvh, j, i), GradReduction::Elementwise, false, HeadSum::Group},
        {t2(h, j), GradReduction::PerKey, true, HeadSum::None},
        {t1(j + int_scalar("offset")), GradReduction::PerKey, true, HeadSum::All},
        {t2(b, i + 1), GradReduction::PerQuery, false, HeadSum::All},
        {t1(h), GradReduction::Uniform, true, HeadSum::None},
        {t1(0), GradReduction::Uniform, true, HeadSum::All},
        {t2(b, kvh), GradReduction::Uniform, false, HeadSum::Group},
        {t2(h, clamp(j - i, -m, m) + m), GradReduction::Diagonal, true, HeadSum::None},
        {t1(i - j + 7), GradReduction::Diagonal, true, HeadSum::All},
        {t1(doc(j)), GradReduction::Gather, true, HeadSum::All},
        {t1(i + j), GradReduction::Gather, true, HeadSum::All},
        {t2(i, i), GradReduction::Gather, true, HeadSum::All},
        {t1(min(j, 5)), GradReduction::Gather, true, HeadSum::All},
        {t2(b % 2, j), GradReduction::Gather, true, HeadSum::All},
        {t2(j - i, i), GradReduction::Gather, true, HeadSum::All},
    };
}

TEST(GradReduction, PlansOfTypicalReads) {
    for (const Row& r : rows()) {
        const GradReductionPlan p = plan_grad_reduction(r.read);
        EXPECT_EQ(p.kind, r.kind) << to_string(r.read) << ": " << p;
        if (p.kind == GradReduction::Gather && r.kind == GradReduction::Gather) continue;  // flags are advisory
        EXPECT_EQ(p.sums_batch, r.sums_batch) << to_string(r.read) << ": " << p;
        EXPECT_EQ(p.sums_heads, r.sums_heads) << to_string(r.read) << ": " << p;
    }
}

// The element (as a tuple of indices) a read names at one score coordinate.
using Element = std::vector<long long>;

Element element_at(const TensorLoad& load, Env& env) {
    Element e;
    for (const Expr& index : load.indices) e.push_back(interpret_int(index, env));
    return e;
}

// Everything the plan promises, over B = 2, Hq = 4 (2 kv heads), Nq = 5, Nk = 6.
void check_promise(const Expr& read, const GradReductionPlan& p) {
    const auto& load = *read.as<TensorLoad>();
    Env env;
    env.q_len = 5;
    env.kv_len = 6;
    env.scalars["offset"] = 2;
    env.load = [](const std::string&, const long long* index, int) { return double(index[0] % 3); };  // doc ids
    std::map<std::tuple<long long, long long, long long, long long>, Element> at;
    for (long long b = 0; b < 2; ++b)
        for (long long h = 0; h < 4; ++h)
            for (long long i = 0; i < 5; ++i)
                for (long long j = 0; j < 6; ++j) {
                    env.b = b;
                    env.h = h;
                    env.kv_head = h / 2;
                    env.q_idx = i;
                    env.kv_idx = j;
                    at[{b, h, i, j}] = element_at(load, env);
                }
    const std::string what = to_string(read);
    for (const auto& [x, e] : at) {
        const auto [b, h, i, j] = x;
        for (const auto& [y, f] : at) {
            const auto [b2, h2, i2, j2] = y;
            const bool same = e == f;
            if (b == b2 && h == h2) {
                // Within one (b, h): where two score elements meet.
                switch (p.kind) {
                case GradReduction::Elementwise: EXPECT_EQ(same, i == i2 && j == j2) << what; break;
                case GradReduction::PerKey: EXPECT_EQ(same, j == j2) << what; break;
                case GradReduction::PerQuery: EXPECT_EQ(same, i == i2) << what; break;
                case GradReduction::Diagonal:
                    if (j - i == j2 - i2) EXPECT_TRUE(same) << what;
                    break;
                case GradReduction::Uniform: EXPECT_TRUE(same) << what; break;
                case GradReduction::Gather: break;
                }
            }
            if (p.kind == GradReduction::Gather || i != i2 || j != j2) continue;
            // The same (i, j) across batches and heads.
            if (h == h2 && b != b2) EXPECT_EQ(same, p.sums_batch) << what;
            if (b == b2 && h != h2) {
                const bool meet = p.sums_heads == HeadSum::All || (p.sums_heads == HeadSum::Group && h / 2 == h2 / 2);
                EXPECT_EQ(same, meet) << what;
            }
        }
    }
}

TEST(GradReduction, PlansKeepTheirPromiseByBruteForce) {
    for (const Row& r : rows()) check_promise(r.read, plan_grad_reduction(r.read));
}

TEST(GradReduction, Prints) {
    Tensor t2("t2", DType::f32, 2);
    std::ostringstream s;
    s << plan_grad_reduction(t2(head(), kv_idx()));
    EXPECT_EQ(s.str(), "per_key, summed over the batch");
}

}  // namespace
}  // namespace attnjit::codegen
