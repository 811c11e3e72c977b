// Gradients of captured tensors and runtime scalars in backward_dq, and the per-key sites
// and plane sums in backward_dkdv (issue 8 item 4;
// codegen/autodiff.h gives each read site's partial d t / d read, codegen/grad_reduction.h
// how its contributions meet). backward_dq sees every score element (b, h, i, j) exactly
// once, with dT = dL/dt = P (dP - Delta); a read site contributes dT * partial to the
// element it reads. The generated Variant (kInputGrads) provides:
//
//   input_grads(p, hd, row, s, q, k, dt, acc)   every site at one in-range element:
//       elementwise sites (an injective read, bias[b][h][i][j]) store dT * partial into
//       their element, converted to the tensor's dtype (the only write to that element);
//       reduced sites (GradReduction::Uniform: slopes[h], a 0-dim temperature, a runtime
//       scalar) add dT * partial into the thread's acc[n]
//   input_grads_zero(p, hd, q, k)               (kInputGradZeroFill) stores 0 into the
//       elementwise sites' element of (q, k): a CTA clears its rows before its main loop
//       because the tiles it skips (mask classification) store nothing
//   kInputGradAccums, grad_site_index(p, hd, n) (the dense index of site n's element for
//       this CTA's (b, h), -1 outside the tensor), grad_site_output(n),
//       kInputGradOutputs, grad_output_size(p, o), grad_output_store(p, o, dense, v)
//
// The table site (kInputGradTableOutput >= 0; one varying index: table[h][clamp(k - q, -m, m) + m],
// t[h][doc[k]]): input_grads
// adds dT * partial into acc.table[x] (table_add), the thread's own row of table elements in GradWork
// (begin_input_grads clears it); finish_input_grads sums the CTA's rows per element in
// thread order into table_partials[cta], and the last CTA sums, for every gradient element,
// the partials of the CTAs whose (b, h) reads it, in CTA order (grad_table_len,
// grad_table_step, grad_table_dense give the element of table element x of a CTA).
//
// Per-query sites (kInputGradQuerySites): input_grads adds dT * partial into acc.row_add(n,
// c), the thread's sum of the row slot the kernel set (acc.slot); after the key loop the
// threads sharing a row combine in a fixed order and one stores the row's sum
// (input_grads_query_store: direct, or into the planes backward_dkdv sums). Per-key sites
// (kInputGradKeySites, backward_dkdv): input_grads_key likewise per key row, stored per
// query head (input_grads_key_store, store_key_sums), the planes summed by the CTA that
// finishes last (finish_key_grads).
//
// Reduced sites (finish_input_grads): each CTA sums its threads' acc[n] in a fixed order
// (warp butterfly, then warps in order) into partials[n][cta]; the CTA whose ticket says
// it finished last sums, for every element, the partials that name it in a fixed order
// (per (batch, head) over the query tiles, then over sites and (batch, head) groups) and
// stores the gradient. Same inputs, same bits, whatever the CTA schedule.
#pragma once

#include "attnjit/backward/grad_args.h"
#include "attnjit/common/types.cuh"

namespace attnjit {

namespace grad_detail {

__device__ __forceinline__ void fence_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ unsigned ticket_add(unsigned* t) {
    unsigned old;
    asm volatile("atom.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(t) : "memory");
    return old;
}

// Whether this CTA is the last of `arrivals` to take `ticket` (a zeroed counter): thread 0
// takes it between fences (a release of the writes the CTA made before the barrier that
// precedes this call, an acquire of every other CTA's) and tells the block through flag
// (shared memory). Every thread must have fenced its own global writes and passed a
// block_sync first, where more than thread 0 wrote.
__device__ __forceinline__ bool last_to_arrive(unsigned* ticket, unsigned arrivals, unsigned* flag) {
    if (threadIdx.x == 0) {
        fence_gpu();
        flag[0] = ticket_add(ticket) == arrivals - 1 ? 1u : 0u;
        fence_gpu();
    }
    block_sync();
    return flag[0] != 0u;
}

}  // namespace grad_detail

// Variants without gradient sites keep one unused slot, so the array type is valid.
// kSlots: the thread's row sums of per-query (backward_dq) or per-key (backward_dkdv)
// sites, one per row slot of the kernel's layout (sm80: its fragment rows; simt: its
// element slots); row_add adds to the slot the caller set before the hook (`slot`).
template <class Variant, int kSlots = 1>
struct InputGradAcc {
    static constexpr int kN = Variant::kInputGradAccums > 0 ? Variant::kInputGradAccums : 1;
    static constexpr int kRowSites = Variant::kInputGradQuerySites + Variant::kInputGradKeySites > 0
                                         ? Variant::kInputGradQuerySites + Variant::kInputGradKeySites
                                         : 1;
    float v[kN];
    float row[kRowSites][kSlots];
    int slot;
    float* table;  // the thread's row of table elements (begin_input_grads), else null
    // The run of contributions to one table element in registers (consecutive elements of
    // a thread often read the same one: where clamp saturates), added to its row slot
    // when the element changes and at the end: still the thread's fixed order.
    long long table_x;
    float table_run;
    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int n = 0; n < kN; ++n) v[n] = 0.f;
        clear_rows();
        slot = 0;
        table = nullptr;
        table_x = -1;
        table_run = 0.f;
    }
    __device__ __forceinline__ void clear_rows() {
#pragma unroll
        for (int n = 0; n < kRowSites; ++n)
#pragma unroll
            for (int r = 0; r < kSlots; ++r) row[n][r] = 0.f;
    }
    __device__ __forceinline__ void row_add(int n, float c) { row[n][slot] += c; }
    __device__ __forceinline__ void table_add(long long x, float c) {
        if (x != table_x) {
            table_flush();
            table_x = x;
        }
        table_run += c;
    }
    __device__ __forceinline__ void table_flush() {
        if (table_x >= 0) table[table_x] += table_run;
        table_x = -1;
        table_run = 0.f;
    }
};

