// The GPU tests' harness, checked without a GPU (label cpu): for every case of the
// forward matrix, the fp64 reference rounded to the output dtype (what a perfect kernel
// writes) passes the checks, and the reference itself is never NaN on the case's inputs;
// a single unwritten, NaN or wrong element fails with a message naming the case, the
// error and where it is. So a GPU failure is the kernel's, not the harness's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {
namespace {

// What a kernel that computed exactly the reference would write.
void write_reference(Problem& p, const reference::ForwardResult& ref) {
    int64_t n = 0;
    p.o.for_each_index([&](const int64_t* idx) { p.o.set(idx, ref.o.data[static_cast<size_t>(n++)]); });
    if (p.c.lse) {
        n = 0;
        p.lse.for_each_index([&](const int64_t* idx) { p.lse.set(idx, ref.lse.data[static_cast<size_t>(n++)]); });
    }
}

class Harness : public ::testing::TestWithParam<Case> {};

TEST_P(Harness, PerfectOutputPasses) {
    const Case& c = GetParam();
    Problem p = make_problem(c, /*upload=*/false);
    auto ref = reference::forward(p.spec, p.in);
    for (double v : ref.o.data) ASSERT_FALSE(std::isnan(v)) << c.name() << ": the reference O has a NaN";
    for (double v : ref.lse.data) ASSERT_FALSE(std::isnan(v)) << c.name() << ": the reference LSE has a NaN";
    write_reference(p, ref);
    Check o = check_output(c.name() + " O", p.o, ref.o, reference::output_tolerance(c.dtype));
    EXPECT_TRUE(o.ok) << o.message;
    if (c.lse) {
        Check l = check_output(c.name() + " LSE", p.lse, ref.lse, reference::kLseTolerance);
        EXPECT_TRUE(l.ok) << l.message;
    }
    Check m = check_fully_masked_rows(c.name(), p.o, c.lse ? &p.lse : nullptr, ref.lse);
    EXPECT_TRUE(m.ok) << m.message;
}

// Small cases only: the reference of the whole matrix takes minutes on one core.
std::vector<Case> small_cases() {
    std::vector<Case> out;
    for (const Case& c : forward_matrix())
        if (static_cast<int64_t>(c.batch) * c.hq * c.nq * c.nk <= 2'000'000) out.push_back(c);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Harness, ::testing::ValuesIn(small_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

TEST(HarnessChecks, EveryFailureKindIsCaughtAndLocated) {
    const Case c = make_case(Mod::CausalBottomRight, DType::bf16, 64, {2, 4, 2, 33, 17});  // rows 0..15 keep no key
    Problem p = make_problem(c, false);
    auto ref = reference::forward(p.spec, p.in);
    write_reference(p, ref);
    const auto tol = reference::output_tolerance(c.dtype);
    ASSERT_TRUE(check_output("O", p.o, ref.o, tol).ok);
    ASSERT_TRUE(check_output("LSE", p.lse, ref.lse, reference::kLseTolerance).ok);
    int64_t rows = 0;
    ASSERT_TRUE(check_fully_masked_rows("case", p.o, &p.lse, ref.lse, &rows).ok);
    EXPECT_EQ(rows, 2 * 4 * 16);

    auto expect_fail = [&](HostTensor& t, std::initializer_list<int64_t> where, auto&& spoil,
                           const reference::DoubleTensor& expected, reference::Tolerance tl,
                           const std::string& must_say) {
        HostTensor saved = t;
        spoil(t, where);
        Check r = check_output("the_case", t, expected, tl);
        EXPECT_FALSE(r.ok);
        EXPECT_NE(r.message.find("the_case"), std::string::npos) << r.message;
        EXPECT_NE(r.message.find("max abs error"), std::string::npos) << r.message;
        EXPECT_NE(r.message.find(must_say), std::string::npos) << r.message;
        t = saved;
    };
    auto poison_one = [](HostTensor& t, std::initializer_list<int64_t> w) {
        HostTensor one(t.dtype(), {1});
        reference::fill_poison(one);
        std::memcpy(static_cast<char*>(t.data()) + t.offset_of(w.begin()) * dtype_size(t.dtype()), one.data(),
                    dtype_size(t.dtype()));
    };
    auto nan_one = [](HostTensor& t, std::initializer_list<int64_t> w) {
        t.set(w.begin(), std::numeric_limits<double>::quiet_NaN());
    };
    auto bump_one = [](HostTensor& t, std::initializer_list<int64_t> w) { t.set(w.begin(), t.get(w.begin()) + 0.5); };
    expect_fail(p.o, {1, 3, 20, 63}, poison_one, ref.o, tol, "[1, 3, 20, 63]");
    expect_fail(p.o, {0, 2, 30, 5}, nan_one, ref.o, tol, "[0, 2, 30, 5]");
    expect_fail(p.o, {1, 0, 32, 7}, bump_one, ref.o, tol, "worst at [1, 0, 32, 7]");
    expect_fail(p.lse, {0, 1, 17}, bump_one, ref.lse, reference::kLseTolerance, "worst at [0, 1, 17]");
    auto zero_one = [](HostTensor& t, std::initializer_list<int64_t> w) { t.set(w.begin(), 0.0); };
    expect_fail(p.lse, {0, 1, 3}, zero_one, ref.lse, reference::kLseTolerance, "[0, 1, 3]");  // a -inf row

    // A fully masked row with a non-zero O, or a finite LSE, is named.
    HostTensor o2 = p.o;
    o2.set({1, 2, 4, 9}, 1e-3);
    Check m = check_fully_masked_rows("the_case", o2, &p.lse, ref.lse);
    EXPECT_FALSE(m.ok);
    EXPECT_NE(m.message.find("[1, 2, 4]"), std::string::npos) << m.message;
    EXPECT_TRUE(all_poison(HostTensor(DType::f32, {0})));
    HostTensor fresh(DType::f16, {3, 5});
    reference::fill_poison(fresh);
    EXPECT_TRUE(all_poison(fresh));
    fresh.set({2, 4}, 0.0);
    EXPECT_FALSE(all_poison(fresh));
}

}  // namespace
}  // namespace attnjit::gputest
