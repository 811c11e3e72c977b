// The fixed part of every backward kernel's parameters (backward_dkdv and backward_dq
// share it). Plain C++ with no includes: the host and NVRTC compile this same header.
#pragma once

namespace attnjit {

// Strides are in elements, for the batch, head and sequence dimensions; the head
// dimension always has stride 1. dq, dk, dv have the dtype of q.
struct BackwardArgs {
    const void* q;    // [B, Hq, Nq, Dqk]
    const void* k;    // [B, Hkv, Nk, Dqk]
    const void* v;    // [B, Hkv, Nk, Dv]
    const void* o;    // [B, Hq, Nq, Dv], the forward's output
    const void* d_o;  // [B, Hq, Nq, Dv], the gradient of the loss with respect to o
    const float* lse;  // [B, Hq, Nq], the forward's natural-log LSE
    void* dq;          // [B, Hq, Nq, Dqk]   (written by backward_dq)
    void* dk;          // [B, Hkv, Nk, Dqk]  (written by backward_dkdv)
    void* dv;          // [B, Hkv, Nk, Dv]   (written by backward_dkdv)
    // Workspace [2, B, Hq, Nq] f32, contiguous: LSE * log2(e) (+inf where LSE = -inf) and
    // Delta = rowsum(dO * O) per query row, written by backward_dq (sm80), which runs first,
    // and read by backward_dkdv (sm80). The simt loops recompute both and leave it alone.
    float* stats;
    // backward_fused only: [B, Hq, Nq, Dqk] f32, contiguous: dQ / scale, zeroed by
    // backward_stats, summed into with atomics by backward_fused, read by
    // backward_dq_convert. Null otherwise.
    float* dq_accum;
    // backward_fused, deterministic: [B, Hq, ceil(Nq / block_m)] turn counters, zeroed
    // before the launch. The CTAs add to a query tile's dQ sums one at a time, in
    // descending key-tile order (an ordered accumulation: the same bits every run). Null:
    // in any order (the fast backward).
    int* dq_turns;
    int dq_rotate;  // dq_turns: d >= 1 for the order of turns rotated by d, 0 descending (common/query_schedule.cuh)
    long long q_stride[3];
    long long k_stride[3];
    long long v_stride[3];
    long long o_stride[3];
    long long do_stride[3];
    long long lse_stride[3];
    long long dq_stride[3];
    long long dk_stride[3];
    long long dv_stride[3];
    int batch;
    int q_heads;
    int kv_heads;
    int q_len;
    int kv_len;
    int group;    // q_heads / kv_heads: kv_head = head / group
    float scale;  // softmax scale applied to <q, k>
    // Delta = rowsum(delta_d_o * o) per query row. Without an output gate delta_d_o is d_o.
    // With one (spec.gate(name): out = sigmoid(gate) * O), o is the gated output, delta_d_o
    // the gradient of the loss with respect to it, and d_o the gradient with respect to O,
    // delta_d_o * sigmoid(gate): a [B, Hq, Nq, Dv] workspace that backward_stats writes
    // (the one kernel that writes through d_o) before every other kernel reads it. Then
    // Delta = rowsum(dO_gated * out) = rowsum(d_o * O), as the ungated backward needs.
    const void* delta_d_o;
    long long delta_do_stride[3];
    // The gate's logits [B, Hq, Nq, Dv] (null: no gate) and their gradient (null: not asked
    // for), both of the dtype of q; element strides (0: broadcast, gate only).
    const void* gate;
    void* d_gate;
    long long gate_stride[4];
    long long d_gate_stride[4];
    // The score convolution's kernel gradient (spec.score_conv(name, c_q, c_k)): null, or
    // d_score_conv [Hq, c_q, c_k] in the kernel's dtype (element strides), written by
    // backward_dq_convert from score_conv_partials [B, Hq, key tiles, c_q * c_k] (f32,
    // zeroed before the launch), the per-CTA sums of backward_fused, added over the batch
    // and the key tiles in order.
    void* d_score_conv;
    long long d_score_conv_stride[3];
    float* score_conv_partials;
    int score_conv_key_tiles;
    // The one gradient site of a Variant with kInputGradBatchSum summed over the batch by a
    // launch of its own (sm80/backward_dq.cuh): 1 in backward_dq's main launch (which then
    // skips the site), 2 in the batch-sum launch, grid (ceil(Nk / BN), ceil(Nq / BM), Hq),
    // after it; 0: no batch-sum launch.
    int batch_sum;
    // The batch in batch_sum_chunks chunks (grid z = Hq chunks): chunk c's CTA sums its
    // batches into batch_sum_partials [chunks, Hq, Nq, Nk] (f32), and the CTA that takes a
    // tile's last ticket (batch_sum_tickets [Hq, tiles y, tiles x], zeroed) sums the
    // chunks in order and stores. 1: no partials.
    int batch_sum_chunks;
    float* batch_sum_partials;
    unsigned* batch_sum_tickets;
    // The reciprocal band (spec.reciprocal_band, sm80/reciprocal_band.cuh; the two-pass
    // backward), null without one. Workspaces [B, Hq, Nq, Dqk] f32, contiguous:
    //   band_dq: backward_dq stores its dQ sums there (unscaled) instead of dq; backward_dkdv
    //     adds alpha_h sum_i band dS_ij k_i to the rows of its key tile and stores dq;
    //   band_dk: zeroed; backward_dq adds U_i = sum_j band dS_ij q_j; backward_dkdv adds
    //     alpha_h U over the heads of its group to dK.
    // d alpha [Hq] (f32, element stride d_alpha_stride; null: not asked for) = scale sum
    // <k_i, U_i>: backward_dq's CTAs store their sums in band_alpha_partials [Hq, B, query
    // tiles], and the last CTA of a head (band_tickets [Hq], zeroed) adds them in order.
    // The fused backward (sm80/backward_fused.cuh) uses the same workspaces otherwise:
    //   band_dq: zeroed; backward_fused's CTA of key tile j0 adds alpha_h sum_i band dS_ij k_i
    //     to its rows (no other CTA adds there); backward_dq_convert stores dq = scale
    //     (dq_accum + band_dq);
    //   band_dk: zeroed; backward_fused adds U under the dQ turns of the query tile;
    //   band_dk_sums [B, Hkv, Nk, Dqk] f32: backward_fused stores its dK sums there instead of
    //     dk, and backward_dq_convert (the first head of each group) stores dk = scale
    //     (band_dk_sums + sum_h alpha_h U_h) and forms d alpha (query tiles of its grid).
    float* band_dq;
    float* band_dk;
    float* band_dk_sums;
    float* d_alpha;
    long long d_alpha_stride;
    float* band_alpha_partials;
    unsigned* band_tickets;
};

}  // namespace attnjit
