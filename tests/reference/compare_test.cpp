// Comparison helpers: tolerance rule, infinities, NaN, poison, and the tolerance table.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "reference/attention_reference.h"

namespace attnjit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

DoubleTensor vec(std::vector<double> v) {
    DoubleTensor t({static_cast<int64_t>(v.size())});
    t.data = std::move(v);
    return t;
}

HostTensor host(DType dt, const std::vector<double>& v) {
    HostTensor t(dt, {static_cast<int64_t>(v.size())});
    for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) t.set({i}, v[i]);
    return t;
}

TEST(Tolerance, TableIsTheDocumentedOne) {
    EXPECT_EQ(output_tolerance(DType::f16).atol, 3e-3);
    EXPECT_EQ(output_tolerance(DType::f16).rtol, 3e-3);
    EXPECT_EQ(output_tolerance(DType::bf16).atol, 2e-2);
    EXPECT_EQ(output_tolerance(DType::bf16).rtol, 2e-2);
    EXPECT_EQ(output_tolerance(DType::f32).atol, 1e-4);
    EXPECT_EQ(output_tolerance(DType::f32).rtol, 1e-4);
    EXPECT_EQ(kLseTolerance.atol, 1e-3);
}

TEST(Tolerance, OneUlpOfOutputRoundingPasses) {
    // Rounding the exact answer to the output dtype must always pass its tolerance.
    for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
        std::vector<double> exact = {0.1234567, -2.718281828, 3.14159265, 1e-5, -0.999999};
        auto c = compare(host(dt, exact), vec(exact), output_tolerance(dt));
        EXPECT_TRUE(c.ok) << dtype_name(dt) << ": " << c.report;
    }
}

TEST(Compare, AbsoluteAndRelativeErrors) {
    auto c = compare(vec({1.0, 2.0, 0.0}), vec({1.0, 2.1, 0.001}), {0.2, 0});
    EXPECT_TRUE(c.ok);
    EXPECT_NEAR(c.max_abs_error, 0.1, 1e-12);
    EXPECT_NEAR(c.max_rel_error, 0.1, 1e-12);  // 0 vs 0.001: 0.001 / floor 1e-2 = 0.1 > 0.1 / 2.1
    EXPECT_NEAR(max_abs_error(vec({1.0, 2.0}), vec({1.5, 2.0})), 0.5, 0);
    EXPECT_NEAR(max_rel_error(vec({0.0}), vec({1e-9})), 1e-9 / kRelativeErrorFloor, 1e-15);
    auto bad = compare(vec({1.0, 2.0}), vec({1.0, 2.5}), {0.1, 0.1});
    EXPECT_FALSE(bad.ok);
    EXPECT_EQ(bad.failures, 1);
    EXPECT_NE(bad.report.find("at [1]"), std::string::npos) << bad.report;
}

TEST(Compare, InfinitiesMustMatchExactly) {
    EXPECT_TRUE(compare(vec({-kInf, 1}), vec({-kInf, 1}), kLseTolerance).ok);
    auto c = compare(vec({-1e30}), vec({-kInf}), kLseTolerance);
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.max_abs_error, kInf);
    EXPECT_EQ(max_abs_error(vec({kInf}), vec({-kInf})), kInf);
}

TEST(Compare, AnyNanFails) {
    auto c = compare(vec({1, std::nan("")}), vec({1, 1}), {1e9, 1e9});
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.nans, 1);
    EXPECT_FALSE(compare(vec({1}), vec({std::nan("")}), {1e9, 1e9}).ok);
    EXPECT_TRUE(std::isnan(max_abs_error(vec({std::nan("")}), vec({0}))));
}

TEST(Compare, UnwrittenElementsFail) {
    HostTensor o(DType::f16, {2, 3});
    fill_poison(o);
    DoubleTensor expected({2, 3});
    for (int64_t i = 0; i < 3; ++i) o.set({0, i}, 0.0);  // row 1 never written
    auto c = compare(o, expected, output_tolerance(DType::f16));
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.poisoned, 3);
    EXPECT_EQ(c.nans, 0);
    EXPECT_NE(c.report.find("never written"), std::string::npos) << c.report;
}

TEST(Compare, StridedActualAndShapeMismatch) {
    HostTensor o(DType::f32, {2, 2}, {1, 2});  // column-major
    o.set({0, 1}, 5);
    DoubleTensor e({2, 2});
    e.at({0, 1}) = 5;
    EXPECT_TRUE(compare(o, e, output_tolerance(DType::f32)).ok);
    EXPECT_EQ(to_double(o).data, e.data);
    auto c = compare(o, DoubleTensor({4}), output_tolerance(DType::f32));
    EXPECT_FALSE(c.ok);
    EXPECT_NE(c.report.find("shape mismatch"), std::string::npos);
}

}  // namespace
}  // namespace attnjit::reference
