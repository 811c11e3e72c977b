// The fixed part of every forward kernel's parameters. Plain C++ with no includes:
// the host (runtime/launcher) and NVRTC (the kernels) compile this same header, so
// the layout they agree on is written once.
#pragma once

namespace attnjit {

// Strides are in elements, for the batch, head and sequence dimensions; the head
// dimension always has stride 1.
struct ForwardArgs {
    const void* q;   // [B, Hq, Nq, Dqk]
    const void* k;   // [B, Hkv, Nk, Dqk]
    const void* v;   // [B, Hkv, Nk, Dv]
    void* o;         // [B, Hq, Nq, Dv], same dtype as q
    float* lse;      // [B, Hq, Nq] fp32 natural-log LSE; null when not requested
    long long q_stride[3];
    long long k_stride[3];
    long long v_stride[3];
    long long o_stride[3];
    long long lse_stride[3];
    int batch;
    int q_heads;
    int kv_heads;
    int q_len;
    int kv_len;
    int group;         // q_heads / kv_heads: kv_head = head / group
    float scale;       // softmax scale applied to <q, k>
    float scale_log2;  // scale * log2(e), folded into exp2 when there is no score_mod
    // The sm90 loop's persistent grid: the next work item to hand out, 0 before the launch
    // (sm90/mainloop.cuh). Null: one CTA an item, as the other loops always launch.
    int* work_counter;
    // The CTA order of this launch (kernel_config.h's kOrder*, common/cta_order.cuh):
    // kOrderAuto (0), the kernel's own; any other, chosen by the host (CtaSchedule).
    int cta_order;
};

// A captured tensor of rank R as the kernel sees it: a typed pointer and element
// strides (0 = broadcast). Shapes are checked on the host before launch.
template <class T, int R>
struct TensorArg {
    const T* ptr;
    long long stride[R];
};

}  // namespace attnjit
