// What a launch needs, as the C API lists it: captured tensors and runtime scalars sorted
// by name (the positional order), with dtype, rank and int-ness; and whether LSE is returned.
#include <gtest/gtest.h>

#include <string>

#include "tests/capi/capi_test_util.h"
#include "tests/capi/test_specs.h"

namespace attnjit::capitest {
namespace {

TEST(CapiSpecQueries, TensorsAreListedSortedByNameWithDtypeAndRank) {
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    ASSERT_EQ(attnjit_spec_num_tensors(spec.get()), 2);
    const char* name = nullptr;
    int32_t dtype = -1, rank = -1;
    ASSERT_EQ(attnjit_spec_tensor(spec.get(), 0, &name, &dtype, &rank), ATTNJIT_OK) << attnjit_last_error();
    EXPECT_STREQ(name, "bias");
    EXPECT_EQ(dtype, ATTNJIT_BF16);
    EXPECT_EQ(rank, 4);
    ASSERT_EQ(attnjit_spec_tensor(spec.get(), 1, &name, &dtype, &rank), ATTNJIT_OK) << attnjit_last_error();
    EXPECT_STREQ(name, "slopes");
    EXPECT_EQ(dtype, ATTNJIT_F32);
    EXPECT_EQ(rank, 1);
}

TEST(CapiSpecQueries, ScalarsAreListedSortedByNameWithIntness) {
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    ASSERT_EQ(attnjit_spec_num_scalars(spec.get()), 2);
    const char* name = nullptr;
    int32_t is_int = -1;
    ASSERT_EQ(attnjit_spec_scalar(spec.get(), 0, &name, &is_int), ATTNJIT_OK) << attnjit_last_error();
    EXPECT_STREQ(name, "cap");
    EXPECT_EQ(is_int, 0);
    ASSERT_EQ(attnjit_spec_scalar(spec.get(), 1, &name, &is_int), ATTNJIT_OK) << attnjit_last_error();
    EXPECT_STREQ(name, "window");
    EXPECT_EQ(is_int, 1);
}

TEST(CapiSpecQueries, IntTensorsKeepTheirDtype) {
    using namespace dsl;
    auto s = AttentionSpec().dtype(DType::f16).head_dim(64).mask(
        mods::document_mask(Tensor("q_doc", DType::i32, 2), Tensor("kv_doc", DType::i64, 2)));
    SpecPtr spec = c_spec(s);
    ASSERT_TRUE(spec);
    ASSERT_EQ(attnjit_spec_num_tensors(spec.get()), 2);
    const char* name = nullptr;
    int32_t dtype = -1, rank = -1;
    ASSERT_EQ(attnjit_spec_tensor(spec.get(), 0, &name, &dtype, &rank), ATTNJIT_OK);
    EXPECT_STREQ(name, "kv_doc");
    EXPECT_EQ(dtype, ATTNJIT_I64);
    ASSERT_EQ(attnjit_spec_tensor(spec.get(), 1, &name, &dtype, &rank), ATTNJIT_OK);
    EXPECT_STREQ(name, "q_doc");
    EXPECT_EQ(dtype, ATTNJIT_I32);
    EXPECT_EQ(rank, 2);
}

TEST(CapiSpecQueries, ReturnsLse) {
    using namespace dsl;
    SpecPtr with = c_spec(AttentionSpec().dtype(DType::bf16).head_dim(64).return_lse());
    SpecPtr without = c_spec(AttentionSpec().dtype(DType::bf16).head_dim(64));
    ASSERT_TRUE(with && without);
    EXPECT_EQ(attnjit_spec_returns_lse(with.get()), 1);
    EXPECT_EQ(attnjit_spec_returns_lse(without.get()), 0);
}

TEST(CapiSpecQueries, ASpecWithoutInputsListsNone) {
    SpecPtr spec = c_spec(dsl::AttentionSpec().dtype(DType::f16).head_dim(64).mask(dsl::mods::causal()));
    ASSERT_TRUE(spec);
    EXPECT_EQ(attnjit_spec_num_tensors(spec.get()), 0);
    EXPECT_EQ(attnjit_spec_num_scalars(spec.get()), 0);
}

}  // namespace
}  // namespace attnjit::capitest
