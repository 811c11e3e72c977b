// DeviceBuffer and DeviceTensor: allocation, copies both ways, poison, moves, bounds,
// and the view of a host tensor's layout (strides, broadcast, offset) over a buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "support/error.h"
#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {
namespace {

TEST(DeviceBuffer, RoundTripPoisonAndMove) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    std::vector<float> host(1000);
    for (size_t i = 0; i < host.size(); ++i) host[i] = 0.25f * static_cast<float>(i) - 7.f;
    auto buf = runtime::DeviceBuffer::from_vector(host);
    EXPECT_EQ(buf.bytes(), host.size() * sizeof(float));
    EXPECT_NE(buf.ptr(), 0u);
    EXPECT_EQ(buf.ptr() % 256, 0u) << "cuMemAlloc is 256-byte aligned";
    EXPECT_EQ(buf.download_vector<float>(), host);

    // Partial copies at an offset.
    const float three[3] = {1.f, 2.f, 3.f};
    buf.upload(three, sizeof(three), 10 * sizeof(float));
    float back[3] = {};
    buf.download(back, sizeof(back), 10 * sizeof(float));
    EXPECT_EQ(std::memcmp(three, back, sizeof(three)), 0);
    EXPECT_THROW(buf.upload(three, sizeof(three), buf.bytes() - 4), InternalError);
    EXPECT_THROW(buf.download(back, 8, buf.bytes()), InternalError);

    // Poison: every byte 0xFF, a NaN in f32 and in f16/bf16.
    buf.poison();
    for (float f : buf.download_vector<float>()) ASSERT_TRUE(std::isnan(f));
    for (uint16_t h : buf.download_vector<uint16_t>()) {
        ASSERT_TRUE(std::isnan(reference::half_bits_to_float(h)));
        ASSERT_TRUE(std::isnan(reference::bf16_bits_to_float(h)));
    }

    // Moves transfer ownership; the source is left empty.
    const CUdeviceptr p = buf.ptr();
    runtime::DeviceBuffer moved(std::move(buf));
    EXPECT_EQ(moved.ptr(), p);
    EXPECT_TRUE(buf.empty());  // NOLINT(bugprone-use-after-move): checking the moved-from state
    runtime::DeviceBuffer assigned(16);
    assigned = std::move(moved);
    EXPECT_EQ(assigned.ptr(), p);
    EXPECT_TRUE(runtime::DeviceBuffer(0).empty());
}

TEST(DeviceTensor, ViewKeepsTheHostLayout) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    // [2, 3, 5, 8] stored as [B, N, H, D], plus a broadcast [2, 3, 4, 4] with batch stride 0
    // and a tensor with a storage offset.
    reference::HostTensor t(DType::bf16, {2, 3, 5, 8}, {5 * 3 * 8, 8, 3 * 8, 1});
    reference::fill_normal(t, 7);
    reference::HostTensor bcast(DType::f32, {2, 3, 4, 4}, {0, 16, 4, 1});
    reference::fill_normal(bcast, 8);
    reference::HostTensor offset(DType::f16, {4, 8}, {}, 8);
    reference::fill_normal(offset, 9);
    for (reference::HostTensor* h : {&t, &bcast, &offset}) {
        auto d = runtime::to_device(*h);
        EXPECT_EQ(d.view.dtype, h->dtype());
        EXPECT_EQ(d.view.shape, h->shape());
        EXPECT_EQ(d.view.strides, h->strides());
        EXPECT_EQ(static_cast<char*>(d.view.data) - static_cast<char*>(d.buffer.data()),
                  h->storage_offset() * dtype_size(h->dtype()));
        reference::HostTensor back = *h;
        reference::fill_poison(back);
        runtime::from_device(d, back);
        EXPECT_EQ(back.storage(), h->storage()) << h->describe();
    }
    reference::HostTensor other(DType::f32, {3});
    auto d = runtime::to_device(t);
    EXPECT_THROW(runtime::from_device(d, other), InternalError);
}

}  // namespace
}  // namespace attnjit::gputest
