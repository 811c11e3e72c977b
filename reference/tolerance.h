// How close a kernel's output must be to the fp64 reference, per output dtype. One
// table, used by every correctness test, so a tolerance is never loosened in one place.
//
// An element passes when |actual - expected| <= atol + rtol * |expected| (numpy.allclose);
// infinities must match exactly; NaN and unwritten (poison) elements always fail.
//
// Why these numbers. The reference sees the same rounded inputs as the kernel, so the
// error left is the kernel's own arithmetic: fp32 accumulation of Q.K^T and of the
// online softmax (relative ~1e-6 for head dim <= 256), the probabilities P rounded to
// the input dtype before the P.V product (FlashAttention does this on tensor cores), and
// the final rounding of O to its dtype. O is a convex combination of V rows, so with
// N(0, 1) inputs |O| <= ~3 and an absolute bound is meaningful.
//  - fp16: unit roundoff 2^-11 = 4.9e-4. P's rounding averages out over keys; one ulp of
//    O at |O| ~ 1 is 9.8e-4. 3e-3 allows ~3 ulps: tight enough to catch a wrong mask on
//    one key of thousands (an error of ~1/N * |v| ~ 2e-4 would hide, but a wrong row, a
//    wrong head or a missing rescale is 1e-1 or more).
//  - bf16: unit roundoff 2^-8 = 3.9e-3, 8x fp16's; one ulp at 1 is 7.8e-3. 2e-2 ~ 3 ulps.
//  - fp32: SIMT path, no rounding of P; only accumulation order and exp/log in fp32
//    differ (~1e-6 relative). 1e-4 leaves room for expf's ulps and large N.
//  - LSE: always fp32, = m + log(l), both in fp32 (|LSE| ~ 10 for N(0,1) inputs and
//    N ~ 4k keys: fp32 ulp ~ 1e-6, score errors ~ 1e-5 for 16-bit inputs after scaling).
//    atol 1e-3 with a small rtol 1e-5 so huge scores (a -1e9 additive mask bias gives
//    LSE ~ -1e9 for a fully masked row, where one fp32 ulp is 64) still compare.
#pragma once

#include "support/dtype.h"

namespace attnjit::reference {

struct Tolerance {
    double atol;
    double rtol;
};

inline Tolerance output_tolerance(DType dtype) {
    switch (dtype) {
    case DType::f16: return {3e-3, 3e-3};
    case DType::bf16: return {2e-2, 2e-2};
    case DType::f32: return {1e-4, 1e-4};
    default: return {0, 0};  // integer outputs do not exist; compare exactly
    }
}

inline constexpr Tolerance kLseTolerance{1e-3, 1e-5};

// Gradients (dQ, dK, dV) of a backward kernel against reference::backward, relative to the
// largest reference gradient g_max of the tensor: |a - e| <= t g_max + t |e|. The backward
// reads the forward's O rounded to the dtype and rounds its gradients to it; the largest
// max |error| / g_max seen over the GPU test matrix (H100, 2026-11-23) was 2.8e-6 (fp32),
// 4.4e-4 (fp16), 4.0e-3 (bf16).
inline double gradient_tolerance(DType dtype) {
    switch (dtype) {
    case DType::f32: return 2e-5;
    case DType::f16: return 2e-3;
    default: return 1.6e-2;
    }
}
inline Tolerance gradient_tolerance(DType dtype, double g_max) {
    const double t = gradient_tolerance(dtype);
    return {t * (g_max > 1e-6 ? g_max : 1e-6), t};
}

// Gradients of captured tensors and scalars that are sums over many score elements
// (slopes[h], a temperature, a runtime scalar, a broadcast bias): d t / d tensor summed over
// every (b, h, i, j) reading an element. Such sums cancel (sum_j dT_ij = 0 per row), so
// their error, relative to the largest reference gradient of the tensor, is larger than an
// elementwise gradient's: |a - e| <= t g_max + t |e| with t below. Provisional (set before
// the first GPU run of these kernels, from the dQ margins above times the sum's length
// scale); a tensor read elementwise without sums (a full-size bias) uses
// gradient_tolerance.
inline double summed_gradient_tolerance(DType dtype) {
    switch (dtype) {
    case DType::f32: return 1e-4;
    case DType::f16: return 1e-2;
    default: return 5e-2;
    }
}

// Floor of the denominator of the reported relative error, |a - e| / max(|e|, floor), so
// elements near zero do not dominate the report (the pass/fail rule above is separate).
inline constexpr double kRelativeErrorFloor = 1e-2;

}  // namespace attnjit::reference
