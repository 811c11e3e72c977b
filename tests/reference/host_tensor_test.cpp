// Host tensors: rounding to f16/bf16 (checked against the compiler's _Float16 where it
// exists), element access through strides, seeded fills, poison.
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "reference/host_tensor.h"

namespace attnjit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Rounding, HalfKnownValues) {
    EXPECT_EQ(float_to_half_bits(1.0f), 0x3C00);
    EXPECT_EQ(float_to_half_bits(-2.0f), 0xC000);
    EXPECT_EQ(float_to_half_bits(65504.0f), 0x7BFF);                      // largest finite
    EXPECT_EQ(float_to_half_bits(65519.0f), 0x7BFF);                      // below the midpoint
    EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);                      // midpoint: ties to even = inf
    EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even (1.0)
    EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
    EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
    EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);         // tie -> even (0)
    EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -26)), 0x0001);
    EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
    EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7C00);
    EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::nanf("")))));
    EXPECT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
}

TEST(Rounding, HalfBitsRoundTripExhaustively) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        float f = half_bits_to_float(static_cast<uint16_t>(b));
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_half_bits(f), b) << std::hex << b;
        ASSERT_EQ(round_to_dtype(f, DType::f16), f);
    }
}

TEST(Rounding, Bf16KnownValues) {
    EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
    EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even
    EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (up)
    EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
    EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
    EXPECT_EQ(bf16_bits_to_float(0xC0A0), -5.0f);
}

TEST(Rounding, Bf16BitsRoundTripExhaustively) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        float f = bf16_bits_to_float(static_cast<uint16_t>(b));
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_bf16_bits(f), b) << std::hex << b;
        ASSERT_EQ(round_to_dtype(f, DType::bf16), f);
    }
}

// Random doubles and floats: the double path (round_to_dtype) and the float bit path
// agree, and match the compiler's conversions where it has them.
TEST(Rounding, AgreesWithHardwareConversions) {
    uint64_t s = 12345;
    for (int n = 0; n < 200000; ++n) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        // Values spread over the f16 range, subnormals and overflow included.
        double x = std::ldexp(static_cast<double>(s >> 11) * 0x1.0p-53 * 2 - 1, static_cast<int>((s >> 3) % 44) - 28);
        float xf = static_cast<float>(x);
        EXPECT_EQ(round_to_dtype(xf, DType::f16), half_bits_to_float(float_to_half_bits(xf)));
        EXPECT_EQ(round_to_dtype(xf, DType::bf16), bf16_bits_to_float(float_to_bf16_bits(xf)));
        EXPECT_EQ(round_to_dtype(x, DType::f32), static_cast<double>(xf));
#if defined(__FLT16_MAX__)
        EXPECT_EQ(round_to_dtype(x, DType::f16), static_cast<double>(static_cast<_Float16>(x))) << x;
        EXPECT_EQ(round_to_dtype(xf, DType::f16), static_cast<double>(static_cast<_Float16>(xf))) << xf;
#endif
        if (HasFailure()) return;
    }
}

TEST(Rounding, IntegerDtypes) {
    EXPECT_EQ(round_to_dtype(2.5, DType::i32), 2);
    EXPECT_EQ(round_to_dtype(-3.5, DType::i64), -4);
    EXPECT_EQ(round_to_dtype(1e12, DType::i32), 2147483647.0);
    EXPECT_EQ(round_to_dtype(300, DType::u8), 255);
    EXPECT_EQ(round_to_dtype(-kInf, DType::f16), -kInf);
    EXPECT_EQ(round_to_dtype(1e6, DType::f16), kInf);
}

TEST(HostTensor, ContiguousLayoutAndAccess) {
    HostTensor t(DType::f32, {2, 3, 4});
    EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.storage().size(), 24u * 4);
    t.set({1, 2, 3}, 0.1);
    EXPECT_EQ(t.get({1, 2, 3}), static_cast<double>(0.1f));
    EXPECT_EQ(static_cast<const float*>(t.data())[23], 0.1f);
    EXPECT_EQ(t.describe(), "f32[2, 3, 4] strides [12, 4, 1]");
}

TEST(HostTensor, ArbitraryStridesOffsetsAndBroadcast) {
    HostTensor t(DType::f16, {3, 2}, {1, 3});  // column-major
    EXPECT_EQ(t.storage().size(), 6u * 2);
    t.set({2, 1}, 5);
    EXPECT_EQ(static_cast<const uint16_t*>(t.data())[5], float_to_half_bits(5));
    HostTensor neg(DType::f32, {4}, {-1});  // reversed: element 0 is the last in memory
    neg.set({0}, 1);
    neg.set({3}, 4);
    EXPECT_EQ(static_cast<const float*>(neg.data())[0], 1.0f);
    EXPECT_EQ(static_cast<const float*>(neg.data())[-3], 4.0f);
    HostTensor bc(DType::f32, {5, 2}, {0, 1}, 3);  // 5 rows share one; 3 elements before it
    EXPECT_EQ(bc.storage().size(), 5u * 4);
    bc.set({4, 1}, 7);
    EXPECT_EQ(bc.get({0, 1}), 7);
    HostTensor m = materialize(bc);
    EXPECT_EQ(m.strides(), (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(m.get({3, 1}), 7);
    HostTensor empty(DType::bf16, {0, 4});
    int visits = 0;
    empty.for_each_index([&](const int64_t*) { ++visits; });
    EXPECT_EQ(visits, 0);
}

TEST(HostTensor, FillNormalIsSeededRoundedAndPlausible) {
    HostTensor a(DType::bf16, {64, 64}), b(DType::bf16, {64, 64}), c(DType::bf16, {64, 64});
    fill_normal(a, 42);
    fill_normal(b, 42);
    fill_normal(c, 43);
    EXPECT_EQ(a.storage(), b.storage());
    EXPECT_NE(a.storage(), c.storage());
    double sum = 0, sq = 0;
    a.for_each_index([&](const int64_t* i) {
        double x = a.get(i);
        EXPECT_EQ(round_to_dtype(x, DType::bf16), x);
        sum += x;
        sq += x * x;
    });
    double mean = sum / 4096, var = sq / 4096 - mean * mean;
    EXPECT_NEAR(mean, 0, 0.1);
    EXPECT_NEAR(var, 1, 0.1);
    HostTensor ints(DType::i32, {1000});
    fill_uniform_int(ints, 1, -2, 2);
    ints.for_each_index([&](const int64_t* i) {
        EXPECT_GE(ints.get(i), -2);
        EXPECT_LE(ints.get(i), 2);
    });
}

TEST(HostTensor, PoisonIsRecognised) {
    for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
        HostTensor t(dt, {2, 2});
        fill_poison(t);
        EXPECT_TRUE(is_poison(t, std::vector<int64_t>{1, 1}.data()));
        EXPECT_TRUE(std::isnan(t.get({1, 1}))) << dtype_name(dt);
        t.set({1, 1}, std::nan(""));  // a computed NaN is not poison
        EXPECT_FALSE(is_poison(t, std::vector<int64_t>{1, 1}.data()));
        EXPECT_TRUE(is_poison(t, std::vector<int64_t>{0, 1}.data()));
    }
}

}  // namespace
}  // namespace attnjit::reference
