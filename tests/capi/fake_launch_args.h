// Launch arguments for tests/capi/test_specs.h's spec_with_every_input() that pass every
// check but point at fake (aligned, disjoint, never dereferenced) device addresses: what a
// compile-only kernel needs to show its argument checks without a GPU.
#pragma once

#include <cstdint>

#include "attnjit/attnjit_c.h"

namespace attnjit::capitest {

struct FakeLaunch {
    static constexpr int64_t B = 1, H = 2, N = 16, D = 128;
    attnjit_tensor lse = ATTNJIT_TENSOR_INIT;
    attnjit_tensor tensors[2] = {ATTNJIT_TENSOR_INIT, ATTNJIT_TENSOR_INIT};  // bias, slopes
    double scalars[2] = {30.0, 8.0};                                       // cap, window
    attnjit_launch_args args = ATTNJIT_LAUNCH_ARGS_INIT;

    static attnjit_tensor tensor(int slot, int32_t dtype, int32_t rank, const int64_t* shape) {
        attnjit_tensor t = ATTNJIT_TENSOR_INIT;
        t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(slot + 1) << 32);  // 4 GiB apart
        t.dtype = dtype;
        t.rank = rank;
        int64_t stride = 1;
        for (int d = rank - 1; d >= 0; --d) {
            t.shape[d] = shape[d];
            t.strides[d] = stride;
            stride *= shape[d];
        }
        return t;
    }

    FakeLaunch() {
        const int64_t qkvo[4] = {B, H, N, D}, lse_shape[3] = {B, H, N}, bias[4] = {B, H, N, N}, slopes[1] = {H};
        args.q = tensor(0, ATTNJIT_BF16, 4, qkvo);
        args.k = tensor(1, ATTNJIT_BF16, 4, qkvo);
        args.v = tensor(2, ATTNJIT_BF16, 4, qkvo);
        args.o = tensor(3, ATTNJIT_BF16, 4, qkvo);
        lse = tensor(4, ATTNJIT_F32, 3, lse_shape);
        tensors[0] = tensor(5, ATTNJIT_BF16, 4, bias);
        tensors[1] = tensor(6, ATTNJIT_F32, 1, slopes);
        args.lse = &lse;
        args.num_tensors = 2;
        args.tensors = tensors;
        args.num_scalars = 2;
        args.scalars = scalars;
    }
    FakeLaunch(const FakeLaunch&) = delete;  // args points into this object
};

}  // namespace attnjit::capitest
