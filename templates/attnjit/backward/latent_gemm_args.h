// The argument block of latent_gemm, the batched matrix product of the latent projection's
// backward (api/latent_backward.h): C[z] = sum_r A[z, r] B[z, r], fp32 sums, one CTA per
// C tile (so the bits depend on the shapes only). Two-level indices let one launch read
// the projection weights per head and the latent tensors per batch, and sum over (head,
// head dim) or (batch, key) pairs, with no copy:
//   z = blockIdx.z = z_hi * z_lo_count + z_lo     (the batch of products)
//   k = k_hi * k_lo_count + k_lo                  (the summed index; k_lo ragged, zero-filled)
// Plain C++ with no includes: the host and NVRTC compile this same header.
#pragma once

namespace attnjit {

// One operand, A [M x K] or B [K x N] (row: m of A, n of B), in the spec's element type.
// Strides in elements; either k_lo or row has unit stride (k_contiguous says which), and
// the unit-stride count is a multiple of 8 (16-byte copies).
struct LatentGemmOperand {
    const void* data;
    long long z_hi, z_lo;  // strides of z's two levels (0: shared)
    long long k_hi, k_lo;  // strides of k's two levels
    long long row;         // stride of m (A) or n (B)
    int k_contiguous;      // 1: k_lo has unit stride; 0: row has
};

struct LatentGemmArgs {
    LatentGemmOperand a, b;
    void* c;                     // [z][M x N], the element type, unit stride on n, written
    long long c_z_hi, c_z_lo, c_row;
    int m, n;                    // C's rows and columns
    int k_lo_count, k_hi_count;  // the summed index: k_hi_count runs of k_lo_count
    int z_lo_count;              // gridDim.z = z_hi count * z_lo_count
};

}  // namespace attnjit
