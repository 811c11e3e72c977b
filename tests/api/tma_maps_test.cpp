// api::why_not_tma_readable (api/tma_maps.h): which Q, K, V layouts the sm90 loop's bulk
// copies cannot read, so that Attention runs such a call on the sm80 kernel instead.
#include <gtest/gtest.h>

#include "api/tma_maps.h"

namespace attnjit::api {
namespace {

constexpr int64_t B = 2, H = 4, N = 100, D = 64;

TensorView bhnd() { return TensorView{nullptr, DType::bf16, {B, H, N, D}, {H * N * D, N * D, D, 1}}; }

LaunchArgs args() {
    LaunchArgs a;
    a.q = a.k = a.v = a.o = bhnd();
    return a;
}

TEST(ForwardTma, ContiguousAndTransposedLayoutsAreReadable) {
    EXPECT_FALSE(why_not_tma_readable(args()));
    LaunchArgs a = args();
    a.k = TensorView{nullptr, DType::bf16, {B, H, N, D}, {N * H * D, D, H * D, 1}};  // [B, N, H, D] in memory
    EXPECT_FALSE(why_not_tma_readable(a));
}

TEST(ForwardTma, BroadcastOverADimensionOfMoreThanOneIsNot) {
    LaunchArgs a = args();
    a.v.strides[0] = 0;  // one V for every batch row
    const auto why = why_not_tma_readable(a);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("argument 'v' is broadcast (stride 0) over dimension 0"), std::string::npos) << *why;
    a = args();
    a.k.shape[1] = 1;  // a stride of 0 over a dimension of one is never stepped over
    a.k.strides[1] = 0;
    EXPECT_FALSE(why_not_tma_readable(a));
}

TEST(ForwardTma, StridesOf2To40BytesAreNot) {
    LaunchArgs a = args();
    a.q.strides[0] = (1LL << 40) / 2;  // bf16: 2^40 bytes
    const auto why = why_not_tma_readable(a);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("argument 'q' has a stride of 1099511627776 bytes in dimension 0"), std::string::npos) << *why;
}

}  // namespace
}  // namespace attnjit::api