// The linear index of this CTA in its grid (the slot of its partials).
__device__ __forceinline__ int input_grad_cta() {
    return static_cast<int>((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
}

// Before the main loop, after acc.clear(): the thread's row of the table site's table
// elements (GradWork::table_rows), cleared by the thread (only it writes the row until the
// CTA's end, in its own order of elements: a fixed order).
template <class Variant, class Params, int kThreads, class Acc>
__device__ __forceinline__ void begin_input_grads(const Params& p, Acc& acc) {
    if constexpr (Variant::kInputGradTableOutput >= 0) {
        const GradWork& w = p.grad_work;
        if (w.table_threads != kThreads) __trap();  // the rows were sized for another block (a bug)
        const long long len = w.table_len;
        acc.table = w.table_rows + (static_cast<long long>(input_grad_cta()) * kThreads + threadIdx.x) * len;
        for (long long x = 0; x < len; ++x) acc.table[x] = 0.f;
    }
}

// Elementwise sites: store 0 into every (q, k) element of query rows [m0, m0 + rows) of
// this CTA (rows past Nq excluded), then a barrier, so the stores of the main loop land
// after these. Only when tiles may be skipped (kInputGradZeroFill).
template <class Variant, class Params, int kThreads>
__device__ __forceinline__ void zero_fill_input_grads(const Params& p, const typename Variant::Head& hd, int m0,
                                                      int rows, int nq, int nk) {
    if constexpr (Variant::kInputGradZeroFill) {
        const int last = (m0 + rows < nq ? m0 + rows : nq) - m0;
        const long long total = static_cast<long long>(last) * nk;
        for (long long e = threadIdx.x; e < total; e += kThreads)
            Variant::input_grads_zero(p, hd, m0 + static_cast<int>(e / nk), static_cast<int>(e % nk));
        block_sync();
    }
}

// The end of a backward_dq CTA: the fixed-order sums of the reduced sites (see the top).
// smem: the kernel's shared memory, free again (every warp is past its last use), of
// kSmemBytes >= input_grad_smem_bytes(kThreads, 1) bytes (larger chunks when it has more).
//
// The last CTA sums in two steps, both in a fixed order and with independent loads in
// flight: (1) per site and (batch, head) group, the partials of the group's query tiles
// (grid x, contiguous in the slots; a summed site's element depends on (b, h) only), in
// tile order, written over the group's first slot; (2) per chunk of output elements in
// shared memory, the group sums staged through shared memory chunk by chunk and added by
// the thread that owns the element (e % kThreads), in (site, group) order.
// Shared memory of the last CTA's sums with chunks of kMul * kThreads elements and group sums.
constexpr int input_grad_smem_bytes(int threads, int mul) { return (64 + mul * threads) * 4 + mul * threads * (8 + 4); }

template <class Variant, class Params, int kThreads, int kSmemBytes, class Acc>
__device__ __forceinline__ void finish_input_grads(const Params& p, const typename Variant::Head& hd, Acc& acc,
                                                   unsigned char* smem) {
    if constexpr (Variant::kInputGradOutputs > 0) {
        static_assert(kSmemBytes >= input_grad_smem_bytes(kThreads, 1),
                      "the sums of gradients of captured tensors need more shared memory than the kernel has");
        constexpr int kMul = input_grad_smem_bytes(kThreads, 4) <= kSmemBytes   ? 4
                             : input_grad_smem_bytes(kThreads, 2) <= kSmemBytes ? 2
                                                                                 : 1;
        constexpr int kWarps = kThreads / 32;
        constexpr int kChunk = kThreads * kMul;  // output elements per pass
        constexpr int kStage = kThreads * kMul;  // group sums staged per step
        const GradWork& w = p.grad_work;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int cta = static_cast<int>((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
        float* red = reinterpret_cast<float*>(smem);  // [kWarps]
        unsigned* flag = reinterpret_cast<unsigned*>(smem) + 32;
        block_sync();
#pragma unroll
        for (int n = 0; n < Variant::kInputGradAccums; ++n) {
            float v = acc.v[n];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += shfl_xor(v, o);
            if (lane == 0) red[warp] = v;
            block_sync();
            if (tid == 0) {
                float s = 0.f;
                for (int i = 0; i < kWarps; ++i) s += red[i];
                w.partials[static_cast<long long>(n) * w.ctas + cta] = s;
                w.index[static_cast<long long>(n) * w.ctas + cta] = Variant::grad_site_index(p, hd, n);
            }
            block_sync();
        }
        if constexpr (Variant::kInputGradTableOutput >= 0) {
            acc.table_flush();
            block_sync();
            // The CTA's threads' rows summed per table element in thread order (the rows
            // are this CTA's own writes: visible after the barrier).
            const long long len = w.table_len;
            const float* rows = w.table_rows + static_cast<long long>(cta) * kThreads * len;
            for (long long x = tid; x < len; x += kThreads) {
                float s = 0.f;
                for (int t = 0; t < kThreads; ++t) s += rows[t * len + x];
                w.table_partials[static_cast<long long>(cta) * len + x] = s;
            }
            if (tid == 0) w.table_base[cta] = Variant::grad_table_dense(p, hd, 0);
            grad_detail::fence_gpu();  // each thread's partials, before tid 0's ticket
            block_sync();
        }
        if (!grad_detail::last_to_arrive(w.ticket, static_cast<unsigned>(w.ctas), flag)) return;

        // The last CTA. Nothing read these slots before (no stale cache line): plain loads.
        const int tiles = static_cast<int>(gridDim.x), groups = static_cast<int>(gridDim.y * gridDim.z);
        for (int n = 0; n < Variant::kInputGradAccums; ++n)  // (1)
            for (int g = tid; g < groups; g += kThreads) {
                float* part = w.partials + static_cast<long long>(n) * w.ctas + static_cast<long long>(g) * tiles;
                float s = 0.f;
                for (int x = 0; x < tiles; ++x) s += part[x];
                part[0] = s;
            }
        block_sync();
        float* sum = reinterpret_cast<float*>(smem) + 64;                                  // [kChunk]
        long long* st_index = reinterpret_cast<long long*>(smem + (64 + kChunk) * 4);      // [kStage]
        float* st_value = reinterpret_cast<float*>(st_index + kStage);                     // [kStage]
        for (int o = 0; o < Variant::kInputGradOutputs; ++o) {  // (2)
            if (o == Variant::kInputGradTableOutput) continue;  // (3)
            const long long size = Variant::grad_output_size(p, o);
            for (long long e0 = 0; e0 < size; e0 += kChunk) {
                for (int e = tid; e < kChunk; e += kThreads) sum[e] = 0.f;
                for (int n = 0; n < Variant::kInputGradAccums; ++n) {
                    if (Variant::grad_site_output(n) != o) continue;
                    const long long base = static_cast<long long>(n) * w.ctas;
                    for (int g0 = 0; g0 < groups; g0 += kStage) {
                        block_sync();  // the previous stage is consumed (and sum[] cleared)
                        for (int i = tid; i < kStage; i += kThreads) {
                            const int g = g0 + i;
                            st_index[i] = g < groups ? w.index[base + static_cast<long long>(g) * tiles] : -1;
                            st_value[i] = g < groups ? w.partials[base + static_cast<long long>(g) * tiles] : 0.f;
                        }
                        block_sync();
                        const int m = groups - g0 < kStage ? groups - g0 : kStage;
                        for (int i = 0; i < m; ++i) {
                            const long long idx = st_index[i] - e0;
                            if (idx >= 0 && idx < kChunk && static_cast<int>(idx % kThreads) == tid) sum[idx] += st_value[i];
                        }
                    }
                }
                block_sync();
                for (int e = tid; e < kChunk && e0 + e < size; e += kThreads) Variant::grad_output_store(p, o, e0 + e, sum[e]);
                block_sync();
            }
        }
        if constexpr (Variant::kInputGradTableOutput >= 0) {  // (3)
            // Every element of the table site's gradient, by one thread: the partials of
            // the CTAs whose (b, h) reads it, in CTA order (each CTA's table element x of
            // base + x * step; step: the dense distance of consecutive table elements).
            constexpr int o = Variant::kInputGradTableOutput;
            const long long size = Variant::grad_output_size(p, o), len = w.table_len;
            const long long step = Variant::grad_table_step(p);  // >= 1
            for (long long e = tid; e < size; e += kThreads) {
                float s = 0.f;
                for (int c = 0; c < w.ctas; ++c) {
                    const long long base = w.table_base[c];
                    if (base < 0 || e < base) continue;
                    const long long off = e - base;
                    const long long x = step == 1 ? off : off % step == 0 ? off / step : len;  // len: none
                    if (x < len) s += w.table_partials[static_cast<long long>(c) * len + x];
                }
                Variant::grad_output_store(p, o, e, s);
            }
        }
        if (tid == 0) *w.ticket = 0u;  // ready for a next launch (the host clears it too)
    }
}

// Per-query (backward_dq) and per-key (backward_dkdv) sites on the sm80 fragment layout:
// the thread holds, per site n and row slot r, the sum of its own columns of the row in
// the order it met them (acc.row[n][r]); the 4 lanes of a quad share a row (sm80/fragment.cuh),
// so a butterfly over them gives every lane the same bits, and the row leader stores the
// row's sum (kKey: input_grads_key_store for key row0 + row(r) < n, else
// input_grads_query_store). Clears the sums. Every lane of the warp calls it.
template <class Variant, bool kKey, class Params, class Layout, class Acc>
__device__ __forceinline__ void store_row_sums(const Params& p, const typename Variant::Head& hd, Acc& acc,
                                               const Layout& l, int row0, int n) {
    constexpr int kSites = kKey ? Variant::kInputGradKeySites : Variant::kInputGradQuerySites;
#pragma unroll
    for (int s = 0; s < kSites; ++s)
#pragma unroll
        for (int r = 0; r < Layout::kRows; ++r) {
            float v = acc.row[s][r];
            v += shfl_xor(v, 1);
            v += shfl_xor(v, 2);
            const int x = row0 + l.row(r);
            if (l.row_leader() && x < n) {
                if constexpr (kKey)
                    Variant::input_grads_key_store(p, hd, s, x, v);
                else
                    Variant::input_grads_query_store(p, hd, s, x, v);
            }
        }
    acc.clear_rows();
}

// backward_dkdv (sm80), per-key sites: the CTA walks the query heads of its kv head in
// order, head by head; when it leaves head from_h for head to_h (to_h = the group's end
// after the last step) it stores head from_h's key sums (hd: its Head) and zeros for the
// heads it skipped (every tile masked off), so that every (b, h, key) element is written
// once. Called uniformly by the whole block.
template <class Variant, class Params, class Layout, class Acc>
__device__ __forceinline__ void store_key_sums(const Params& p, const typename Variant::Head& hd, Acc& acc,
                                               const Layout& l, int b, int kvh, int from_h, int to_h, int n0,
                                               int nk) {
    if constexpr (Variant::kInputGradKeySites > 0) {
        store_row_sums<Variant, true>(p, hd, acc, l, n0, nk);
        for (int h = from_h + 1; h < to_h; ++h) {
            const typename Variant::Head hz = Variant::make_head(p, b, h, kvh);
            store_row_sums<Variant, true>(p, hz, acc, l, n0, nk);  // zeros
        }
    }
}

// The end of a backward_dkdv CTA with per-key sites: the CTA whose ticket says it finished
// last sums the planes of the per-key gradients that have planes, in plane order
// (Variant::finish_key_grad_planes, loads past L1), and stores every element. smem: free
// again (every warp is past its last use). The ticket is GradWork's, zero at the launch
// (backward_dq's last CTA and the host leave it so).
template <class Variant, class Params, int kThreads>
__device__ __forceinline__ void finish_key_grads(const Params& p, unsigned char* smem) {
    if constexpr (Variant::kInputGradKeySites > 0) {
        const GradWork& w = p.grad_work;
        unsigned* flag = reinterpret_cast<unsigned*>(smem);
        const unsigned ctas = gridDim.x * gridDim.y * gridDim.z;
        grad_detail::fence_gpu();  // each thread's plane stores, before tid 0's ticket
        block_sync();
        if (!grad_detail::last_to_arrive(w.ticket, ctas, flag)) return;
        Variant::finish_key_grad_planes(p, threadIdx.x, kThreads);
        if (threadIdx.x == 0) *w.ticket = 0u;  // ready for a next launch (the host clears it too)
    }
}

// backward_dkdv: the plane-order sums of the elementwise gradients that went through
// planes (backward/grad_args.h), each element by one thread of the grid (grid-stride).
template <class Variant, class Params, int kThreads>
__device__ __forceinline__ void sum_input_grad_planes(const Params& p) {
    if constexpr (Variant::kInputGradPlanes) {
        const long long cta = (static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        const long long ctas = static_cast<long long>(gridDim.x) * gridDim.y * gridDim.z;
        Variant::finish_input_grad_planes(p, cta * kThreads + threadIdx.x, ctas * kThreads);
    }
}

}  // namespace attnjit
