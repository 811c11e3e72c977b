// The argument block of backward_sink_grad (attention sinks' gradient): what it reads of
// the forward and of dO, and where d sinks goes. Its own block rather than fields of
// BackwardArgs, so the other backward kernels' parameters do not change. Plain C++ with
// no includes: the host and NVRTC compile this same header.
#pragma once

namespace attnjit {

// Query rows of one (batch, head) that one CTA of the first phase sums. A constant, not a
// function of the GPU, so the order of the sums (and so the bits of d sinks) depends on
// the shapes only.
constexpr int kSinkGradChunkRows = 512;

// Strides are in elements; o and d_o have the dtype of q, unit stride on the head dim.
// q_len and kv_len have the names of ForwardArgs' and BackwardArgs': the generated Variant
// (make_head, hoisted terms) may read p.args.q_len and p.args.kv_len.
//
// Two launches of the same kernel:
//   phase 0, grid (chunks, Hq): CTA (c, h) sums rows [i0, i0 + kSinkGradChunkRows) of
//     batch b (c = b * chunks_per_batch + i0 / kSinkGradChunkRows) into partials[h * chunks + c];
//     not launched when chunks == 0 (B == 0 or Nq == 0);
//   phase 1, grid (Hq): d_sinks[h] = -(partials[h * chunks + 0] + ... + [h * chunks + chunks - 1]),
//     summed in that order.
struct SinkGradArgs {
    const void* o;     // [B, Hq, Nq, Dv], the forward's output
    const void* d_o;   // [B, Hq, Nq, Dv]
    const float* lse;  // [B, Hq, Nq], the forward's natural-log LSE (it includes the sink)
    void* d_sinks;     // [Hq] in the sinks tensor's element type, written by phase 1
    float* partials;   // [Hq, chunks] f32 workspace, written by phase 0, read by phase 1
    long long o_stride[3];
    long long do_stride[3];
    long long lse_stride[3];
    long long d_sinks_stride;
    int batch;
    int q_heads;
    int q_len;
    int kv_len;
    int chunks_per_batch;  // ceil(Nq / kSinkGradChunkRows)
    int chunks;            // batch * chunks_per_batch
    int phase;             // 0 or 1
};

}  // namespace attnjit
