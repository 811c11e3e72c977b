// api::why_not_tma_readable (api/tma_maps.h): which Q, K, V layouts the sm90 loop's bulk
// copies cannot read, so that Attention runs such a call on the sm80 kernel instead.
#include <gtest/gtest.h>

#include "api/tma_maps.h"
#include "codegen/kernel_config.h"
#include "dsl/mods.h"

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

// Nq == 0: the backward's key-tile kernels still run (dK = dV = 0) with maps of the empty Q
// and dO, whose contiguous strides are 0; they are never read, so they are readable.
TEST(BackwardTma, EmptyQueryRowsAreReadable) {
    LaunchArgs a = args();
    a.q = a.o = TensorView::contiguous(nullptr, DType::bf16, {B, H, 0, D});
    EXPECT_EQ(a.q.strides[1], 0);
    EXPECT_FALSE(why_not_tma_readable(a, a.o));
    // Described as one row of D: no dimension or stride of 0, strides multiples of 16 bytes.
    const TmaGeometry g = tma_geometry(a.q, DType::bf16);
    EXPECT_EQ(g.dims[0], static_cast<unsigned long long>(D));
    for (int d = 1; d < 4; ++d) EXPECT_EQ(g.dims[d], 1u) << d;
    for (unsigned long long s : g.strides) {
        EXPECT_GT(s, 0u);
        EXPECT_EQ(s % 16, 0u);
    }
}

// The geometry of a tensor with rows: its own strides in bytes, dims innermost first; a
// dimension of one gets the span of the dims inside it.
TEST(ForwardTma, GeometryIsTheTensorsOwn) {
    const TmaGeometry g = tma_geometry(bhnd(), DType::bf16);
    EXPECT_EQ(g.dims[0], static_cast<unsigned long long>(D));
    EXPECT_EQ(g.dims[1], static_cast<unsigned long long>(N));
    EXPECT_EQ(g.dims[2], static_cast<unsigned long long>(H));
    EXPECT_EQ(g.dims[3], static_cast<unsigned long long>(B));
    EXPECT_EQ(g.strides[0], 2u * D);
    EXPECT_EQ(g.strides[1], 2u * N * D);
    EXPECT_EQ(g.strides[2], 2u * H * N * D);
    TensorView one_head{nullptr, DType::bf16, {B, 1, N, D}, {N * D, 0, D, 1}};  // H = 1, stride 0
    const TmaGeometry h = tma_geometry(one_head, DType::bf16);
    EXPECT_EQ(h.strides[1], 2u * N * D);
}

TEST(ForwardTma, StridesOf2To40BytesAreNot) {
    LaunchArgs a = args();
    a.q.strides[0] = (1LL << 40) / 2;  // bf16: 2^40 bytes
    const auto why = why_not_tma_readable(a);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("argument 'q' has a stride of 1099511627776 bytes in dimension 0"), std::string::npos) << *why;
}

// The sm90 forward's bias tile: score_mod's bias tensor read as rows of keys by one 2-d map.
struct BiasCall {
    AttentionSpec spec;
    KernelConfig config;
    LaunchArgs a = args();
    BiasCall() {
        spec.dtype(DType::bf16).head_dim(D).score_mod(dsl::mods::bias(dsl::Tensor("bias", DType::bf16, 4)));
        config = codegen::make_config(spec, KernelKind::forward, "sm_90a");
        a.tensors["bias"] = TensorView{reinterpret_cast<void*>(uintptr_t{4096}), DType::bf16, {B, H, N, 104},
                                       {H * N * 104, N * 104, 104, 1}};
    }
    TensorView& bias() { return a.tensors["bias"]; }
    std::optional<std::string> why() const { return why_not_tma_readable(a, tma_bias_tensor(config, spec)); }
};

TEST(ForwardTma, BiasRowsOf16ByteMultiplesAreReadable) {
    BiasCall c;
    ASSERT_EQ(c.config.mainloop, MainloopKind::sm90);
    ASSERT_TRUE(c.config.bias_tile);
    EXPECT_EQ(tma_bias_tensor(c.config, c.spec), "bias");
    EXPECT_EQ(tma_bias_tensor(codegen::make_config(c.spec, KernelKind::forward, "sm_90a", std::nullopt,
                                                   MainloopKind::sm80),
                              c.spec),
              "");  // the sm80 loop stages it with its own copies
    EXPECT_FALSE(c.why());
    c.bias().strides[0] = 0;  // one [1, H, N, Nk] pair bias for every batch row
    EXPECT_FALSE(c.why());
    c.bias().strides[1] = 0;  // and for every head
    EXPECT_FALSE(c.why());
}

TEST(ForwardTma, BiasLayoutsTheMapCannotReadSayWhy) {
    auto refused = [](BiasCall c, const std::string& what) {
        const auto why = c.why();
        ASSERT_TRUE(why) << what;
        EXPECT_NE(why->find("captured tensor 'bias' (the bias tile), " + what), std::string::npos) << *why;
    };
    BiasCall c;
    c.bias().strides = {H * N * 100, N * 100, 100, 1};  // rows of 200 bytes
    c.bias().shape[3] = 100;
    refused(c, "its rows are not whole 16-byte multiples apart (stride 100)");
    c = BiasCall();
    c.bias().strides = {H * N * 104 * 2, N * 104 * 2, 104 * 2, 2};  // every other key
    refused(c, "its last dim is not contiguous");
    c = BiasCall();
    c.bias().data = reinterpret_cast<void*>(uintptr_t{4098});
    refused(c, "its start is not 16-byte aligned");
    c = BiasCall();
    c.bias().strides[1] = N * 104 + 8;  // heads 8 elements more apart than whole rows
    c.bias().strides[0] = 2 * H * N * 104;
    refused(c, "dim 1's stride is not a whole number of rows");
    c = BiasCall();
    c.a.k.strides[0] = 0;  // Q, K and V come first
    const auto why = c.why();
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("argument 'k' is broadcast"), std::string::npos) << *why;
}

}  // namespace
}  // namespace attnjit::api
