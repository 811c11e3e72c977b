// The argument block of backward_sink_grad (attention sinks' gradient): what it reads of
// the forward and of dO, and where d sinks goes. Its own block rather than fields of
// BackwardArgs, so the other backward kernels' parameters do not change. Plain C++ with
// no includes: the host and NVRTC compile this same header.
#pragma once

namespace attnjit {

// Strides are in elements; o and d_o have the dtype of q, unit stride on the head dim.
// q_len and kv_len have the names of ForwardArgs' and BackwardArgs': the generated Variant
// (make_head, hoisted terms) may read p.args.q_len and p.args.kv_len.
struct SinkGradArgs {
    const void* o;     // [B, Hq, Nq, Dv], the forward's output
    const void* d_o;   // [B, Hq, Nq, Dv]
    const float* lse;  // [B, Hq, Nq], the forward's natural-log LSE (it includes the sink)
    void* d_sinks;     // [Hq] in the sinks tensor's element type, written
    long long o_stride[3];
    long long do_stride[3];
    long long lse_stride[3];
    long long d_sinks_stride;
    int batch;
    int q_heads;
    int q_len;
    int kv_len;
};

}  // namespace attnjit
